package lab

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/cfgtype"
)

func TestParseMarker(t *testing.T) {
	m, ok := parseMarker("@@RB NFSD_READY portlist=rdma 20049,tcp 2049, t=3.55")
	if !ok || m.Event != "NFSD_READY" || m.Args["portlist"] != "rdma 20049,tcp 2049," || m.float("t") != 3.55 {
		t.Fatalf("%+v", m)
	}
	// Text before it (a kernel message, a peer's bytes a log printed)
	// makes a line no marker.
	if m, ok := parseMarker("[    4.1] x @@RB NFSD_READY portlist=rdma 20049"); ok {
		t.Fatalf("a marker within a line: %+v", m)
	}
	if _, ok := parseMarker("[    1.0] Linux version 6.12"); ok {
		t.Fatal("a kernel line is no marker")
	}
	it := iterationOf(marker{Event: "RESULT", Args: map[string]string{"iter": "2", "write_MBps": "18.5", "read_MBps": "20.25", "cmp": "ok"}})
	if it.N != 2 || it.WriteMBps != 18.5 || it.ReadMBps != 20.25 || it.Cmp != "ok" {
		t.Fatalf("%+v", it)
	}
}

func TestTestValidate(t *testing.T) {
	if err := DefaultTest().Validate(); err != nil {
		t.Fatal(err)
	}
	lossy := DefaultTest()
	lossy.Netem = "delay 2ms 1ms loss 0.5% reorder 5%"
	if err := lossy.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Test{
		{Kind: "dd", SizeMiB: 1, Iterations: 1, NFSVersion: "auto", Transport: "rdma", RDMA: "rxe"},
		{Kind: "transfer", SizeMiB: 0, Iterations: 1, NFSVersion: "auto", Transport: "rdma", RDMA: "rxe"},
		{Kind: "transfer", SizeMiB: 1, Iterations: 1, NFSVersion: "5", Transport: "rdma", RDMA: "rxe"},
		{Kind: "transfer", SizeMiB: 1, Iterations: 1, NFSVersion: "auto", Transport: "udp", RDMA: "rxe"},
		{Kind: "fio", SizeMiB: 1, Iterations: 1, NFSVersion: "auto", Transport: "tcp", RDMA: "rxe"},
		{Kind: "transfer", SizeMiB: 1, Iterations: 1, NFSVersion: "auto", Transport: "rdma", RDMA: "mlx5"},
		// netem's arguments go to tc unquoted and on the kernel command
		// line with commas for spaces: no other characters get through.
		{Kind: "transfer", SizeMiB: 1, Iterations: 1, NFSVersion: "auto", Transport: "rdma", RDMA: "rxe", Netem: "delay 1ms; reboot"},
		{Kind: "transfer", SizeMiB: 1, Iterations: 1, NFSVersion: "auto", Transport: "rdma", RDMA: "rxe", Netem: "delay,1ms"},
		{Kind: "transfer", SizeMiB: 1, Iterations: 1, NFSVersion: "auto", Transport: "rdma", RDMA: "rxe", Netem: " delay 1ms"},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v: want an error", bad)
		}
	}
}

// The recipe hash changes with the packages and the scripts, and not with
// the order packages are listed in.
func TestRecipeHash(t *testing.T) {
	r := DefaultRecipe()
	h := r.Hash()
	r2 := DefaultRecipe()
	r2.Packages[0], r2.Packages[1] = r2.Packages[1], r2.Packages[0]
	if r2.Hash() != h {
		t.Error("order changed the hash")
	}
	r2.Packages = append(r2.Packages, "strace")
	if r2.Hash() == h {
		t.Error("a new package did not change the hash")
	}
}

