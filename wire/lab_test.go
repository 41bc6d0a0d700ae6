package wire

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/lab"
)

// One real boot of the lab kernel on the QEMU pair, through the adapter:
// the run becomes a sample with write and read figures per iteration.
func TestLabAdapterRealPair(t *testing.T) {
	kernel, image := os.Getenv("RDMABOT_TEST_KERNEL"), os.Getenv("RDMABOT_TEST_IMAGE")
	if kernel == "" || image == "" {
		t.Skip("RDMABOT_TEST_KERNEL (lab bzImage) and RDMABOT_TEST_IMAGE (rdmabot lab image) must be set")
	}
	cfg := lab.DefaultConfig()
	qc := cfg.QEMU
	qc.Icount = ""
	// The pair takes the tests' heavy lock itself, unless the caller holds it.
	qc.HeavyLock = testenv.HeavyLockPath()
	dir := t.TempDir()
	if err := os.Symlink(kernel, filepath.Join(dir, "bzImage")); err != nil {
		t.Fatal(err)
	}
	test := lab.DefaultTest()
	test.SizeMiB, test.Iterations = 32, 2
	l := &Lab{Cfg: cfg, Test: test, Log: slog.New(slog.DiscardHandler),
		Pairs: map[string]lab.Pair{"qemu": lab.NewQEMUPair(qc, lab.Image{Dir: filepath.Dir(image), Path: image}, slog.New(slog.DiscardHandler))}}
	var trace bytes.Buffer
	samples, err := l.Run(context.Background(), "qemu", dir, 1, &trace)
	if err != nil {
		t.Fatalf("%v\n%s", err, trace.String())
	}
	s := samples[0]
	if s.Crash != "" || len(s.Iterations["read_MBps"]) != 2 || s.Metrics["write_MBps"] <= 0 {
		t.Fatalf("sample %+v\n%s", s, trace.String())
	}
	t.Logf("%s", trace.String())
}
