package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/testenv"
)

// fstestsRun is a candidate client's fstests boot beside a trusted
// server, as labtest.sh prints it: a notrun, a pass, and an fsx failure
// whose evidence holds "key=value" words and reads back bad data.
const fstestsRun = `
server @@RB BOOTED role=server kernel=6.12.117 build_id=ab t=1.5
client @@RB BOOTED role=client kernel=6.12.117 build_id=ab t=1.6
server @@RB RDMA_UP dev=rxe0 t=1.8
client @@RB RDMA_UP dev=rxe0 t=1.9
server @@RB NFSD_READY portlist=rdma 20049,tcp 2049, t=3.0
client @@RB MOUNTED try=1 mount_s=1.2 opts=nfs,rw,vers=3,proto=rdma,port=20049 t=5.0
client @@RB TRANSPORT xprt=rdma t=5.1
client @@RB FSTEST name=generic/001 status=notrun secs=3.20 why=this test requires a valid $SCRATCH_DEV=x t=9
client @@RB FSTEST name=generic/075 status=pass secs=61.05 t=70
client @@RB FSTEST_LOG name=generic/091 line=@@ -1,7 +1,9 @@
client @@RB FSTEST_LOG name=generic/091 line= QA output created by 091
client @@RB FSTEST_LOG name=generic/091 line=+fsx -N 10000 -l 500000 -r 4096 -t 512 -w 512 -Z -R -W failed
client @@RB FSTEST_LOG name=generic/091 line=READ BAD DATA: offset = 0x1a00, size = 0x200, fname = /mnt/test/junk
client @@RB FSTEST name=generic/091 status=fail secs=40.5 t=112
client @@RB SUMMARY test=fstests loop_s=107.0 ok=1 t=113
client @@RB POWEROFF status=ok t=114
client EXIT
server @@RB CLIENT_DONE msg=ok t=113.4
server @@RB SRVSTAT calls=48213 badcalls=0 t=113.5
server @@RB SRVIO read=1048576 written=2097152 t=113.5
server @@RB POWEROFF status=ok t=114
server EXIT
`

func fstestsTestRun(tests ...string) Test {
	return Test{Kind: "fstests", SizeMiB: 1, Iterations: 1, NFSVersion: "3", Transport: "rdma", RDMA: "rxe",
		Fstests: &FstestsRun{Tests: tests, Timeout: 10 * time.Minute}}
}

var (
	fstestsBase     = Kernel{BzImage: "base", BuildID: "ab"}
	fstestsOnClient = Kernel{BzImage: "cand", BuildID: "ab", Peer: &fstestsBase, Side: SideClient}
	fstestsOnServer = Kernel{BzImage: "cand", BuildID: "ab", Peer: &fstestsBase, Side: SideServer}
)

// Each test's status, seconds, notrun reason and failure evidence (with
// its bad data read back) come out as the client said them, in the
// group's order, with the trusted server's RPC count beside them; a run
// whose tests fail still ran (the report judges the tests).
func TestFstestsRunResults(t *testing.T) {
	test := fstestsTestRun("generic/001", "generic/075", "generic/091")
	res, err := feedKernel(t, test, fstestsOnClient, fstestsRun).result(context.Background())
	if err != nil || !res.Passed {
		t.Fatalf("err %v res %+v", err, res)
	}
	got, _ := json.MarshalIndent(struct {
		Tests     []flow.TestResult `json:"tests"`
		ServerOps int64             `json:"server_ops"`
	}{res.Tests, res.ServerOps}, "", "  ")
	testenv.Golden(t, filepath.Join("testdata", "fstests-results.json"), append(got, '\n'), *update)

	// The server runs the candidate: its count is no evidence.
	res, err = feedKernel(t, test, fstestsOnServer, fstestsRun).result(context.Background())
	if err != nil || res.ServerOps != 0 || len(res.Tests) != 3 {
		t.Errorf("candidate server: err %v, server ops %d, %d tests", err, res.ServerOps, len(res.Tests))
	}
	// A client that stopped short of its group did not run it.
	cut := strings.Replace(fstestsRun, "client @@RB FSTEST name=generic/091 status=fail secs=40.5 t=112\n", "", 1)
	res, err = feedKernel(t, test, fstestsOnClient, cut).result(context.Background())
	if err != nil || res.Passed || res.Failure != "2 of 3 fstests ran" {
		t.Errorf("a group cut short: err %v, failure %q", err, res.Failure)
	}
	if got := fstestsTrace(res.Tests); got != "1 passed, 0 failed, 1 not run" {
		t.Errorf("trace %q", got)
	}
	head, rest, _ := strings.Cut(fstestsRun, "client @@RB FSTEST name=generic/001")
	_, tail, _ := strings.Cut(rest, "t=112\n")
	noTree := head + "client @@RB FSTESTS_FAIL why=no fstests in the image t=6\n" + tail
	res, err = feedKernel(t, test, fstestsOnClient, noTree).result(context.Background())
	if err != nil || res.Failure != "fstests could not run on the client: no fstests in the image" {
		t.Errorf("no fstests: err %v, failure %q", err, res.Failure)
	}
	// The group's deadline runs from the mount, whatever progress says.
	r := feedKernel(t, test, fstestsOnClient, fstestsRun)
	if dl, phase := r.deadline(); phase != "shutdown" {
		t.Errorf("after SUMMARY: %v %s", dl, phase)
	}
	r = feedKernel(t, test, fstestsOnClient, strings.Split(fstestsRun, "client @@RB FSTEST name=generic/075")[0])
	if dl, phase := r.deadline(); phase != "test" || !dl.Equal(r.seen["client"]["MOUNTED"].Add(10*time.Minute)) {
		t.Errorf("during the group: %v %s", dl, phase)
	}
}

