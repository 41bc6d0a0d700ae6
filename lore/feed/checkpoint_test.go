package feed

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestFileCheckpoints(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "cp.json")
	cps, err := OpenFileCheckpoints(p)
	if err != nil {
		t.Fatal(err)
	}
	if cp, _ := cps.Load(ctx, "git linux-rdma"); cp != "" {
		t.Fatalf("empty store has %q", cp)
	}
	for _, kv := range [][2]string{{"git linux-rdma", "a"}, {"imap x", "b"}, {"git linux-rdma", "c"}} {
		if err := cps.Save(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	reopened, err := OpenFileCheckpoints(p)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"git linux-rdma": "c", "imap x": "b"} {
		if got, _ := reopened.Load(ctx, k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}

	// A store that cannot be written keeps its last good state.
	gone := filepath.Join(t.TempDir(), "gone")
	os.Mkdir(gone, 0o755)
	broken, err := OpenFileCheckpoints(filepath.Join(gone, "cp.json"))
	if err != nil {
		t.Fatal(err)
	}
	broken.Save(ctx, "imap x", "b")
	os.RemoveAll(gone)
	if err := broken.Save(ctx, "imap x", "d"); err == nil {
		t.Fatal("Save into a missing directory succeeded")
	}
	if got, _ := broken.Load(ctx, "imap x"); got != "b" {
		t.Fatalf("a failed Save changed the state to %q", got)
	}

	if err := os.WriteFile(p, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileCheckpoints(p); err == nil {
		t.Fatal("a corrupt checkpoint file was accepted")
	}
}
