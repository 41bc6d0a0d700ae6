package lab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// feed plays console lines through a run's bookkeeping, as the event
// loop would, one second of host time apart.
func feed(t *testing.T, test Test, script string) *run {
	t.Helper()
	return feedKernel(t, test, Kernel{BzImage: "bzImage", BuildID: "ab"}, script)
}

// feedKernel is feed for kernel k: a candidate beside a trusted peer
// changes which side's lines are results.
func feedKernel(t *testing.T, test Test, k Kernel, script string) *run {
	t.Helper()
	p := NewQEMUPair(DefaultConfig().QEMU, Image{}, testLogger(t))
	r := &run{pair: p, test: test, kernel: k, events: make(chan consoleEvent, 16)}
	r.init()
	r.start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, role := range []string{"server", "client"} {
		r.guests[role] = &guest{role: role, cmd: &exec.Cmd{}, stderr: &tailBuffer{max: 100}}
	}
	at := r.start
	for _, l := range strings.Split(strings.TrimSpace(script), "\n") {
		role, text, _ := strings.Cut(strings.TrimSpace(l), " ")
		at = at.Add(time.Second)
		if text == "EXIT" {
			r.handle(consoleEvent{role: role, at: at, exited: true})
			continue
		}
		r.handle(consoleEvent{role: role, text: text, at: at})
		if strings.Contains(text, "@@RB RESULT") {
			r.lastProgress = at
		}
	}
	r.end = at
	return r
}

const goodRun = `
server [    0.000000] Linux version 6.12.117 (lab@lab) #1 SMP
server @@RB BOOTED role=server kernel=6.12.117 build_id=ab t=1.5
client @@RB BOOTED role=client kernel=6.12.117 build_id=ab t=1.6
server @@RB RDMA_UP dev=rxe0 t=1.8
client @@RB RDMA_UP dev=rxe0 t=1.9
server @@RB NFSD_READY portlist=rdma 20049,tcp 2049, t=3.0
client @@RB MOUNTED try=1 mount_s=1.2 opts=nfs,rw,vers=3,proto=rdma,port=20049 t=5.0
client @@RB TRANSPORT xprt=rdma t=5.1
client @@RB RESULT iter=1 mb=32 gen_s=0.5 write_s=1.60 write_MBps=20.00 read_s=1.45 read_MBps=22.07 cmp=ok t=9
client @@RB RESULT iter=2 mb=32 gen_s=0.5 write_s=1.70 write_MBps=18.82 read_s=1.50 read_MBps=21.33 cmp=ok t=13
client @@RB SUMMARY test=transfer loop_s=8.10 ok=1 t=13.2
client @@RB POWEROFF status=ok t=13.5
client EXIT
server @@RB CLIENT_DONE msg=ok t=13.4
server @@RB POWEROFF status=ok t=13.6
server EXIT
`

func TestRunResultPassed(t *testing.T) {
	test := DefaultTest()
	test.Iterations = 2
	r := feed(t, test, goodRun)
	res, err := r.result(context.Background())
	if err != nil || !res.Passed {
		t.Fatalf("err %v res %+v", err, res)
	}
	if res.Transport != "rdma" || res.LoopSecs != 8.1 || len(res.Iterations) != 2 || res.Iterations[1].WriteMBps != 18.82 {
		t.Errorf("%+v", res)
	}
	// BOOTED both at +3 s, RDMA_UP at +5, MOUNTED +7, SUMMARY +11, end +16.
	want := Phases{Boot: 3, RDMAUp: 2, Mount: 2, Test: 4, Shutdown: 5, Total: 16}
	if res.Phases != want {
		t.Errorf("phases %+v, want %+v", res.Phases, want)
	}
	if res.Server.Dmesg != "[    0.000000] Linux version 6.12.117 (lab@lab) #1 SMP\n" || res.Client.Release != "6.12.117" {
		t.Errorf("server dmesg %q client release %q", res.Server.Dmesg, res.Client.Release)
	}
}

