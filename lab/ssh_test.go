package lab

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/rdmabot/rdmabot/internal/cfgtype"
)

func newKey(t *testing.T) (ed25519.PrivateKey, []byte, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "rdmabot-test")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pem.EncodeToMemory(block), sp
}

// overlay is the guest image plus a second archive with the test's keys;
// the kernel unpacks concatenated archives in order, each compressed or
// not (this one is gzip'ed, the image's are plain).
func overlay(t *testing.T, base string, files map[string][]byte) string {
	t.Helper()
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	var extra bytes.Buffer
	zw := gzip.NewWriter(&extra)
	cw := newCpioWriter(zw)
	for _, d := range []string{"root", "root/.ssh", "etc", "etc/ssh"} {
		mode := uint32(0o755)
		if d == "root/.ssh" {
			mode = 0o700
		}
		if err := cw.dir(d, mode); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range files {
		if err := cw.file(name, 0o600, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "rootfs+keys.cpio")
	if err := os.WriteFile(p, append(b, extra.Bytes()...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sshLab boots an idle QEMU pair whose guests run sshd, each reachable
// only through a forward from 127.0.0.1. The forward uses QEMU's user
// network with restrict=on: the guest can reach nothing through it (not
// the host, not the outside); only the inbound forward to its sshd works.
func sshLab(t *testing.T) (SSHPairConfig, *idlePair) {
	p, _ := testPair(t)
	_, clientKey, clientPub := newKey(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, clientKey, 0o600); err != nil {
		t.Fatal(err)
	}
	var known bytes.Buffer
	cfg := SSHPairConfig{Name: "qemu-ssh", Lease: cfgtype.D(30 * time.Minute), RDMA: "hw", Disposable: true}
	p.extraArgs = map[string][]string{}
	p.extraInitrd = map[string]string{}
	withSSH, err := p.image.WithLayers("ssh")
	if err != nil {
		t.Fatal(err)
	}
	for i, role := range []string{"server", "client"} {
		_, hostKey, hostPub := newKey(t)
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		p.extraArgs[role] = []string{
			"-netdev", fmt.Sprintf("user,id=m0,restrict=on,hostfwd=tcp:127.0.0.1:%d-10.0.2.15:22", port),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=m0,mac=52:54:00:00:01:0%d", i+1),
		}
		p.extraInitrd[role] = overlay(t, withSSH, map[string][]byte{
			"root/.ssh/authorized_keys":     ssh.MarshalAuthorizedKey(clientPub),
			"etc/ssh/ssh_host_ed25519_key":  hostKey,
			"etc/ssh/ssh_host_ed25519_.pub": ssh.MarshalAuthorizedKey(hostPub),
		})
		known.WriteString(knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostPub) + "\n")
		h := SSHHostConfig{Address: addr, User: "root", KeyFile: keyFile, KnownHosts: filepath.Join(dir, "known_hosts"),
			TestIP: serverIP, Netdev: "eth0", Boot: "reboot"}
		if role == "client" {
			h.TestIP = clientIP
			cfg.Client = h
		} else {
			cfg.Server = h
		}
	}
	if err := os.WriteFile(cfg.Server.KnownHosts, known.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ip, err := p.startIdle(context.Background(), testKernel(t))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, ip
}

func testSSHPair(cfg SSHPairConfig, t *testing.T) *SSHPair {
	sp := NewSSHPair(cfg, &Leases{Dir: t.TempDir(), Now: time.Now}, "test", testLogger(t))
	sp.RDMA = "rxe" // soft RoCE between the guests
	sp.BootWait, sp.Poll = 3*time.Minute, time.Second
	return sp
}

// The SSH driver for real, against sshd in two QEMU guests: reserve,
// copy the kernel, reboot into it, verify release and build id, run the
// transfer test over NFS/RDMA between the hosts, collect dmesg, reboot
// back to the known-good kernel, release. The kernel is a candidate on
// the client beside a trusted copy of it on the server, which takes the
// times and checks the files the client wrote and read back, as in the
// QEMU pair.
func TestSSHPairAgainstGuests(t *testing.T) {
	cfg, ip := sshLab(t)
	sp := testSSHPair(cfg, t)
	test := DefaultTest()
	test.SizeMiB, test.Iterations = 4, 2
	k := onClientBesideCopy(t, testKernel(t))
	res, err := sp.Run(context.Background(), k, test)
	if err != nil {
		srvConsole, _ := ip.stop()
		t.Fatalf("%v\nserver console:\n%s", err, tail(srvConsole, 30))
	}
	if !res.Passed || res.Transport != "rdma" || len(res.Iterations) != 2 {
		t.Fatalf("passed=%v %q transport %q iterations %+v\nclient:\n%s\nserver:\n%s", res.Passed, res.Failure, res.Transport, res.Iterations, res.Client.Console, res.Server.Console)
	}
	if !strings.Contains(res.Server.Dmesg, "Linux version") {
		t.Error("server dmesg not collected")
	}
	// The trusted server's figures and checks decided.
	if n := strings.Count(res.Server.Console, "@@RB STIME iter="); n != 2 {
		t.Errorf("the server timed %d of 2 iterations:\n%s", n, res.Server.Console)
	}
	if n := strings.Count(res.Server.Console, " result=ok "); n != 2 {
		t.Errorf("the server found %d of 2 files as given:\n%s", n, res.Server.Console)
	}
	for _, it := range res.Iterations {
		if it.Cmp != "ok" || it.WriteMBps <= 0 {
			t.Errorf("iteration %+v", it)
		}
	}

	// A client whose files changed once the driving was over: the
	// trusted server's checks find it over SSH too.
	sp.crash = "corrupt"
	res, err = sp.Run(context.Background(), k, test)
	srvConsole, cliConsole := ip.stop()
	if err != nil {
		t.Fatalf("%v\nserver console:\n%s", err, tail(srvConsole, 30))
	}
	if res.Passed || !strings.Contains(res.Corrupt, "server's check: mismatch") ||
		strings.Count(res.Server.Console, " result=mismatch ") != 2 {
		t.Errorf("changed on the server: passed=%v failure %q corrupt %q\n%s", res.Passed, res.Failure, res.Corrupt, res.Server.Console)
	}
	// Booted five times each: first boot, then into the kernel and back
	// to known-good for each run.
	for role, c := range map[string]string{"server": srvConsole, "client": cliConsole} {
		if n := strings.Count(c, "@@RB BOOTED"); n != 5 {
			t.Errorf("%s booted %d times, want 5", role, n)
		}
	}
	// The lease is gone: another holder can take both hosts.
	if _, err := sp.leases.Acquire("other", time.Minute, cfg.Server.Address, cfg.Client.Address); err != nil {
		t.Errorf("lease not released: %v", err)
	}
	t.Logf("phases %+v iterations %+v", res.Phases, res.Iterations)
}

// A host whose key is not the known one is refused, as the lab's fault.
func TestSSHPairUnknownHostKey(t *testing.T) {
	cfg, ip := sshLab(t)
	defer ip.stop()
	_, _, otherPub := newKey(t)
	line := knownhosts.Line([]string{knownhosts.Normalize(cfg.Server.Address), knownhosts.Normalize(cfg.Client.Address)}, otherPub)
	if err := os.WriteFile(cfg.Server.KnownHosts, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := testSSHPair(cfg, t).Run(context.Background(), testKernel(t), DefaultTest())
	var ie *InfraError
	var ke *knownhosts.KeyError
	if !errors.As(err, &ie) || ie.Op != "ssh unreachable" || !errors.As(err, &ke) {
		t.Fatalf("want InfraError from a host key mismatch, got %v", err)
	}
}

// The boot command must run where nohup does not exist, as in the QEMU
// guests (Debian's busybox-static has no nohup applet): before, the host
// silently never rebooted.
func TestDetachedNeedsNoNohup(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed")
	}
	bin := t.TempDir()
	for _, applet := range []string{"sh", "sleep", "echo"} {
		if err := os.Symlink(bb, filepath.Join(bin, applet)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(filepath.Join(bin, "sh"), "-c", detached("echo 'rebooting' > "+out))
	cmd.Env = []string{"PATH=" + bin}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(out)
		if err == nil && string(b) == "rebooting\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the detached command never ran: %v %q", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A host that resets while the driver reads its boot id leaves an SSH
// session that never answers and a connection that never closes. Before,
// waitUp waited on it forever (seen when the guests' faster boot put a
// poll inside the reboot); now each try is bounded and dials anew.
func TestWaitUpAbandonsASilentSession(t *testing.T) {
	var conns atomic.Int32
	h := fakeSSHHost(t, "server", &conns, func(ch ssh.Channel, chReqs <-chan *ssh.Request) {
		// Accept the session and its command, then go silent with the
		// connection open, as a machine that reset.
		for r := range chReqs {
			r.Reply(r.Type == "exec", nil)
		}
		ch.Close()
	})
	p := &SSHPair{BootWait: 2 * time.Second, Poll: 50 * time.Millisecond, Probe: 300 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := p.waitUp(ctx, h, "old")
	if err == nil || !strings.Contains(err.Error(), "not back after") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a host that is not back, the last try timed out; got %v", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("waitUp took %v", took)
	}
	if n := conns.Load(); n < 2 {
		t.Errorf("%d connections: a try after a silent one must dial anew", n)
	}
}

// sessions splits a scripted run (role-prefixed lines, as feed reads
// them) into the two hosts' SSH output, leaving out lines that start
// with any of drop.
func sessions(script string, drop ...string) (server, client string) {
	var out = map[string]*strings.Builder{"server": {}, "client": {}}
	for _, l := range strings.Split(strings.TrimSpace(script), "\n") {
		l = strings.TrimSpace(l)
		role, text, _ := strings.Cut(l, " ")
		if text == "EXIT" || slices.ContainsFunc(drop, func(p string) bool { return strings.HasPrefix(l, p) }) {
			continue
		}
		out[role].WriteString(text + "\n")
	}
	return out["server"].String(), out["client"].String()
}

// Over SSH the hosts' sessions are judged by the QEMU pair's rules: with
// the kernel under test on the client, the trusted server's times,
// checks and byte counts decide, and a server cut off before it said
// anything passes nothing.
func TestSSHJudgesByTheTrustedServer(t *testing.T) {
	test := DefaultTest()
	test.Iterations = 2
	base := Kernel{BzImage: "base"}
	onClient := Kernel{BzImage: "cand", Peer: &base, Side: SideClient}
	// The candidate client says 1600 MB/s; the server timed 20.
	boasting := strings.ReplaceAll(serverTimedRun, "client @@RB RESULT iter=1 mb=32 gen_s=0 write_s=1.60 write_MBps=20.00", "client @@RB RESULT iter=1 mb=32 gen_s=0 write_s=0.02 write_MBps=1600.00")
	for name, c := range map[string]struct {
		k                Kernel
		script           string
		drop             []string
		failure, corrupt string
		writeMBps        float64
	}{
		"timed by the server": {onClient, boasting, nil, "", "", 20},
		"server cut off":      {onClient, serverTimedRun, []string{"server @@RB STIME", "server @@RB SRVCMP", "server @@RB SRVIO"}, "0 of 2 iterations ran", "", 0},
		"no byte counts":      {onClient, serverTimedRun, []string{"server @@RB SRVIO"}, "the trusted server reported no byte counts", "", 20},
		"no checks":           {onClient, serverTimedRun, []string{"server @@RB SRVCMP"}, `iteration 1: the trusted server did not find the file as the client was given it ("")`, "", 20},
		"trusted client":      {Kernel{BzImage: "k"}, goodRun, nil, "", "", 20},
		"trusted client, a server's mismatch": {Kernel{BzImage: "k"}, strings.Replace(goodRun, "server @@RB POWEROFF", "server @@RB SRVCMP iter=2 result=mismatch\nserver @@RB POWEROFF", 1), nil,
			"iteration 2: the server did not find the file", "server's check: mismatch", 20},
	} {
		res := &Result{Kernel: c.k, Test: test}
		res.Server.Console, res.Client.Console = sessions(c.script, c.drop...)
		timer := map[bool]string{true: "client", false: "server"}[c.k.Trusted("client")]
		m, err := readMarkers(res, timer)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		failure := m.failure(res, nil, timer == "server")
		corrupt := m.checks.corrupt(res.Iterations)
		if !strings.Contains(failure, c.failure) || (c.failure == "") != (failure == "") ||
			!strings.Contains(corrupt, c.corrupt) || (c.corrupt == "") != (corrupt == "") {
			t.Errorf("%s: failure %q corrupt %q, want %q %q", name, failure, corrupt, c.failure, c.corrupt)
		}
		if len(res.Iterations) > 0 && (res.Iterations[0].WriteMBps != c.writeMBps || res.Iterations[0].Cmp != "ok") {
			t.Errorf("%s: iteration %+v, want the timer's %v MB/s and the client's cmp", name, res.Iterations[0], c.writeMBps)
		}
	}

	// A client whose RDMA device never came up is its kernel's failure.
	res := &Result{Kernel: onClient, Test: test}
	res.Server.Console, res.Client.Console = sessions("client @@RB RDMA_FAIL dev=rxe0")
	var be *BootError
	if _, err := readMarkers(res, "server"); !errors.As(err, &be) || be.Host != "client" {
		t.Errorf("RDMA_FAIL: %v, want the client's BootError", err)
	}
}

// fakeSSHHost is an sshHost of role connected (once dialled) to an SSH
// server in the test, which hands each session to session and counts
// its connections in conns.
func fakeSSHHost(t *testing.T, role string, conns *atomic.Int32, session func(ssh.Channel, <-chan *ssh.Request)) *sshHost {
	t.Helper()
	hostPriv, _, hostPub := newKey(t)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	_, clientKey, clientPub := newKey(t)
	srv := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if !bytes.Equal(k.Marshal(), clientPub.Marshal()) {
			return nil, errors.New("unknown key")
		}
		return nil, nil
	}}
	srv.AddHostKey(hostSigner)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				_, chans, reqs, err := ssh.NewServerConn(c, srv)
				if err != nil {
					return
				}
				go ssh.DiscardRequests(reqs)
				for nc := range chans {
					ch, chReqs, err := nc.Accept()
					if err != nil {
						continue
					}
					go session(ch, chReqs)
				}
			}()
		}
	}()
	dir := t.TempDir()
	keyFile, known := filepath.Join(dir, "key"), filepath.Join(dir, "known_hosts")
	os.WriteFile(keyFile, clientKey, 0o600)
	os.WriteFile(known, []byte(knownhosts.Line([]string{knownhosts.Normalize(l.Addr().String())}, hostPub)+"\n"), 0o644)
	h, err := newSSHHost(role, SSHHostConfig{Address: l.Addr().String(), User: "root", KeyFile: keyFile, KnownHosts: known})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	return h
}

// A host that runs another kernel than the one copied to it: the kernel
// under test's own failure, but the lab's when the kernel is the
// trusted base beside a candidate, or (its build id) any trusted one.
func TestSSHVerifyBlamesByTrust(t *testing.T) {
	const good, other = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	answer := func(release, buildID string) *sshHost {
		var conns atomic.Int32
		h := fakeSSHHost(t, "server", &conns, func(ch ssh.Channel, chReqs <-chan *ssh.Request) {
			for r := range chReqs {
				r.Reply(r.Type == "exec", nil)
				if r.Type == "exec" {
					io.WriteString(ch, release+"\n"+buildID+"\n")
					ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
					ch.Close()
					return
				}
			}
		})
		if err := h.dial(context.Background()); err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := Kernel{BzImage: "base", Release: "6.12.0", BuildID: good}
	cand := Kernel{BzImage: "cand", Release: "6.12.0-rb", BuildID: good}
	candOnServer, candOnClient := cand, cand
	candOnServer.Peer, candOnServer.Side = &base, SideServer
	candOnClient.Peer, candOnClient.Side = &base, SideClient
	p := &SSHPair{}
	for name, c := range map[string]struct {
		k                Kernel
		release, buildID string
		want             string // "", "infra" or "boot"
	}{
		"as copied":                    {candOnServer, "6.12.0-rb", good, ""},
		"candidate, another release":   {candOnServer, "6.12.0", good, "boot"},
		"candidate, another build id":  {candOnServer, "6.12.0-rb", other, "boot"},
		"trusted base, other release":  {candOnClient, "6.1.0", good, "infra"},
		"trusted base, other build id": {candOnClient, "6.12.0", other, "infra"},
		"alone, another release":       {base, "6.1.0", good, "boot"},
		"alone, another build id":      {base, "6.12.0", other, "infra"},
	} {
		err := p.verify(context.Background(), answer(c.release, c.buildID), c.k)
		var ie *InfraError
		var be *BootError
		got := ""
		switch {
		case errors.As(err, &ie):
			got = "infra"
		case errors.As(err, &be):
			got = "boot"
		case err != nil:
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: %v (%s), want %q", name, err, got, c.want)
		}
	}
	// A trusted base that does not come up beside a candidate is the
	// lab's; the candidate's, or a kernel's alone, is a boot failure.
	booted := &BootError{Host: "client", Phase: "boot", Err: errors.New("not back")}
	if err := trustedFault(candOnServer, "client", booted); !errors.As(err, new(*InfraError)) {
		t.Errorf("trusted base not up: %v", err)
	}
	if err := trustedFault(candOnClient, "client", booted); err != booted {
		t.Errorf("candidate not up: %v", err)
	}
	if err := trustedFault(base, "client", booted); err != booted {
		t.Errorf("alone not up: %v", err)
	}
}