// The cpio writer's output is what cpio(1) reads back.
func TestCpioRoundTrip(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("cpio not installed")
	}
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "a/b"), 0o755)
	os.WriteFile(filepath.Join(src, "a/b/f"), []byte("hello\n"), 0o640)
	os.Symlink("b/f", filepath.Join(src, "a/l"))
	out := filepath.Join(t.TempDir(), "x.cpio")
	if err := packRoot(src, out, true); err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command("sh", "-c", "cpio -itv --quiet < "+out).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, list)
	}
	for _, want := range []string{"a/b/f", "a/l -> b/f", "dev/console", "-rw-r-----"} {
		if !bytes.Contains(list, []byte(want)) {
			t.Errorf("listing lacks %q:\n%s", want, list)
		}
	}
}

func TestLeases(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := &Leases{Dir: t.TempDir(), Now: func() time.Time { return now }}
	a, err := l.Acquire("bot-a", time.Hour, "h1:22", "h2:22")
	if err != nil {
		t.Fatal(err)
	}
	// Both or nothing: h2 is taken, so h3 must stay free too.
	if _, err := l.Acquire("bot-b", time.Hour, "h3:22", "h2:22"); !errors.Is(err, ErrBusy) {
		t.Fatalf("want ErrBusy, got %v", err)
	}
	if _, err := os.Stat(l.path("h3:22")); !os.IsNotExist(err) {
		t.Error("a failed acquire leased h3")
	}
	// Expired leases are free.
	now = now.Add(61 * time.Minute)
	b, err := l.Acquire("bot-b", time.Hour, "h2:22")
	if err != nil {
		t.Fatalf("expired lease still held: %v", err)
	}
	// Releasing a lease someone else took over leaves theirs alone.
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire("bot-c", time.Hour, "h2:22"); !errors.Is(err, ErrBusy) {
		t.Fatalf("bot-b's lease was dropped: %v", err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire("bot-c", time.Hour, "h1:22", "h2:22"); err != nil {
		t.Fatal(err)
	}
}

// A host that does not answer is power-cycled; a failing BMC is the lab's
// fault, with the BMC's words.
func TestSSHPairBMCError(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing answers here now
	key := filepath.Join(dir, "key")
	_, pemKey, _ := newKey(t)
	os.WriteFile(key, pemKey, 0o600)
	os.WriteFile(filepath.Join(dir, "known_hosts"), nil, 0o644)
	h := SSHHostConfig{Address: closed, User: "root", KeyFile: key, KnownHosts: filepath.Join(dir, "known_hosts"),
		TestIP: "10.0.0.1", Netdev: "ib0", Boot: "kexec",
		PowerCycle: []string{"sh", "-c", "echo 'Error: Unable to establish IPMI v2 / RMCP+ session' >&2; exit 1"}}
	cfg := SSHPairConfig{Name: "x", Server: h, Client: h, Lease: cfgtype.D(time.Hour), RDMA: "hw", Disposable: true}
	cfg.Client.TestIP = "10.0.0.2"
	bz := filepath.Join(dir, "bzImage")
	os.WriteFile(bz, []byte("not a kernel"), 0o644)
	sp := NewSSHPair(cfg, &Leases{Dir: dir, Now: time.Now}, "t", testLogger(t))
	_, err = sp.Run(context.Background(), Kernel{BzImage: bz, Release: "6.12.0-test", BuildID: "ab"}, DefaultTest())
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Op != "bmc power cycle" || !strings.Contains(err.Error(), "RMCP+") {
		t.Fatalf("want InfraError from the BMC, got %v", err)
	}
	// Without a BMC command, an unreachable host is an InfraError too.
	cfg.Server.PowerCycle, cfg.Client.PowerCycle = nil, nil
	sp = NewSSHPair(cfg, &Leases{Dir: dir, Now: time.Now}, "t", testLogger(t))
	_, err = sp.Run(context.Background(), Kernel{BzImage: bz, Release: "6.12.0-test", BuildID: "ab"}, DefaultTest())
	if !errors.As(err, &ie) || ie.Op != "ssh unreachable" {
		t.Fatalf("want InfraError ssh unreachable, got %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Default = "opa1"
	if c.Validate() == nil {
		t.Error("default naming no pair accepted")
	}
	c.Pairs = []SSHPairConfig{{Name: "opa1", RDMA: "opa", Lease: cfgtype.D(time.Hour), Disposable: true}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("incomplete host accepted: %v", err)
	}
	// A real pair boots strangers' kernels on its hosts: only one its
	// operator calls disposable is used.
	c.Pairs[0].Disposable = false
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "disposable = true") {
		t.Errorf("a real pair not marked disposable accepted: %v", err)
	}
	// The lossy profile: each bad setting named; off when netem is empty.
	for name, c := range map[string]struct {
		edit func(*Config)
		want string
	}{
		"boots":    {func(c *Config) { c.Lossy.Boots = 0 }, "lab.lossy.boots"},
		"touches":  {func(c *Config) { c.Lossy.Touches = "drain(" }, "lab.lossy.touches"},
		"empty":    {func(c *Config) { c.Lossy.Touches = "" }, "lab.lossy.touches"},
		"netem":    {func(c *Config) { c.Lossy.Netem = "delay 1ms; reboot" }, "lab.lossy: netem"},
		"twice":    {func(c *Config) { c.Test.Netem = "delay 1ms" }, "lab.test.netem shapes every boot"},
		"off":      {func(c *Config) { c.Lossy = LossyConfig{} }, ""},
		"defaults": {func(*Config) {}, ""},
		// The pressure profile likewise; off when it has no provider.
		"p-boots":    {func(c *Config) { c.Pressure.Boots = 0 }, "lab.pressure.boots"},
		"p-provider": {func(c *Config) { c.Pressure.Providers = []string{"rxe", "mlx5"} }, `lab.pressure.providers: "mlx5"`},
		"p-version":  {func(c *Config) { c.Pressure.NFSVersions = []string{"3", "5"} }, "lab.pressure: NFS version \"5\""},
		"p-credits":  {func(c *Config) { c.Pressure.Credits = 2 }, "pressure credits 2"},
		"p-readers":  {func(c *Config) { c.Pressure.Readers = 0 }, "pressure readers 0"},
		"p-seconds":  {func(c *Config) { c.Pressure.Seconds = 1 }, "pressure seconds 1"},
		"p-size":     {func(c *Config) { c.Pressure.SizeMiB = 4 }, "file of 8 MiB or more"},
		"p-touches":  {func(c *Config) { c.Pressure.Touches = "sq(" }, "lab.pressure.touches"},
		// The client-side profile; off with no boots.
		"c-boots":   {func(c *Config) { c.ClientSide.Boots = -1 }, "lab.client_side.boots -1"},
		"c-touches": {func(c *Config) { c.ClientSide.Touches = "core/(" }, "lab.client_side.touches"},
		"c-empty":   {func(c *Config) { c.ClientSide.Touches = "" }, "lab.client_side.touches"},
		"c-off":     {func(c *Config) { c.ClientSide = ClientSideConfig{} }, ""},
		"p-off":     {func(c *Config) { c.Pressure = PressureConfig{} }, ""},
		// The debug profile: off with no boots.
		"d-boots":      {func(c *Config) { c.Debug.Boots = -1 }, "lab.debug: boots -1"},
		"d-iterations": {func(c *Config) { c.Debug.Iterations = 0 }, "iterations 0"},
		"d-touches":    {func(c *Config) { c.Debug.Touches = "free(" }, "lab.debug.touches"},
		"d-off":        {func(c *Config) { c.Debug = DebugConfig{} }, ""},
		// The fstests profile: off with no provider.
		"f-boots":    {func(c *Config) { c.Fstests.Boots = 0 }, "lab.fstests.boots"},
		"f-provider": {func(c *Config) { c.Fstests.Providers = []string{"mlx5"} }, `lab.fstests.providers: "mlx5"`},
		"f-commit":   {func(c *Config) { c.Fstests.Commit = "main" }, "pinned to a commit"},
		"f-source":   {func(c *Config) { c.Fstests.Source = "" }, "pinned to a commit"},
		"f-version":  {func(c *Config) { c.Fstests.NFSVersions = []string{"5"} }, `NFS version "5"`},
		"f-group":    {func(c *Config) { c.Fstests.Group = []string{"generic/075 generic/091"} }, "want a name like generic/075"},
		"f-large":    {func(c *Config) { c.Fstests.LargeGroup = nil }, "group of 0 tests"},
		"f-timeout":  {func(c *Config) { c.Fstests.GroupTimeout.Duration = 0 }, "group timeout 0s"},
		"f-touches":  {func(c *Config) { c.Fstests.Touches = "rw(" }, "lab.fstests.touches"},
		"f-off":      {func(c *Config) { c.Fstests = FstestsConfig{} }, ""},
	} {
		cfg := DefaultConfig()
		c.edit(&cfg)
		err := cfg.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// A listening port counts only when the given process holds it.
func TestListeningBy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if ok, err := listeningBy(os.Getpid(), port); !ok || err != nil {
		t.Fatalf("own listener not found: %v %v", ok, err)
	}
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if ok, _ := listeningBy(cmd.Process.Pid, port); ok {
		t.Error("a process not holding the port is said to listen")
	}
	l.Close()
	if ok, _ := listeningBy(os.Getpid(), port); ok {
		t.Error("closed listener still found")
	}
}

func TestReadKernelIdentity(t *testing.T) {
	k, _ := testArtifacts(t)
	rel, err := ReadRelease(k)
	if err != nil || !strings.HasPrefix(rel, "6.") {
		t.Errorf("release %q: %v", rel, err)
	}
	id, err := ReadBuildID(k)
	if err != nil || len(id) != 40 {
		t.Errorf("build id %q: %v", id, err)
	}
	if _, err := ReadBuildID("lab_test.go"); err == nil {
		t.Error("a Go file passed for a bzImage")
	}
}

// The guests run under TCG, never KVM, and their only network is the
// socket link on the loopback.
func TestGuestArgs(t *testing.T) {
	p := NewQEMUPair(DefaultConfig().QEMU, Image{}, testLogger(t))
	r := &run{pair: p, test: DefaultTest(), kernel: Kernel{BzImage: "bz"}, initrd: "rd"}
	args := strings.Join(r.spec("server", "socket,id=n0,listen=127.0.0.1:4000", "52:54:00:00:00:01").args(), " ")
	for _, want := range []string{"-accel tcg", "-no-reboot", "-icount shift=3,sleep=on", "-netdev socket,id=n0,listen=127.0.0.1:4000", "rb.role=server"} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q: %s", want, args)
		}
	}
	for _, bad := range []string{"kvm", "user,", "tap", "bridge"} {
		if strings.Contains(args, bad) {
			t.Errorf("args contain %q: %s", bad, args)
		}
	}
}

// The lab defines the decided metrics: copy_MBps is both copies of the
// file over their summed time, and each boot's figure is the mean of its
// iterations; a fio run has read bandwidth only.
func TestFiguresDeriveDecidedMetrics(t *testing.T) {
	r := Result{Test: Test{SizeMiB: 8}, LoopSecs: 30, Iterations: []Iteration{
		{N: 1, WriteMBps: 4, ReadMBps: 8, WriteSecs: 2, ReadSecs: 1},
		{N: 2, WriteMBps: 2, ReadMBps: 4, WriteSecs: 4, ReadSecs: 2},
	}}
	f := r.Figures()
	c := f.PerIteration["copy_MBps"]
	if len(c) != 2 || math.Abs(c[0]-16.0/3) > 1e-9 || math.Abs(c[1]-16.0/6) > 1e-9 {
		t.Fatalf("copy per iteration %v, want 16/3 and 16/6", c)
	}
	if m := f.Means["copy_MBps"]; math.Abs(m-(16.0/3+16.0/6)/2) > 1e-9 {
		t.Errorf("copy mean %v", m)
	}
	if f.Means["write_MBps"] != 3 || f.Means["read_MBps"] != 6 || f.Means["loop_s"] != 30 {
		t.Errorf("means %v", f.Means)
	}
	fio := Result{Test: Test{SizeMiB: 8}, Iterations: []Iteration{{N: 1, ReadMBps: 9, ReadSecs: 1}}}
	if g := fio.Figures(); len(g.PerIteration["copy_MBps"]) != 0 || g.Means["read_MBps"] != 9 {
		t.Errorf("fio figures %+v", g)
	}
}

// A series' kernel boots on the client only when it changes client code
// alone; svcrdma, ib_core and a series changing both sides boot it on
// the server.
func TestCandidateSide(t *testing.T) {
	for _, c := range []struct {
		files []string
		want  string
	}{
		{[]string{"net/sunrpc/xprtrdma/svc_rdma_sendto.c"}, SideServer},
		{[]string{"drivers/infiniband/core/cq.c"}, SideServer},
		{[]string{"net/sunrpc/xprtrdma/verbs.c", "net/sunrpc/xprtrdma/xprt_rdma.h"}, SideClient},
		{[]string{"fs/nfs/direct.c"}, SideClient},
		{[]string{"net/sunrpc/xprtrdma/frwr_ops.c", "net/sunrpc/xprtrdma/svc_rdma_rw.c"}, SideServer},
		{nil, SideServer},
	} {
		if got := CandidateSide(c.files); got != c.want {
			t.Errorf("%v: %s, want %s", c.files, got, c.want)
		}
	}
}

// A bzImage is built from a posted series: one larger than any kernel,
// or whose payload unpacks without end (a gzip bomb), is refused, and
// what the host allocates follows the bound, not the payload's claim.
// The bombs are measured against small bounds (8 MiB unpacked) so that
// the test stays quick under -race; the production bounds are the same
// code with maxBzImage and maxVmlinux.
func TestReadBuildIDBoundsHostileImages(t *testing.T) {
	dir := t.TempDir()
	bomb := func(unpacked int) string {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(make([]byte, unpacked))
		zw.Close()
		img := make([]byte, 0x400)
		copy(img[bootHeaderMagicOff:], "HdrS")
		img[setupSectsOff] = 0 // setup is one sector: the payload starts at 0x200
		binary.LittleEndian.PutUint32(img[payloadOffsetOff:], 0x200)
		binary.LittleEndian.PutUint32(img[payloadLengthOff:], uint32(gz.Len()))
		img = append(img, gz.Bytes()...)
		p := filepath.Join(dir, fmt.Sprintf("bomb-%d", unpacked>>20))
		if err := os.WriteFile(p, img, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const limit = 8 << 20
	for p, want := range map[string]string{
		bomb(8 * limit): "unpacks to more than 8 MiB",
		bomb(1 << 20):   "vmlinux: not an ELF file",
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := readBuildID(p, 1<<30, limit)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", filepath.Base(p), err, want)
		}
		d := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %v; allocated %.1f MiB", filepath.Base(p), err, float64(d)/(1<<20))
		if d > 3*limit {
			t.Errorf("%s: allocated %d MiB, more than 3 times the bound", filepath.Base(p), d>>20)
		}
	}
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, []byte("MZ"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Truncate(huge, maxBzImage+1)
	if _, err := ReadBuildID(huge); err == nil || !strings.Contains(err.Error(), "not a regular file of at most 256 MiB") {
		t.Errorf("an image over maxBzImage: %v", err)
	}
}

// readAtMost allocates at most about twice its bound, whatever it reads.
func TestReadAtMost(t *testing.T) {
	for _, n := range []int{0, 1, 4 << 20, 5 << 20, 8 << 20} {
		b, err := readAtMost(bytes.NewReader(make([]byte, n)), 8<<20)
		if err != nil || len(b) != n {
			t.Errorf("%d bytes: read %d, %v", n, len(b), err)
		}
	}
	if _, err := readAtMost(bytes.NewReader(make([]byte, 8<<20+1)), 8<<20); !errors.Is(err, errTooLarge) {
		t.Errorf("one byte over: %v", err)
	}
}
