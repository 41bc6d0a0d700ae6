package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// Golden compares got with the file at path, or rewrites it (making its
// directory) when update is set: the tests' -update flag.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
		return // a recording TB's Fatalf returns
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it if intended):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