// An fstests marker that is not the next of the group, or not well
// formed, is the client's protocol violation: the candidate's failure,
// whichever side it boots on, never the lab's.
func TestFstestsMarkerViolations(t *testing.T) {
	test := fstestsTestRun("generic/001", "generic/075", "generic/091")
	after := func(line, extra string) string { return strings.Replace(fstestsRun, line, line+"\n"+extra, 1) }
	first := "client @@RB TRANSPORT xprt=rdma t=5.1"
	var tooMany []string
	for range fstestsLogLines + 1 {
		tooMany = append(tooMany, "client @@RB FSTEST_LOG name=generic/001 line=x")
	}
	for name, script := range map[string]string{
		"a test out of order":       strings.Replace(fstestsRun, "name=generic/001 status=notrun", "name=generic/075 status=notrun", 1),
		"a test not in the group":   after(first, "client @@RB FSTEST name=generic/999 status=pass secs=1"),
		"a status check never says": strings.Replace(fstestsRun, "status=pass secs=61.05", "status=passed secs=61.05", 1),
		"no seconds":                strings.Replace(fstestsRun, "status=pass secs=61.05", "status=pass", 1),
		"negative seconds":          strings.Replace(fstestsRun, "status=pass secs=61.05", "status=pass secs=-1", 1),
		"evidence for a pass":       after(first, "client @@RB FSTEST_LOG name=generic/001 line=x\nclient @@RB FSTEST name=generic/001 status=pass secs=1"),
		"evidence without end":      after(first, strings.Join(tooMany, "\n")),
		"a test after the group":    after("client @@RB FSTEST name=generic/091 status=fail secs=40.5 t=112", "client @@RB FSTEST name=generic/091 status=pass secs=1"),
		"a second FSTESTS_FAIL":     after(first, "client @@RB FSTESTS_FAIL why=a\nclient @@RB FSTESTS_FAIL why=b"),
		"a test on the server":      after("server @@RB NFSD_READY portlist=rdma 20049,tcp 2049, t=3.0", "server @@RB FSTEST name=generic/001 status=pass secs=1"),
	} {
		for _, k := range []Kernel{fstestsOnClient, fstestsOnServer} {
			r := feedKernel(t, test, k, script)
			_, err := r.result(context.Background())
			var be *BootError
			if !errors.As(err, &be) || be.Host != k.Side || be.Phase != "protocol" || flow.IsInfra(err) {
				t.Errorf("%s (candidate on the %s): %v, want its protocol failure", name, k.Side, err)
			}
		}
	}
	// fstests markers in another test's run are no script's.
	r := feedKernel(t, DefaultTest(), fstestsOnClient, after(first, "client @@RB FSTEST name=generic/001 status=pass secs=1"))
	if !strings.Contains(r.proto["client"].violation, "no fstests run") {
		t.Errorf("FSTEST in a transfer run: %q", r.proto["client"].violation)
	}
}

