package lab

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/testenv"
)

// memKeeper keeps consoles in memory, as the bot's store does on disk.
type memKeeper struct {
	mu   sync.Mutex
	kept []string
}

func (k *memKeeper) PutConsole(_ context.Context, text string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept = append(k.kept, text)
	return strconv.Itoa(len(k.kept) - 1), nil
}

func (k *memKeeper) Console(_ context.Context, id string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	i, err := strconv.Atoi(id)
	if err != nil || i < 0 || i >= len(k.kept) {
		return "", fmt.Errorf("no console %q", id)
	}
	return k.kept[i], nil
}

// One real boot of the lab kernel on the QEMU pair, through the runner:
// the run becomes a sample with write and read figures per iteration.
func TestRunnerRealPair(t *testing.T) {
	kernel, image := os.Getenv("RDMABOT_TEST_KERNEL"), os.Getenv("RDMABOT_TEST_IMAGE")
	if kernel == "" || image == "" {
		t.Skip("RDMABOT_TEST_KERNEL (lab bzImage) and RDMABOT_TEST_IMAGE (rdmabot lab image) must be set")
	}
	cfg := DefaultConfig()
	qc := cfg.QEMU
	qc.Icount = ""
	// The pair takes the tests' heavy lock itself, unless the caller holds it.
	qc.HeavyLock = testenv.HeavyLockPath()
	dir := t.TempDir()
	if err := os.Symlink(kernel, filepath.Join(dir, "bzImage")); err != nil {
		t.Fatal(err)
	}
	test := DefaultTest()
	test.SizeMiB, test.Iterations = 32, 2
	st := &memKeeper{}
	l := &Runner{Cfg: cfg, Test: test, Log: slog.New(slog.DiscardHandler), Consoles: st,
		Pairs: map[string]Pair{"qemu": NewQEMUPair(qc, Image{Dir: filepath.Dir(image), Path: image}, slog.New(slog.DiscardHandler))}}
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

func (p *consolePair) Run(ctx context.Context, k Kernel, t Test) (*Result, error) {
	p.n++
	r := &Result{Pair: "qemu", Test: t, Passed: true, Iterations: []Iteration{{N: 1, WriteMBps: 8, ReadMBps: 8, WriteSecs: 2, ReadSecs: 2}}}
	r.Server = Host{Role: "server", Console: fmt.Sprintf("server boot %d\n", p.n)}
	r.Client = Host{Role: "client", Console: fmt.Sprintf("client boot %d\n", p.n)}
	return r, nil
}

type failingKeeper struct{}

func (failingKeeper) PutConsole(context.Context, string) (string, error) {
	return "", errors.New("database is gone")
}

// Every boot's consoles are kept and named by its sample; a console that
// cannot be kept is the bot's fault (INFRA), not the kernel's.
func TestRunnerKeepsConsoles(t *testing.T) {
	ctx := context.Background()
	st := &memKeeper{}
	l := &Runner{Cfg: DefaultConfig(), Test: DefaultTest(), Log: slog.New(slog.DiscardHandler), Consoles: st,
		Pairs: map[string]Pair{"qemu": &consolePair{}}}
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

// A crash's frames are decoded with the vmlinux of the kernel that
// crashed, when the store kept one (a kernel with line tables); without
// one, or with one that is not an ELF file, the report stays as the
// console printed it, and the trace says why.
func TestDecodeFrames(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	src, err := filepath.Abs(filepath.Join("symbolize", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	withLines, without, broken := t.TempDir(), t.TempDir(), t.TempDir()
	cmd := exec.Command("gcc", "-g", "-O2", "-o", filepath.Join(withLines, "vmlinux"), "a.c", "b.c")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(broken, "vmlinux"), []byte("#!/bin/sh\n"), 0o644)
	f, err := elf.Open(filepath.Join(withLines, "vmlinux"))
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols()
	f.Close()
	var report string
	for _, s := range syms {
		if s.Name == "conn_free" {
			report = fmt.Sprintf("[   12.5] Call Trace:\n[   12.5]  conn_free+0x8/0x%x\n", s.Size)
		}
	}
	var trace bytes.Buffer
	got := decodeFrames(context.Background(), report, withLines, nil, &trace)
	if !strings.Contains(got, "a.c:15 [inline]") || trace.Len() != 0 {
		t.Errorf("with line tables:\n%s\ntrace: %s", got, trace.String())
	}
	if got := decodeFrames(context.Background(), report, without, nil, &trace); got != report || trace.Len() != 0 {
		t.Errorf("without a vmlinux: %q, trace %q; want the report as it was, silently", got, trace.String())
	}
	if got := decodeFrames(context.Background(), report, broken, nil, &trace); got != report || !strings.Contains(trace.String(), "not decoded") {
		t.Errorf("a vmlinux that is no ELF file: %q, trace %q", got, trace.String())
	}
}

// A series that changes nothing the lab knows asks for no profile and
// boots on the server; one that changes the client's disconnect code
// boots on the client and asks for the lossy link. Both read the
// changes intake stored with the series, not its mail.
func TestRunnerReadsTheSeriesChanges(t *testing.T) {
	r := &Runner{Cfg: DefaultConfig()}
	lossy, err := NewLossy(r)
	if err != nil || lossy == nil {
		t.Fatalf("NewLossy on the defaults: %v %v", lossy, err)
	}
	s := flow.Series{Patches: []*flow.Message{{Body: "diff --git a/x b/x\n+\trpcrdma_xprt_disconnect(r_xprt);\n"}}}
	if side, why := r.CandidateSide(s), lossy.Why(s); side != SideServer || why != "" {
		t.Errorf("side %q, lossy why %q; want server and nothing", side, why)
	}
	s.Changes = []flow.Change{{File: "net/sunrpc/xprtrdma/verbs.c", Text: "\trpcrdma_xprt_disconnect(r_xprt);"}}
	if side, why := r.CandidateSide(s), lossy.Why(s); side != SideClient || why != "disconnect code (net/sunrpc/xprtrdma/verbs.c)" {
		t.Errorf("with a client-side change: side %q, lossy why %q", side, why)
	}
}

// A kernel whose build id the host cannot read (an lzo payload) is never
// booted, through the Runner as serve calls it: the candidate's is its
// own failure, the trusted base's, or that of the one kernel booted on
// both sides, the lab's.
func TestUnidentifiedKernelIsNotBooted(t *testing.T) {
	p := standInPair(t)
	l := &Runner{Cfg: DefaultConfig(), Test: DefaultTest(), Log: slog.New(slog.DiscardHandler), Pairs: map[string]Pair{"qemu": p}}
	kernelDir := func(payload []byte) string {
		img, err := os.ReadFile(bzImageWith(t, payload))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "bzImage"), img, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	vmlinux, _ := realELF(t)
	good, lzo := kernelDir(kernelCompress(t, "gzip", vmlinux)), kernelDir([]byte("\x89LZO\x00\r\n\x1a\n\x10\x30\x20\x80"))
	for name, c := range map[string]struct {
		boot  flow.Boot
		infra bool
		host  string
	}{
		"the candidate on the client": {flow.Boot{Dir: lzo, Trusted: good, Side: SideClient}, false, SideClient},
		"the candidate on the server": {flow.Boot{Dir: lzo, Trusted: good, Side: SideServer}, false, SideServer},
		"the trusted base":            {flow.Boot{Dir: good, Trusted: lzo, Side: SideClient}, true, SideServer},
		"one kernel on both sides":    {flow.Boot{Dir: lzo}, true, ""},
	} {
		_, err := l.Run(context.Background(), "qemu", c.boot, 1, io.Discard)
		var be *BootError
		var ie *InfraError
		switch {
		case err == nil || !strings.Contains(err.Error(), "payload is lzo"):
			t.Errorf("%s: %v, want the lzo payload named", name, err)
		case c.infra && (!flow.IsInfra(err) || !errors.As(err, &ie) || ie.Host != c.host):
			t.Errorf("%s: %v, want the lab's fault on %q", name, err, c.host)
		case !c.infra && (flow.IsInfra(err) || !errors.As(err, &be) || be.Host != c.host || be.Phase != "verify"):
			t.Errorf("%s: %v, want the candidate's failure on the %s", name, err, c.host)
		}
	}
	// Nothing was booted: the pair never took its lock.
	if _, err := os.Stat(p.cfg.HeavyLock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pair took its lock: %v", err)
	}
}

// The contention meter reads the guests' own process family inside
// their sandbox: a boot whose guests' threads wait for the host's CPU
// throughout (a stand-in kernel that spins a dozen threads beside an
// honest run) is set aside and booted again, and a host that stays
// contended is the lab's fault, through the Runner as serve calls it.
func TestContendedBootIsSetAside(t *testing.T) {
	p := standInPair(t)
	p.cfg.BusyGuestWait = DefaultConfig().QEMU.BusyGuestWait
	l := &Runner{Cfg: DefaultConfig(), Test: DefaultTest(), Log: slog.New(slog.DiscardHandler), Pairs: map[string]Pair{"qemu": p}}
	vmlinux, _ := realELF(t)
	img, err := os.ReadFile(bzImageWith(t, kernelCompress(t, "gzip", append(vmlinux, "RDMABOT_STANDIN=spinner\x00"...))))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bzImage"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	var trace bytes.Buffer
	_, err = l.Run(context.Background(), "qemu", flow.Boot{Dir: dir}, 1, &trace)
	var ie *InfraError
	if !flow.IsInfra(err) || !errors.As(err, &ie) || ie.Op != "busy host" || !strings.Contains(err.Error(), "during 3 boots in a row") {
		t.Fatalf("a guest contending for the host throughout: %v, want the busy host's INFRA after 3 boots\n%s", err, trace.String())
	}
	t.Log(err)
}
