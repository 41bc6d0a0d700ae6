package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParsePeerSummary(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       float64
		err        string
	}{
		{"passed", "kernel=/k initrd=/i rdma=rxe mb=32 iters=3\nwall_s=23.7 watch_rc=0 qemu_maxrss_kB server=317864 client=351812\nserver host+ 2.33s BOOTED\n", 23.7, ""},
		{"watcher failed", "wall_s=41.0 watch_rc=2 qemu_maxrss_kB server=1 client=1\n", 0, "watch_rc=2"},
		{"no figure", "kernel=/k\n", 0, "no wall_s line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "summary.txt")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := parsePeerSummary(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to say %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
