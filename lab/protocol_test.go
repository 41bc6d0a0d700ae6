package lab

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// The trusted server's server_wait (the real labtest.sh, its nc a stub
// playing a candidate client) prints nothing the client sent: a word
// other than the protocol's is msg=invalid, and a marker the client
// tucked behind its word never reaches the console.
func TestServerWaitEchoesNoPeerBytes(t *testing.T) {
	for sent, want := range map[string]string{
		"ok":   "msg=ok",
		"lost": "msg=lost",
		"ok\n@@RB NETEM_FAIL dev=eth0 msg=injected":                    "msg=invalid",
		"ok\n@@RB BOOTED role=server kernel=6.12.117 build_id=ffff":    "msg=invalid",
		"ok @@RB SRVCMP iter=1 result=ok":                              "msg=invalid",
		"poweroff\n\n@@RB STIME iter=1 mb=32 write_s=0.01 read_s=0.01": "msg=invalid",
	} {
		out := runLabtest(t, "server_wait", map[string]string{"RB_TEST": "none", "RB_SENT": sent})
		var done []string
		for _, l := range strings.Split(out, "\n") {
			m, ok := parseMarker(l)
			if !ok {
				continue
			}
			if m.Event != "CLIENT_DONE" {
				t.Errorf("%q: the server printed %q", sent, l)
			}
			done = append(done, l)
		}
		if len(done) != 1 || !strings.Contains(done[0], want+" t=") {
			t.Errorf("%q: CLIENT_DONE lines %q, want one with %s", sent, done, want)
		}
		if strings.Contains(out, "injected") || strings.Contains(out, "ffff") {
			t.Errorf("%q: the client's bytes reached the server's console:\n%s", sent, out)
		}
	}
}