func TestRunResultFailures(t *testing.T) {
	test := DefaultTest()
	test.Iterations = 2
	for name, c := range map[string]struct {
		script string
		want   string
	}{
		"mismatch":  {strings.Replace(goodRun, "read_MBps=21.33 cmp=ok", "read_MBps=21.33 cmp=mismatch", 1), "iteration 2: data mismatch"},
		"tcp":       {strings.Replace(goodRun, "xprt=rdma", "xprt=tcp", 1), `transport is "tcp", not "rdma"`},
		"short":     {strings.Replace(goodRun, "client @@RB RESULT iter=2", "client x", 1), "1 of 2 iterations ran"},
		"not-mount": {strings.Replace(goodRun, "@@RB MOUNTED", "@@RB MOUNT_FAIL", 1), "mount failed"},
	} {
		res, err := feed(t, test, c.script).result(context.Background())
		if err != nil || res.Passed || res.Failure != c.want {
			t.Errorf("%s: err %v failure %q, want %q", name, err, res.Failure, c.want)
		}
		// Only a mismatch is corrupt data; the others are failures.
		if wantCorrupt := name == "mismatch"; (res.Corrupt != "") != wantCorrupt ||
			(wantCorrupt && res.Corrupt != "iteration 2 of 2: the file read back over NFS/RDMA differs from the one written (cmp)") {
			t.Errorf("%s: corrupt %q", name, res.Corrupt)
		}
	}
}

// No RDMA device: the kernel's fault, a BootError naming the phase.
func TestRunBootError(t *testing.T) {
	script := `
server @@RB BOOTED role=server kernel=6.12.117 t=1.5
client @@RB BOOTED role=client kernel=6.12.117 t=1.6
server @@RB RDMA_FAIL dev=rxe0 t=1.8
server EXIT
`
	_, err := feed(t, DefaultTest(), script).result(context.Background())
	var be *BootError
	if !errors.As(err, &be) || be.Host != "server" || be.Phase != "rdma" || flow.IsInfra(err) {
		t.Fatalf("want BootError on server in phase rdma, got %v", err)
	}
}

// A link netem could not shape is the operator's gap (a lab kernel
// without netem, bad arguments in the config), never the kernel's.
func TestRunNetemFailIsInfra(t *testing.T) {
	script := `
server @@RB BOOTED role=server kernel=6.12.117 t=1.5
client @@RB BOOTED role=client kernel=6.12.117 t=1.6
server @@RB NETEM_FAIL dev=eth0 msg=Error: Specified qdisc kind is unknown. t=1.8
server EXIT
`
	test := DefaultTest()
	test.Netem = "delay 1ms"
	_, err := feed(t, test, script).result(context.Background())
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Host != "server" || ie.Op != "netem" || !strings.Contains(err.Error(), "Specified qdisc kind is unknown") {
		t.Fatalf("want the lab's netem error on the server, got %v", err)
	}
}

const pressureRun = `
server @@RB BOOTED role=server kernel=6.12.117 build_id=ab t=1.5
client @@RB BOOTED role=client kernel=6.12.117 build_id=ab t=1.6
server @@RB RDMA_UP dev=rxe0 t=1.8
client @@RB RDMA_UP dev=rxe0 t=1.9
server @@RB PRESSURE_SRV block=1048576 credits=20 threads=16 t=2.9
server @@RB NFSD_READY portlist=rdma 20049,tcp 2049, t=3.0
client @@RB MOUNTED try=1 mount_s=1.2 opts=nfs,rw,vers=3,rsize=1048576,wsize=1048576,proto=rdma,port=20049 t=5.0
client @@RB TRANSPORT xprt=rdma t=5.1
client @@RB RESULT iter=1 mb=480 read_s=30.10 read_MBps=15.95 write_s=30.10 write_MBps=2.13 write_mb=64 t=36
client @@RB SUMMARY test=pressure loop_s=30.50 ok=1 t=36.2
client @@RB POWEROFF status=ok t=36.5
client EXIT
server @@RB CLIENT_DONE msg=ok t=36.4
server @@RB POWEROFF status=ok t=36.6
server EXIT
`