// A test's evidence is bounded however long the lines the client prints.
func TestFstestsEvidenceBounded(t *testing.T) {
	f := &fstestsResults{group: []string{"generic/091"}}
	long := "@@RB FSTEST_LOG name=generic/091 line=" + strings.Repeat("x", 2000)
	for range fstestsLogLines {
		m, _ := parseMarker(long)
		if why := f.note(m, long, time.Now()); why != "" {
			t.Fatal(why)
		}
	}
	end := "@@RB FSTEST name=generic/091 status=fail secs=1 t=3"
	m, _ := parseMarker(end)
	if why := f.note(m, end, time.Now()); why != "" {
		t.Fatal(why)
	}
	if w := f.tests[0].Why; len(w) > fstestsWhyBytes+64 || !strings.HasSuffix(w, "cut at 4 KiB]") {
		t.Errorf("why of %d bytes: %q", len(w), w[len(w)-40:])
	}
}

// The group and the NFS version travel on the kernel command line; a
// name that is not fstests' cannot reach the guest's shell.
func TestFstestsTestValidate(t *testing.T) {
	c := DefaultConfig()
	tst := c.FstestsTest("siw", 1, false)
	if err := tst.Validate(); err != nil || tst.NFSVersion != "4.2" || tst.RDMA != "siw" || tst.Fstests.Tests[0] != c.Fstests.Group[0] {
		t.Fatalf("%+v %v", tst, err)
	}
	if large := c.FstestsTest("rxe", 0, true); len(large.Fstests.Tests) != len(c.Fstests.LargeGroup) || large.Fstests.Timeout != c.Fstests.LargeGroupTimeout.Duration {
		t.Errorf("large: %+v", large.Fstests)
	}
	p := NewQEMUPair(c.QEMU, Image{}, slog.New(slog.DiscardHandler))
	if cl := p.cmdline("client", tst); !strings.Contains(cl, " rb.test=fstests ") || !strings.Contains(cl, " rb.vers=4.2 ") ||
		!strings.Contains(cl, " rb.tests="+strings.Join(c.Fstests.Group, ",")) || !strings.Contains(cl, fmt.Sprintf(" rb.fsxops=%d", c.Fstests.FsxOps)) {
		t.Errorf("cmdline %q", cl)
	}
	c.Fstests.FsxOps = 0
	if cl := p.cmdline("client", c.FstestsTest("rxe", 0, true)); strings.Contains(cl, "rb.fsxops") {
		t.Errorf("fsx_ops = 0 (the tests' own counts): cmdline %q", cl)
	}
	for name, bad := range map[string]*FstestsRun{
		"a shell word": {Tests: []string{"generic/075;reboot"}, Timeout: time.Hour},
		"twice":        {Tests: []string{"generic/075", "generic/075"}, Timeout: time.Hour},
		"none":         {Timeout: time.Hour},
		"no time":      {Tests: []string{"generic/075"}, Timeout: time.Second},
		"fsx ops < 0":  {Tests: []string{"generic/075"}, Timeout: time.Hour, FsxOps: -1},
	} {
		tst.Fstests = bad
		if err := tst.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
	tst.Fstests = nil
	if err := tst.Validate(); err == nil || !strings.Contains(err.Error(), "needs its group") {
		t.Errorf("no group: %v", err)
	}
}

// Building: an absent source is the operator's gap, a source that does
// not build the lab's; both INFRA. A source that builds is packed under
// /var/lib/xfstests without its sources, once per source and commit.
func TestEnsureFstests(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	cache := t.TempDir()
	f := DefaultFstests()
	f.Source = filepath.Join(t.TempDir(), "absent.tar.gz")
	_, err := EnsureFstests(ctx, cache, f, log)
	var ie *InfraError
	if !errors.As(err, &ie) || !flow.IsInfra(err) || !strings.Contains(err.Error(), "the operator's gap") {
		t.Errorf("absent source: %v", err)
	}

	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "Makefile"), []byte("all:\n\t@echo no compiler here >&2; exit 1\n"), 0o644)
	f.Source = src
	if _, err := EnsureFstests(ctx, cache, f, log); !errors.As(err, &ie) || ie.Op != "fstests build" || !strings.Contains(err.Error(), "no compiler here") {
		t.Errorf("a source that does not build: %v", err)
	}

	// A git clone, pinned: the commit is what is built.
	repo := t.TempDir()
	os.MkdirAll(filepath.Join(repo, "tests", "generic"), 0o755)
	os.WriteFile(filepath.Join(repo, "Makefile"), []byte("all:\n\tprintf '#!/bin/bash\\n' >check; chmod +x check; echo built >>$(COUNT)\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "tests", "generic", "075"), []byte("#!/bin/bash\n"), 0o755)
	os.WriteFile(filepath.Join(repo, "fsx.c"), []byte("int main;\n"), 0o644)
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "fstests")
	count := filepath.Join(t.TempDir(), "count")
	t.Setenv("COUNT", count)
	f.Source, f.Commit = repo, git("rev-parse", "HEAD")[:12]
	path, err := EnsureFstests(ctx, cache, f, log)
	if err != nil {
		t.Fatal(err)
	}
	names := cpioNames(t, path)
	if !names["var/lib/xfstests/check"] || !names["var/lib/xfstests/tests/generic/075"] || names["var/lib/xfstests/fsx.c"] || names["var/lib/xfstests/Makefile"] {
		t.Errorf("archive holds %v", names)
	}
	again, err := EnsureFstests(ctx, cache, f, log)
	if b, _ := os.ReadFile(count); err != nil || again != path || string(b) != "built\n" {
		t.Errorf("second call: %s %v, builds %q", again, err, b)
	}
	f.Commit = "0123456789ab"
	if _, err := EnsureFstests(ctx, cache, f, log); !errors.As(err, &ie) || ie.Op != "fstests source" {
		t.Errorf("a commit the clone lacks: %v", err)
	}
}

