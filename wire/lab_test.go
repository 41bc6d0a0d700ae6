package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
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
	st, err := store.Open(context.Background(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := &Lab{Cfg: cfg, Test: test, Log: slog.New(slog.DiscardHandler), Consoles: st,
		Pairs: map[string]lab.Pair{"qemu": lab.NewQEMUPair(qc, lab.Image{Dir: filepath.Dir(image), Path: image}, slog.New(slog.DiscardHandler))}}
	var trace bytes.Buffer
	samples, err := l.Run(context.Background(), "qemu", flow.Boot{Dir: dir}, 1, &trace)
	if err != nil {
		t.Fatalf("%v\n%s", err, trace.String())
	}
	s := samples[0]
	if s.Crash != "" || len(s.Iterations["read_MBps"]) != 2 || s.Metrics["write_MBps"] <= 0 {
		t.Fatalf("sample %+v\n%s", s, trace.String())
	}
	// Both guests' whole consoles are kept and named by the sample.
	for _, role := range []string{"server", "client"} {
		text, err := st.Console(context.Background(), s.Consoles[role])
		if err != nil || !strings.Contains(text, "Linux version") || !strings.Contains(text, "rb.role="+role) {
			t.Errorf("%s console %q: %d bytes, %v", role, s.Consoles[role], len(text), err)
		}
	}
	t.Logf("%s", trace.String())
}

// consolePair is a pair whose boots print a console on each guest.
type consolePair struct{ n int }

func (p *consolePair) Run(ctx context.Context, k lab.Kernel, t lab.Test) (*lab.Result, error) {
	p.n++
	r := &lab.Result{Pair: "qemu", Test: t, Passed: true, Iterations: []lab.Iteration{{N: 1, WriteMBps: 8, ReadMBps: 8, WriteSecs: 2, ReadSecs: 2}}}
	r.Server = lab.Host{Role: "server", Console: fmt.Sprintf("server boot %d\n", p.n)}
	r.Client = lab.Host{Role: "client", Console: fmt.Sprintf("client boot %d\n", p.n)}
	return r, nil
}

type failingKeeper struct{}

func (failingKeeper) PutConsole(context.Context, string) (string, error) {
	return "", errors.New("database is gone")
}

// Every boot's consoles are kept and named by its sample; a console that
// cannot be kept is the bot's fault (INFRA), not the kernel's.
func TestLabKeepsConsoles(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := &Lab{Cfg: lab.DefaultConfig(), Test: lab.DefaultTest(), Log: slog.New(slog.DiscardHandler), Consoles: st,
		Pairs: map[string]lab.Pair{"qemu": &consolePair{}}}
	samples, err := l.Run(ctx, "qemu", flow.Boot{Dir: t.TempDir()}, 2, io.Discard)
	if err != nil || len(samples) != 2 {
		t.Fatalf("%d samples, %v", len(samples), err)
	}
	for i, s := range samples {
		for _, role := range []string{"server", "client"} {
			text, err := st.Console(ctx, s.Consoles[role])
			if want := fmt.Sprintf("%s boot %d\n", role, i+1); err != nil || text != want {
				t.Errorf("boot %d %s: %q %v, want %q", i+1, role, text, err, want)
			}
		}
	}

	l.Consoles = failingKeeper{}
	if _, err := l.Run(ctx, "qemu", flow.Boot{Dir: t.TempDir()}, 1, io.Discard); !flow.IsInfra(err) || !strings.Contains(err.Error(), "database is gone") {
		t.Fatalf("console not kept: %v, want INFRA", err)
	}
}

// The side a series' kernel boots on comes from the files its patches
// change.
func TestLabCandidateSide(t *testing.T) {
	patch := func(file string) []byte {
		return []byte("From: Dev <dev@example.org>\nSubject: [PATCH] x\nMessage-ID: <" + file + "@x>\n\n---\n" +
			"diff --git a/" + file + " b/" + file + "\n--- a/" + file + "\n+++ b/" + file + "\n@@ -1,3 +1,3 @@ int f(void)\n a\n-b\n+c\n d\n")
	}
	l := &Lab{}
	for _, c := range []struct {
		files []string
		want  string
	}{
		{[]string{"net/sunrpc/xprtrdma/verbs.c"}, lab.SideClient},
		{[]string{"net/sunrpc/xprtrdma/svc_rdma_sendto.c"}, lab.SideServer},
		{[]string{"net/sunrpc/xprtrdma/verbs.c", "drivers/infiniband/core/cq.c"}, lab.SideServer},
	} {
		var s flow.Series
		for _, f := range c.files {
			s.Patches = append(s.Patches, patch(f))
		}
		if got := l.CandidateSide(s); got != c.want {
			t.Errorf("%v: %s, want %s", c.files, got, c.want)
		}
	}
}