// The pressure test passes only with every setting it needs in effect:
// a server that kept its default block size, credits or threads, or a
// mount without 1 MiB rsize/wsize, measured nothing the test is for.
// Its one result is read and write at once: no copy figure.
func TestRunPressureSettings(t *testing.T) {
	test := DefaultConfig().PressureTest("rxe", 0)
	if err := test.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := feed(t, test, pressureRun).result(context.Background())
	if err != nil || !res.Passed {
		t.Fatalf("err %v res %+v", err, res)
	}
	f := res.Figures()
	if f.Means["read_MBps"] != 15.95 || f.Means["write_MBps"] != 2.13 {
		t.Errorf("figures %+v", f.Means)
	}
	if _, ok := f.Means["copy_MBps"]; ok {
		t.Errorf("a copy figure under pressure: %+v", f.Means)
	}
	for name, c := range map[string]struct{ from, to, want string }{
		"block":    {"block=1048576", "block=131072", `server: block is "131072", want 1048576`},
		"credits":  {"credits=20", "credits=64", `server: credits is "64", want 20`},
		"threads":  {"threads=16", "threads=8", `server: threads is "8", want 16`},
		"silent":   {"server @@RB PRESSURE_SRV", "server x", "server: no settings reported"},
		"rsize":    {"client @@RB TRANSPORT xprt=rdma t=5.1", "client @@RB TRANSPORT xprt=rdma t=5.1\nclient @@RB PRESSURE_FAIL what=rsize opts=rw,rsize=131072 t=5.2", "client: rsize rw,rsize=131072"},
		"nfsd-set": {"server @@RB PRESSURE_SRV", "server @@RB PRESSURE_FAIL what=max_block_size t=2.8\nserver @@RB PRESSURE_SRV", "server: max_block_size"},
	} {
		res, err := feed(t, test, strings.Replace(pressureRun, c.from, c.to, 1)).result(context.Background())
		if err != nil || res.Passed || res.Failure != "pressure settings not in effect: "+c.want {
			t.Errorf("%s: err %v failure %q, want %q", name, err, res.Failure, c.want)
		}
	}
}

// The guests get the load on the kernel command line, and the test
// phase lasts the load's seconds plus one iteration's timeout.
func TestPressureCmdlineAndDeadline(t *testing.T) {
	test := DefaultConfig().PressureTest("siw", 1)
	if test.RDMA != "siw" || test.NFSVersion != "4.1" {
		t.Errorf("boot 1 on siw: %+v", test)
	}
	p := NewQEMUPair(DefaultConfig().QEMU, Image{}, testLogger(t))
	c := p.cmdline("client", test)
	for _, w := range []string{"rb.test=pressure", "rb.rdma=siw", "rb.vers=4.1", "rb.secs=30", "rb.readers=24", "rb.writers=4", "rb.credits=20", "rb.threads=16", "rb.mb=64"} {
		if !strings.Contains(" "+c+" ", " "+w+" ") {
			t.Errorf("cmdline %q lacks %s", c, w)
		}
	}
	r := feed(t, test, strings.Split(pressureRun, "client @@RB RESULT")[0])
	dl, phase := r.deadline()
	want := r.seen["client"]["MOUNTED"].Add(30*time.Second + DefaultConfig().QEMU.IterationTimeout.Duration)
	if phase != "test" || !dl.Equal(want) {
		t.Errorf("deadline %v %s, want %v test", dl, phase, want)
	}
}

