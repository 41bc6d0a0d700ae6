package feed

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// Every object of a packed, deltified archive with some loose objects on
// top reads the same through packReader as through go-git.
func TestPackReaderAgreesWithGoGit(t *testing.T) {
	a := newArchive(t, t.TempDir()+"/0.git")
	for i := 1; i <= 40; i++ {
		a.commit(tipOrEmpty(a), "m", testMail(i)+strings.Repeat("a long quoted paragraph that repeats\n", 20+i))
	}
	a.git("", "gc", "-q", "--aggressive")
	if !strings.Contains(a.git("", "verify-pack", "-v", mustGlob(t, a.dir+"/objects/pack/*.idx")), "chain length") {
		t.Fatal("git made no deltas; the test would not cover them")
	}
	a.add(41) // loose
	r, st, err := openRepo(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pr, err := openPackReader(a.dir, r.Storer)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.close()
	n := 0
	for _, line := range strings.Split(a.git("", "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"), "\n") {
		h := plumbing.NewHash(line)
		typ, got, err := pr.read(h)
		if err != nil {
			t.Fatal(err)
		}
		o, err := r.Storer.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := o.Reader()
		want, _ := io.ReadAll(rc)
		rc.Close()
		if typ != o.Type() || !bytes.Equal(got, want) {
			t.Fatalf("object %s: %s %q, go-git says %s %q", h, typ, got, o.Type(), want)
		}
		n++
	}
	if n < 41*3 {
		t.Fatalf("compared only %d objects", n)
	}
}

func tipOrEmpty(a *archive) string {
	out := a.git("", "for-each-ref", "--format=%(objectname)", "refs/heads/master")
	return strings.TrimSpace(out)
}

func mustGlob(t *testing.T, pat string) string {
	t.Helper()
	m, err := filepath.Glob(pat)
	if err != nil || len(m) != 1 {
		t.Fatalf("glob %s: %v %v", pat, m, err)
	}
	return m[0]
}
