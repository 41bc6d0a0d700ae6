package bundle

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// A bundle's archive is made once and served as the same file from then
// on; another bundle, or a file of it changed on disk, is another
// archive; the least recently served go past the bound, and what a cut
// write left goes with them.
func TestCacheMakesOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(t.TempDir(), "rdmabot")
	big := make([]byte, 4<<20)
	rand.Read(big)
	if err := os.WriteFile(bin, big, 0o755); err != nil {
		t.Fatal(err)
	}
	bundleOf := func(id int64) *Bundle {
		t.Helper()
		b, err := Make(Input{TestID: id, Subject: "s", Base: strings.Repeat("ab", 20), Patches: [][]byte{[]byte("From: a@x\n\nbody\n")}, Binary: bin})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	c := NewCache(filepath.Join(dir, "archives"), 2)
	now := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	open := func(b *Bundle) os.FileInfo {
		t.Helper()
		f, err := c.Open(ctx, b, now)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		names := testenv.TarNames(t, f)
		if names[0] != b.Dir+"/" || names[len(names)-1] != b.Dir+"/rdmabot" {
			t.Errorf("archive holds %q", names)
		}
		return st
	}
	first := open(bundleOf(1))
	now = now.Add(time.Minute)
	if again := open(bundleOf(1)); !os.SameFile(first, again) {
		t.Error("the same bundle was made again")
	}
	now = now.Add(time.Minute)
	if other := open(bundleOf(2)); os.SameFile(first, other) {
		t.Error("another test's bundle is the first one's archive")
	}
	// The binary replaced: the archive is made again.
	if err := os.WriteFile(bin+".new", big[:1<<20], 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(c.dir, ".part-cut"), []byte("half"), 0o644)
	now = now.Add(time.Minute)
	if renewed := open(bundleOf(1)); os.SameFile(first, renewed) || renewed.Size() >= first.Size() {
		t.Errorf("a new binary: the old archive served (%d bytes, was %d)", renewed.Size(), first.Size())
	}
	ents, _ := os.ReadDir(c.dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if len(left) != 2 || !strings.HasPrefix(left[0], "rdmabot-test-") || !strings.HasPrefix(left[1], "rdmabot-test-") {
		t.Errorf("kept %q, want the two newest archives", left)
	}
}

// An archive that cannot be made is an error and leaves nothing behind;
// a request given up while another archive is made waits no more.
func TestCacheErrors(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	b := &Bundle{Dir: "rdmabot-test-1", Files: []File{{Name: "gone", Mode: 0o644, Path: filepath.Join(t.TempDir(), "gone")}}}
	c := NewCache(t.TempDir(), 0)
	if c.keep != DefaultKeep {
		t.Errorf("keep %d", c.keep)
	}
	if _, err := c.Open(ctx, b, now); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("a missing file: %v", err)
	}
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o644)
	ok := &Bundle{Dir: "rdmabot-test-1", Files: []File{{Name: "README", Mode: 0o644, Data: []byte("x")}}}
	if _, err := NewCache(notDir, 1).Open(ctx, ok, now); err == nil {
		t.Error("an archive made where no directory can be")
	}
	// A file that goes between the key and the write.
	racy := filepath.Join(t.TempDir(), "racy")
	os.WriteFile(racy, []byte("x"), 0o644)
	vanish := &Bundle{Dir: "rdmabot-test-2", Files: []File{{Name: "racy", Mode: 0o644, Path: racy}}}
	if err := c.write(vanish, filepath.Join(c.dir, "x.tar.gz"), now); err != nil {
		t.Fatal(err)
	}
	os.Remove(racy)
	if err := c.write(vanish, filepath.Join(c.dir, "y.tar.gz"), now); err == nil {
		t.Error("a write of a file that is gone")
	}
	if ents, _ := os.ReadDir(c.dir); len(ents) != 1 {
		t.Errorf("left %d files, want the one whole archive", len(ents))
	}
	c.sem <- struct{}{} // another archive is being made
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Open(cctx, ok, now); !errors.Is(err, context.Canceled) {
		t.Errorf("a request given up: %v", err)
	}
}