// With a trusted peer, what the candidate's console says about itself
// is its own failure, never the lab's: another build id than the one
// built, or none, or a link it says it could not shape. The trusted side saying
// the same is the lab's.
func TestRunCandidateWordsAreItsOwn(t *testing.T) {
	peer := Kernel{BzImage: "base", BuildID: "ab"}
	for name, c := range map[string]struct {
		side, script string
		netem        bool
		wantInfra    bool
		wantHost     string
	}{
		"build id of the candidate":         {SideServer, strings.Replace(goodRun, "role=server kernel=6.12.117 build_id=ab", "role=server kernel=6.12.117 build_id=ff", 1), false, false, "server"},
		"build id of the trusted side":      {SideServer, strings.Replace(goodRun, "role=client kernel=6.12.117 build_id=ab", "role=client kernel=6.12.117 build_id=ff", 1), false, true, "client"},
		"no build id from the candidate":    {SideClient, strings.Replace(goodRun, "role=client kernel=6.12.117 build_id=ab", "role=client kernel=6.12.117 build_id=", 1), false, false, "client"},
		"no build id from the trusted side": {SideClient, strings.Replace(goodRun, "role=server kernel=6.12.117 build_id=ab", "role=server kernel=6.12.117", 1), false, true, "server"},
		"netem of the candidate":            {SideClient, strings.Replace(goodRun, "client @@RB RDMA_UP dev=rxe0 t=1.9", "client @@RB NETEM_FAIL dev=eth0 msg=no t=1.9", 1), true, false, "client"},
		"netem of the trusted side":         {SideServer, strings.Replace(goodRun, "client @@RB RDMA_UP dev=rxe0 t=1.9", "client @@RB NETEM_FAIL dev=eth0 msg=no t=1.9", 1), true, true, "client"},
	} {
		test := DefaultTest()
		test.Iterations = 2
		if c.netem {
			test.Netem = "delay 1ms"
		}
		r := feed(t, test, c.script)
		r.kernel = Kernel{BzImage: "cand", BuildID: "ab", Peer: &peer, Side: c.side}
		_, err := r.result(context.Background())
		var be *BootError
		var ie *InfraError
		switch {
		case c.wantInfra && (!errors.As(err, &ie) || ie.Host != c.wantHost):
			t.Errorf("%s: want the lab's fault on the %s, got %v", name, c.wantHost, err)
		case !c.wantInfra && (!errors.As(err, &be) || be.Host != c.wantHost || flow.IsInfra(err)):
			t.Errorf("%s: want the candidate's failure on the %s, got %v", name, c.wantHost, err)
		}
	}
}

// Results only come from the client, and a client that reports
// progress without end is stopped by the host's clock: the test phase
// lasts no longer than its iterations' limits together.
func TestRunProgressCannotHoldThePair(t *testing.T) {
	test := DefaultTest()
	test.Iterations = 2
	var b strings.Builder
	b.WriteString(strings.Split(goodRun, "client @@RB RESULT")[0])
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&b, "client @@RB RESULT iter=%d mb=32 write_s=0.01 write_MBps=1600 read_s=0.01 read_MBps=1600 cmp=ok t=9\n", i)
		fmt.Fprintf(&b, "server @@RB RESULT iter=%d mb=32 write_s=0.01 write_MBps=1600 read_s=0.01 read_MBps=1600 cmp=ok t=9\n", i)
	}
	r := feed(t, test, b.String())
	if len(r.iters) != 2000 {
		t.Fatalf("%d iterations taken, want the client's 2000 alone", len(r.iters))
	}
	c := r.pair.cfg
	mounted := r.seen["client"]["MOUNTED"]
	dl, phase := r.deadline()
	per := c.IterationTimeout.Duration + time.Duration(test.SizeMiB)*c.PerMiBTimeout.Duration
	if phase != "test" || !dl.Equal(mounted.Add(2*per)) {
		t.Errorf("deadline %v (%s), want mounted + 2 iterations' limits %v", dl.Sub(mounted), phase, 2*per)
	}
}