// runLabtest runs labtest.sh's fns under sh with env, nc and the test's
// /proc reads stubbed: nc -l prints RB_SENT, as a client would send it.
func runLabtest(t *testing.T, fns string, env map[string]string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "labtest.sh")
	if err := os.WriteFile(script, labtestScript, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `. "$0"; nc() { printf '%s\n' "$RB_SENT"; }; server_health() { :; }; `+fns, script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// The pressure load ends when its own readers and writers do, though the
// guest's init keeps a process of its own in the background all boot
// long (init.sh's RPC task watcher): a bare wait waited for it, and
// every pressure boot stalled with no I/O in flight.
func TestClientPressureWaitsForItsOwnLoadOnly(t *testing.T) {
	mnt := t.TempDir()
	if err := os.WriteFile(filepath.Join(mnt, "big"), make([]byte, 16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := runLabtest(t, `mount_opts() { echo nfs,rw,rsize=1048576,wsize=1048576; }
sleep 60 </dev/null >/dev/null 2>&1 &
watcher=$!
client_pressure
kill $watcher`, map[string]string{"MNT": mnt, "RB_SECS": "1", "RB_READERS": "2", "RB_WRITERS": "1", "RB_MB": "16"})
	if took := time.Since(start); took > 30*time.Second || !strings.Contains(out, "@@RB RESULT iter=1 mb=") {
		t.Errorf("the pressure load of 1 s ended after %v:\n%s", took.Round(time.Second), out)
	}
}

// Markers no script prints where they came decide the run against the
// kernel under test, whichever console showed them: never the lab's
// fault, so never retried.
func TestRunProtocolViolationIsTheCandidates(t *testing.T) {
	test := DefaultTest()
	test.Iterations = 2
	test.Netem = "delay 1ms"
	base := Kernel{BzImage: "base", BuildID: "ab"}
	onClient := Kernel{BzImage: "cand", BuildID: "ab", Peer: &base, Side: SideClient}
	onServer := Kernel{BzImage: "cand", BuildID: "ab", Peer: &base, Side: SideServer}
	after := func(script, line, extra string) string { return strings.Replace(script, line, line+"\n"+extra, 1) }
	for name, c := range map[string]struct {
		k      Kernel
		script string
		host   string
	}{
		"a second BOOTED from the client":                          {onClient, after(serverTimedRun, "client @@RB TRANSPORT xprt=rdma t=5.1", "client @@RB BOOTED role=client kernel=6.12.117 build_id=ab"), SideClient},
		"NETEM_FAIL on the trusted server after the client's word": {onClient, after(serverTimedRun, "server @@RB CLIENT_DONE msg=ok t=13.4", "server @@RB NETEM_FAIL dev=eth0 msg=injected"), SideClient},
		"a client's event on the server":                           {onClient, after(serverTimedRun, "server @@RB NFSD_READY portlist=rdma 20049,tcp 2049, t=3.0", "server @@RB RESULT iter=1 mb=32 write_s=0.01 write_MBps=1600"), SideClient},
		"an unknown event":                                         {onServer, after(goodRun, "server @@RB NFSD_READY portlist=rdma 20049,tcp 2049, t=3.0", "server @@RB WHATEVER x=1"), SideServer},
		"NETEM_FAIL on the trusted client after its test":          {onServer, after(goodRun, "client @@RB SUMMARY test=transfer loop_s=8.10 ok=1 t=13.2", "client @@RB NETEM_FAIL dev=eth0 msg=x"), SideServer},
	} {
		r := feedKernel(t, test, c.k, c.script)
		if r.violated() == "" {
			t.Errorf("%s: no violation seen", name)
		}
		_, err := r.result(context.Background())
		var be *BootError
		if !errors.As(err, &be) || be.Host != c.host || be.Phase != "protocol" || flow.IsInfra(err) {
			t.Errorf("%s: %v, want the candidate's (%s) protocol failure", name, err, c.host)
		}
	}
	// NETEM_FAIL where a side may send it, from the trusted side, stays
	// the lab's; mid-line, it is nothing at all.
	honest := strings.Replace(serverTimedRun, "server @@RB RDMA_UP dev=rxe0 t=1.8", "server @@RB NETEM_FAIL dev=eth0 msg=unknown qdisc", 1)
	if _, err := feedKernel(t, test, onClient, honest).result(context.Background()); !flow.IsInfra(err) {
		t.Errorf("the trusted server's own NETEM_FAIL: %v, want the lab's", err)
	}
	invalid := strings.Replace(serverTimedRun, "CLIENT_DONE msg=ok", "CLIENT_DONE msg=invalid", 1)
	if res, err := feedKernel(t, test, onClient, invalid).result(context.Background()); err != nil || res.Failure != errInvalidDone {
		t.Errorf("a client's word other than the protocol's: %v %+v", err, res)
	}
	m, err := readMarkers(&Result{Kernel: onClient, Test: test, Server: Host{Console: "@@RB CLIENT_DONE msg=invalid\n"}}, "server")
	if err != nil || m.failure(&Result{Test: test, Transport: test.Transport}, nil, true) != errInvalidDone {
		t.Errorf("over SSH, a client's word other than the protocol's: %v", err)
	}
	// Over SSH alike: a trusted server's session showing NETEM_FAIL after
	// the client's word is the candidate client's doing.
	ssh := &Result{Kernel: onClient, Test: test}
	ssh.Server.Console, ssh.Client.Console = sessions(after(serverTimedRun, "server @@RB CLIENT_DONE msg=ok t=13.4", "server @@RB NETEM_FAIL dev=eth0 msg=injected"))
	var be *BootError
	if _, err := readMarkers(ssh, "server"); !errors.As(err, &be) || be.Host != SideClient || be.Phase != "protocol" {
		t.Errorf("over SSH, an injected NETEM_FAIL: %v, want the candidate client's protocol failure", err)
	}
	midLine := strings.Replace(serverTimedRun, "server @@RB CLIENT_DONE msg=ok t=13.4", "server @@RB CLIENT_DONE msg=ok t=13.4\nserver nfsd: client said @@RB NETEM_FAIL dev=eth0 msg=x", 1)
	if res, err := feedKernel(t, test, onClient, midLine).result(context.Background()); err != nil || !res.Passed {
		t.Errorf("a marker within a kernel line: %v %+v", err, res)
	}
}

// A reproducer's QEMU command lines are the lab's own (guestSpec.args of
// the run's spec): a shell splits each back into the argv the pair would
// start, with the reader's paths and port, and the data goes to the
// guests that hold it in each boot.
func TestCommandLinesAreTheLabs(t *testing.T) {
	c := DefaultConfig()
	base, cand := CommandLines(c, SideServer)
	if len(base) != 2 || len(cand) != 2 {
		t.Fatalf("base %d lines, candidate %d: want 2 each (server, client)", len(base), len(cand))
	}
	argv := func(line string) []string {
		out, err := exec.Command("sh", "-c", `BASE=/b CANDIDATE=/c IMAGE=/i DATA=/d PORT=5555; set -- `+line+`; printf '%s\n' "$@"`).Output()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	}
	after := func(args []string, flag string) string {
		if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
			return args[i+1]
		}
		return ""
	}
	for _, c := range []struct {
		line                             string
		kernel, initrd, netdev, roleWord string
	}{
		{base[0], "/b", "/d", "socket,id=n0,listen=127.0.0.1:5555", "rb.role=server"},
		{base[1], "/b", "/d", "socket,id=n0,connect=127.0.0.1:5555", "rb.role=client"},
		// The candidate on the server: the trusted client holds the data.
		{cand[0], "/c", "/i", "socket,id=n0,listen=127.0.0.1:5555", "rb.role=server"},
		{cand[1], "/b", "/d", "socket,id=n0,connect=127.0.0.1:5555", "rb.role=client"},
	} {
		a := argv(c.line)
		if a[0] != DefaultConfig().QEMU.Binary || after(a, "-kernel") != c.kernel || after(a, "-initrd") != c.initrd ||
			after(a, "-netdev") != c.netdev || !strings.Contains(after(a, "-append"), c.roleWord+" ") {
			t.Errorf("%s\nsplits into %q", c.line, a)
		}
		if want := DefaultConfig().QEMU.Icount; want != "" && after(a, "-icount") != want {
			t.Errorf("-icount %q, want %q", after(a, "-icount"), want)
		}
	}
	// The candidate on the client: the server takes the times.
	if _, cand := CommandLines(c, SideClient); !strings.Contains(cand[1], "-kernel \"$CANDIDATE\"") || !strings.Contains(cand[0], "rb.timer=server") {
		t.Errorf("candidate on the client:\n%s", strings.Join(cand, "\n"))
	}
}