// cpioNames lists a newc archive's entries.
func cpioNames(t *testing.T, path string) map[string]bool {
	t.Helper()
	cmd := exec.Command("cpio", "-t", "--quiet")
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd.Stdin = in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpio -t: %v", err)
	}
	names := map[string]bool{}
	for _, n := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		names[n] = true
	}
	return names
}

// fstestsPair is a pair whose runs return a canned fstests result, and
// record the tests they were given.
type fstestsPair struct{ got []Test }

func (p *fstestsPair) Run(_ context.Context, k Kernel, t Test) (*Result, error) {
	p.got = append(p.got, t)
	return &Result{Pair: "qemu", Test: t, Passed: true, ServerOps: 4242,
		Tests: []flow.TestResult{{Name: t.Fstests.Tests[0], Status: flow.TestFail, Secs: 3, Why: "READ BAD DATA", Corrupt: true}}}, nil
}

// The profile asks for the chunk and READ/WRITE paths only, boots each
// provider in turn, runs the large group when the boot is thorough, and
// its samples carry the tests and the server's count.
func TestFstestsProfile(t *testing.T) {
	pair := &fstestsPair{}
	cfg := DefaultConfig()
	cfg.Fstests.Providers = []string{"rxe", "siw"}
	l := &Runner{Cfg: cfg, Log: slog.New(slog.DiscardHandler), Pairs: map[string]Pair{"qemu": pair}}
	p, err := NewFstests(l)
	if err != nil || p == nil || p.Name() != "fstests" || p.Boots() != 2 || !p.Shapes("qemu") || p.Shapes("opa1") {
		t.Fatalf("%v %v", p, err)
	}
	for file, want := range map[string]bool{
		"net/sunrpc/xprtrdma/rpc_rdma.c": true, "net/sunrpc/xprtrdma/svc_rdma_rw.c": true, "drivers/infiniband/core/rw.c": true,
		"fs/nfs/direct.c": true, "fs/nfsd/vfs.c": true, "drivers/infiniband/core/mr_pool.c": true,
		"net/sunrpc/xprtrdma/svc_rdma_transport.c": false, "fs/nfs/dir.c": false, "drivers/infiniband/core/cma.c": false,
	} {
		s := flow.Series{Changes: []flow.Change{{File: file, Text: "\tx = 1;"}}}
		if got := p.Why(s) != ""; got != want {
			t.Errorf("%s: asks %v, want %v", file, got, want)
		}
	}
	dir := t.TempDir()
	smp, err := p.Run(context.Background(), "qemu", flow.Boot{Dir: dir}, 1, io.Discard)
	if err != nil || len(smp) != 1 || smp[0].Profile != "fstests-siw" || !smp[0].IsFstests() || smp[0].ServerOps != 4242 ||
		len(smp[0].Tests) != 1 || !smp[0].Tests[0].Corrupt || smp[0].Crash != "" {
		t.Fatalf("%+v %v", smp, err)
	}
	if _, err := p.Run(context.Background(), "qemu", flow.Boot{Dir: dir, Thorough: true}, 2, io.Discard); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig().Fstests
	if g := pair.got; len(g) != 2 || g[0].RDMA != "siw" || g[0].NFSVersion != "4.2" || len(g[0].Fstests.Tests) != len(c.Group) ||
		g[1].RDMA != "rxe" || len(g[1].Fstests.Tests) != len(c.LargeGroup) {
		t.Errorf("tests given: %+v", g)
	}
	// Confirming a failure: the same boot's provider and NFS version,
	// only the tests named, in the group's order; a name outside the
	// group is the bot's mistake (INFRA), never the kernel's.
	again := []string{c.Group[2], c.Group[0]}
	smp, err = p.Confirm(context.Background(), "qemu", flow.Boot{Dir: dir}, 1, again, io.Discard)
	if g := pair.got; err != nil || len(smp) != 1 || !smp[0].Confirming || smp[0].Profile != "fstests-siw" || len(g) != 3 ||
		g[2].RDMA != "siw" || g[2].NFSVersion != g[0].NFSVersion || !slices.Equal(g[2].Fstests.Tests, []string{c.Group[0], c.Group[2]}) ||
		g[2].Fstests.Timeout != c.GroupTimeout.Duration || !slices.Equal(DefaultConfig().Fstests.Group, c.Group) {
		t.Errorf("confirming %v: %+v %v; tests given %+v", again, smp, err, g[len(g)-1].Fstests)
	}
	for _, bad := range [][]string{nil, {"generic/999"}} {
		if _, err := p.Confirm(context.Background(), "qemu", flow.Boot{Dir: dir}, 1, bad, io.Discard); !flow.IsInfra(err) {
			t.Errorf("confirming %v: %v, want the bot's own failure", bad, err)
		}
	}
	l.Cfg.Fstests.Providers = nil
	if p, err := NewFstests(l); p != nil || err != nil {
		t.Errorf("off: %v %v", p, err)
	}
}