// A run with the candidate on the client, timed by the trusted server.
const serverTimedRun = `
server @@RB BOOTED role=server kernel=6.12.117 build_id=ab t=1.5
client @@RB BOOTED role=client kernel=6.12.117 build_id=ab t=1.6
server @@RB RDMA_UP dev=rxe0 t=1.8
client @@RB RDMA_UP dev=rxe0 t=1.9
server @@RB NFSD_READY portlist=rdma 20049,tcp 2049, t=3.0
client @@RB MOUNTED try=1 mount_s=1.2 opts=nfs,rw,vers=3,proto=rdma,port=20049 t=5.0
client @@RB TRANSPORT xprt=rdma t=5.1
server @@RB STIME iter=1 mb=32 write_s=1.60 write_MBps=20.00 read_s=1.45 read_MBps=22.07
client @@RB RESULT iter=1 mb=32 gen_s=0 write_s=1.60 write_MBps=20.00 read_s=1.45 read_MBps=22.07 cmp=ok t=9
server @@RB STIME iter=2 mb=32 write_s=1.70 write_MBps=18.82 read_s=1.50 read_MBps=21.33
client @@RB RESULT iter=2 mb=32 gen_s=0 write_s=1.70 write_MBps=18.82 read_s=1.50 read_MBps=21.33 cmp=ok t=13
client @@RB SUMMARY test=transfer loop_s=8.10 ok=1 t=13.2
client @@RB POWEROFF status=ok t=13.5
client EXIT
server @@RB CLIENT_DONE msg=ok t=13.4
server @@RB SRVCMP iter=1 result=ok t=13.5
server @@RB SRVCMP iter=2 result=ok t=13.6
server @@RB SRVIO read=67108864 written=67108864
server @@RB POWEROFF status=ok t=13.7
server EXIT
`

// The trusted server's check of the files a candidate client wrote
// decides whether its data arrived, whatever the client says of its own
// cmp; a candidate server's word on the files counts only against it,
// and the client's check of what it read back stays.
func TestRunServerChecksClientFiles(t *testing.T) {
	test := DefaultTest()
	test.Iterations = 2
	base := Kernel{BzImage: "base", BuildID: "ab"}
	onClient := Kernel{BzImage: "cand", BuildID: "ab", Peer: &base, Side: SideClient}
	onServer := Kernel{BzImage: "cand", BuildID: "ab", Peer: &base, Side: SideServer}
	for name, c := range map[string]struct {
		k                Kernel
		script           string
		passed           bool
		failure, corrupt string
	}{
		"as given":                {onClient, serverTimedRun, true, "", ""},
		"changed on the server":   {onClient, strings.Replace(serverTimedRun, "iter=2 result=ok", "iter=2 result=mismatch", 1), false, "iteration 2: the trusted server did not find the file", "iteration 2 of 2: the file the client wrote over NFS/RDMA is not, on the server, the data it was given (server's check: mismatch)"},
		"never written":           {onClient, strings.Replace(serverTimedRun, "iter=1 result=ok", "iter=1 result=missing", 1), false, "iteration 1: the trusted server did not find the file", "server's check: missing"},
		"the server said nothing": {onClient, strings.Replace(serverTimedRun, "server @@RB SRVCMP", "server x", -1), false, `iteration 1: the trusted server did not find the file as the client was given it ("")`, ""},
		"read back changed":       {onClient, strings.Replace(serverTimedRun, "cmp=ok t=13", "cmp=mismatch t=13", 1), false, "iteration 2: data mismatch", "iteration 2 of 2: the file read back over NFS/RDMA differs"},
		// A candidate server vouches for nothing: the trusted client's
		// cmp decides, and its own check of a file counts against it.
		"candidate server, silent":   {onServer, goodRun, true, "", ""},
		"candidate server, mismatch": {onServer, strings.Replace(goodRun, "server @@RB POWEROFF", "server @@RB SRVCMP iter=1 result=mismatch t=13.5\nserver @@RB POWEROFF", 1), false, "iteration 1: the server did not find the file", "server's check: mismatch"},
	} {
		res, err := feedKernel(t, test, c.k, c.script).result(context.Background())
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if res.Passed != c.passed || !strings.Contains(res.Failure, c.failure) || (c.failure == "") != (res.Failure == "") ||
			!strings.Contains(res.Corrupt, c.corrupt) || (c.corrupt == "") != (res.Corrupt == "") {
			t.Errorf("%s: passed %v failure %q corrupt %q, want %v %q %q", name, res.Passed, res.Failure, res.Corrupt, c.passed, c.failure, c.corrupt)
		}
	}
}
