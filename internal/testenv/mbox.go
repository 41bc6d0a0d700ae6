package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Mbox is the *.eml files of dir, in name order, as one mboxrd: each
// mail after a From_ line, its own "From " lines quoted.
func Mbox(t testing.TB, dir string) []byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.eml"))
	sort.Strings(files)
	var b bytes.Buffer
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("From rdmabot@example Mon Jan  1 00:00:00 2024\n")
		for _, l := range strings.SplitAfter(string(raw), "\n") {
			if strings.HasPrefix(strings.TrimLeft(l, ">"), "From ") {
				b.WriteString(">")
			}
			b.WriteString(l)
		}
		if !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}
