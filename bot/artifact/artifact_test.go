package artifact

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// A build worker stores an artifact; a lab worker with its own store
// pulls it over HTTP and gets the same files.
func TestPutServePull(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "boot"), 0o755)
	big := bytes.Repeat([]byte("kernel"), 200000)
	os.WriteFile(filepath.Join(src, "boot", "bzImage"), big, 0o644)
	os.WriteFile(filepath.Join(src, "config"), []byte("CONFIG_RDMA_RXE=y\n"), 0o600)

	builder := Dir{Root: t.TempDir()}
	if err := builder.Put(context.Background(), "mainline-abc123", src); err != nil {
		t.Fatal(err)
	}
	if err := builder.Put(context.Background(), "../evil", src); err == nil {
		t.Fatal("bad key accepted")
	}
	srv := httptest.NewServer(http.StripPrefix("/artifacts/", builder))
	defer srv.Close()

	lab := Dir{Root: t.TempDir()}
	p, err := lab.Pull(context.Background(), srv.Client(), srv.URL, "mainline-abc123")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(p, "boot", "bzImage"))
	if !bytes.Equal(got, big) {
		t.Fatal("pulled kernel differs")
	}
	st, _ := os.Stat(filepath.Join(p, "config"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	if _, err := lab.Pull(context.Background(), srv.Client(), srv.URL, "missing"); err == nil {
		t.Fatal("missing artifact pulled")
	}
	// No temp directories left behind.
	ents, _ := os.ReadDir(lab.Root)
	if len(ents) != 1 {
		t.Fatalf("store holds %d entries", len(ents))
	}
}

// A cancelled context stops the copy with its error and leaves nothing
// behind: no artifact under the key, no temporary directory.
func TestPutCancelled(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "bzImage"), []byte("kernel"), 0o644)
	d := Dir{Root: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Put(ctx, "mainline-abc123", src); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if d.Has("mainline-abc123") {
		t.Fatal("a cancelled put stored the artifact")
	}
	if left, _ := os.ReadDir(d.Root); len(left) != 0 {
		t.Fatalf("a cancelled put left %v behind", left)
	}
	if err := d.Put(context.Background(), "mainline-abc123", src); err != nil || !d.Has("mainline-abc123") {
		t.Fatalf("the same put with a live context: %v", err)
	}
}