// client_fstests runs check once per test and says what check left: a
// notrun's reason, a pass, a failure with the start of its .out.bad diff
// and fsx's log lines, bounded; the host reads exactly those markers.
func TestClientFstestsMarkers(t *testing.T) {
	fst, run := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(fst, "tests", "generic"), 0o755)
	os.WriteFile(filepath.Join(fst, "tests", "generic", "091.out"), []byte("QA output created by 091\nok\n"), 0o644)
	// A stand-in check: 001 is not run, 075 passes, 091 reads bad data.
	check := `#!/bin/sh
[ "$1" = -nfs ] && [ "$FSTYP" = nfs ] && [ "$NFS_MOUNT_OPTIONS" = "-o proto=rdma,port=20049,vers=4.2" ] || { echo "bad env"; exit 1; }
r=results/$2; mkdir -p results/generic
case $2 in
generic/001) echo "this test requires a valid \$SCRATCH_DEV" >$r.notrun; echo "Not run: $2" ;;
generic/075) echo "[$FSX_AVOID]" >avoid; echo "Ran: $2"; echo "Passed all 1 tests" ;;
generic/091) printf 'QA output created by 091\nfsx failed\n' >$r.out.bad
	for i in $(seq 1 30); do echo "READ BAD DATA: offset = $i"; done >$r.full
	echo "Failures: $2" ;;
esac
`
	os.WriteFile(filepath.Join(fst, "check"), []byte(check), 0o755)
	out := runLabtest(t, "client_fstests", map[string]string{"FST": fst, "RUN": run, "MNT": run, "RB_PEER": "10.99.0.1",
		"RB_VERS": "4.2", "RB_TESTS": "generic/001,generic/075,generic/091", "RB_FSXOPS": "500"})
	// lab.fstests.fsx_ops reaches every fsx run as FSX_AVOID's -N.
	if b, _ := os.ReadFile(filepath.Join(fst, "avoid")); string(b) != "[-N 500]\n" {
		t.Errorf("FSX_AVOID in the test's environment %q, want -N 500", b)
	}
	f := &fstestsResults{group: []string{"generic/001", "generic/075", "generic/091"}}
	for _, l := range strings.Split(out, "\n") {
		m, ok := parseMarker(l)
		if !ok {
			continue
		}
		if why := f.note(m, l, time.Now()); why != "" {
			t.Fatalf("%s\n%s", why, out)
		}
	}
	if f.missing() != "" {
		t.Fatalf("%s\n%s", f.missing(), out)
	}
	r := f.tests
	if r[0].Status != flow.TestNotRun || r[0].Why != "this test requires a valid $SCRATCH_DEV " || r[1].Status != flow.TestPass ||
		r[2].Status != flow.TestFail || !r[2].Corrupt || !strings.Contains(r[2].Why, "+fsx failed") {
		t.Errorf("%+v\n%s", r, out)
	}
	// fsx's lines are bounded: 12 of its 30.
	if n := strings.Count(r[2].Why, "READ BAD DATA"); n != 12 {
		t.Errorf("%d fsx lines in %q", n, r[2].Why)
	}
	// A test whose I/O never completes is killed at RB_FSLIMIT, reported
	// failed with its processes, and the group goes on.
	// A hung process whose command line holds a byte no terminal prints
	// is shown with it replaced, never lost.
	hang := strings.Replace(check, "generic/075) echo", "generic/002) sh -c 'sleep 120; :' \"$(printf 'bin\\377ary')\" ;;\ngeneric/075) echo", 1)
	os.WriteFile(filepath.Join(fst, "check"), []byte(hang), 0o755)
	// Before the kill it shows the test mounts' transports, and asks the
	// kernel for the blocked tasks and then the RPC tasks (SysRq w, then
	// an unknown key whose help line wakes init's watcher).
	proc := t.TempDir()
	os.MkdirAll(filepath.Join(proc, "self"), 0o755)
	os.WriteFile(filepath.Join(proc, "self", "mountstats"), []byte("device rootfs mounted on / with fstype rootfs\n"+
		"device 10.99.0.1:/export/test mounted on /mnt/test with fstype nfs statvers=1.1\n\topts:\trw,vers=4.2\n"+
		"\txprt:\trdma 0 0 2 12 0 4411 4410 0 4411 0 0 0 0 0 0 0 0 0 11 0 0 0 0 0 0 0 0\n"+
		"device proc mounted on /proc with fstype proc\n"), 0o644)
	os.WriteFile(filepath.Join(proc, "sysrq-trigger"), nil, 0o644)
	start := time.Now()
	out = runLabtest(t, "client_fstests", map[string]string{"FST": fst, "RUN": run, "MNT": run, "RB_PEER": "10.99.0.1",
		"RB_VERS": "4.2", "RB_TESTS": "generic/002,generic/075", "RB_FSLIMIT": "2", "RB_PROC": proc, "RB_FSXOPS": "5;reboot"})
	// Anything but a number is not passed on.
	if b, _ := os.ReadFile(filepath.Join(fst, "avoid")); string(b) != "[]\n" {
		t.Errorf("FSX_AVOID from a bad rb.fsxops %q, want none", b)
	}
	f = &fstestsResults{group: []string{"generic/002", "generic/075"}}
	for _, l := range strings.Split(out, "\n") {
		if m, ok := parseMarker(l); ok {
			if why := f.note(m, l, time.Now()); why != "" {
				t.Fatalf("%s\n%s", why, out)
			}
		}
	}
	if len(f.tests) != 2 || f.tests[0].Status != flow.TestFail || !strings.Contains(f.tests[0].Why, "timed out after 2 s") ||
		!strings.Contains(f.tests[0].Why, "sleep 120; : bin?ary") || f.tests[1].Status != flow.TestPass || time.Since(start) > 90*time.Second {
		t.Errorf("a hung test: %+v after %v\n%s", f.tests, time.Since(start), out)
	}
	if want := "transport of /mnt/test: xprt: rdma 0 0 2 12 0 4411 4410 0 4411 0"; len(f.tests) == 0 || !strings.Contains(f.tests[0].Why, want) {
		t.Errorf("the hung test's evidence lacks its transport %q:\n%s", want, out)
	}
	if b, _ := os.ReadFile(filepath.Join(proc, "sysrq-trigger")); string(b) != "w\n?\n" {
		t.Errorf("SysRq keys written %q, want w then an unknown key", b)
	}
	os.Remove(filepath.Join(fst, "check"))
	if out := runLabtest(t, "client_fstests", map[string]string{"FST": fst, "RUN": run, "MNT": run, "RB_TESTS": "generic/001"}); !strings.Contains(out, "@@RB FSTESTS_FAIL why=no fstests in the image") {
		t.Errorf("no check: %s", out)
	}
}
