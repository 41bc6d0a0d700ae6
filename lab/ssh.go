package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/rdmabot/rdmabot/lab/console"
)

// SSHPair drives two real hosts over SSH: it reserves both, copies the
// kernel, boots it (kexec or a one-shot GRUB entry), proves the hosts run
// it (uname -r, build id), runs the test with the same shell functions as
// the QEMU guests, collects dmesg, and reboots both into their known-good
// kernel. A host that stops answering is power-cycled through its BMC.
type SSHPair struct {
	cfg    SSHPairConfig
	leases *Leases
	holder string
	log    *slog.Logger
	// BootWait bounds a reboot, Poll is how often a rebooting host is
	// tried, Probe one try (connect and read the boot id). Real hosts
	// need minutes; tests shorten them.
	BootWait time.Duration
	Poll     time.Duration
	Probe    time.Duration
	// RDMA overrides the pair's rdma setting (tests use "rxe" inside QEMU).
	RDMA string
	// crash is labtest.sh's RB_CRASH on both hosts: a self-test of the
	// host's own checks, set by tests only.
	crash string
}

// NewSSHPair returns the driver for one configured pair; holder names
// this bot in leases.
func NewSSHPair(cfg SSHPairConfig, leases *Leases, holder string, log *slog.Logger) *SSHPair {
	return &SSHPair{cfg: cfg, leases: leases, holder: holder, log: log,
		BootWait: 10 * time.Minute, Poll: 5 * time.Second, Probe: 30 * time.Second, RDMA: cfg.RDMA}
}

// sshHost is one connected host.
type sshHost struct {
	role   string
	cfg    SSHHostConfig
	auth   ssh.AuthMethod
	keys   ssh.HostKeyCallback
	client *ssh.Client
	out    bytes.Buffer // everything the test printed: this host's "console"
}

func newSSHHost(role string, c SSHHostConfig) (*sshHost, error) {
	key, err := os.ReadFile(c.KeyFile)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.KeyFile, err)
	}
	// Strict: an unknown or changed host key is refused, never learned.
	keys, err := knownhosts.New(c.KnownHosts)
	if err != nil {
		return nil, err
	}
	return &sshHost{role: role, cfg: c, auth: ssh.PublicKeys(signer), keys: keys}, nil
}

func (h *sshHost) dial(ctx context.Context) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", h.cfg.Address)
	if err != nil {
		return err
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	c, chans, reqs, err := ssh.NewClientConn(conn, h.cfg.Address, &ssh.ClientConfig{
		User: h.cfg.User, Auth: []ssh.AuthMethod{h.auth}, HostKeyCallback: h.keys, Timeout: 10 * time.Second,
	})
	if err != nil {
		conn.Close()
		return err
	}
	conn.SetDeadline(time.Time{})
	if h.client != nil {
		h.client.Close()
	}
	h.client = ssh.NewClient(c, chans, reqs)
	return nil
}

func (h *sshHost) close() {
	if h.client != nil {
		h.client.Close()
		h.client = nil
	}
}

// run runs a shell command, with stdin if given; ctx ends it by closing
// the session.
func (h *sshHost) run(ctx context.Context, cmd string, stdin io.Reader) (string, error) {
	if h.client == nil {
		return "", errors.New("not connected")
	}
	s, err := h.client.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	// Locked buffers: a session given up on (ctx ended; a host that reset
	// never answers) may still be writing when run returns what it has.
	out, errb := &tailBuffer{}, &tailBuffer{max: 64 << 10}
	s.Stdout, s.Stderr, s.Stdin = out, errb, stdin
	done := make(chan error, 1)
	go func() { done <- s.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		s.Close()
		return out.text(), ctx.Err()
	}
	if err != nil {
		return out.text(), fmt.Errorf("%q: %w: %s", firstLine(cmd), err, lastLines(errb.String(), 5))
	}
	return out.text(), nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	if len(l) > 60 {
		l = l[:60] + "..."
	}
	return l
}

func (h *sshHost) bootID(ctx context.Context) (string, error) {
	out, err := h.run(ctx, "cat /proc/sys/kernel/random/boot_id", nil)
	return strings.TrimSpace(out), err
}

// put writes data to path atomically and checks its SHA-256 there.
func (h *sshHost) put(ctx context.Context, path string, data []byte, mode os.FileMode) error {
	sum := sha256.Sum256(data)
	cmd := fmt.Sprintf("mkdir -p \"$(dirname %[1]s)\" && cat > %[1]s.tmp && chmod %[2]o %[1]s.tmp && "+
		"[ \"$(sha256sum %[1]s.tmp | cut -d' ' -f1)\" = %[3]s ] && mv %[1]s.tmp %[1]s", path, mode, hex.EncodeToString(sum[:]))
	_, err := h.run(ctx, cmd, bytes.NewReader(data))
	return err
}

// Run implements Pair.
func (p *SSHPair) Run(ctx context.Context, k Kernel, t Test) (res *Result, err error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	t.RDMA = p.RDMA
	if k, err = withBuildIDs(k); err != nil {
		return nil, err
	}
	k, kernels, images, err := hostKernels(k)
	if err != nil {
		return nil, err
	}
	lease, err := p.leases.Acquire(p.holder, p.cfg.Lease.Duration, p.cfg.Server.Address, p.cfg.Client.Address)
	if err != nil {
		return nil, &InfraError{Op: "reserve", Err: err}
	}
	defer lease.Release()

	hosts := map[string]*sshHost{}
	for role, hc := range map[string]SSHHostConfig{"server": p.cfg.Server, "client": p.cfg.Client} {
		h, err := newSSHHost(role, hc)
		if err != nil {
			return nil, &InfraError{Host: role, Op: "ssh config", Err: err}
		}
		hosts[role] = h
		defer h.close()
	}
	start := time.Now()
	// The known-good identity of each host we changed, to return to.
	good := map[string]identity{}
	err = p.installBoth(ctx, hosts, k, kernels, images, good)
	// Whatever happened, both hosts go back to their known-good kernel.
	defer func() {
		t := time.Now()
		if rerr := p.restore(ctx, hosts, good); rerr != nil && err == nil {
			err = rerr
		}
		if res != nil {
			res.Phases.Shutdown = time.Since(t).Seconds()
			res.Phases.Total = time.Since(start).Seconds()
		}
	}()
	if err != nil {
		return nil, err
	}
	booted := time.Now()
	res, err = p.test(ctx, hosts, k, t)
	if res != nil {
		res.Phases.Boot = booted.Sub(start).Seconds()
	}
	return res, err
}

// hostKernels reads each host's kernel image: the candidate on its side,
// the trusted peer on the other (Kernel.Peer), or the one kernel on both.
// k comes back with the candidate's release and build ID, and its Peer
// as the other host will boot it.
func hostKernels(k Kernel) (Kernel, map[string]Kernel, map[string][]byte, error) {
	kernels := map[string]Kernel{}
	images := map[string][]byte{}
	for _, role := range []string{"server", "client"} {
		hk := k.On(role)
		hk.Peer = nil
		var err error
		if images[role], err = os.ReadFile(hk.BzImage); err != nil {
			return k, nil, nil, &InfraError{Op: "kernel artifact", Err: err}
		}
		if hk.Release == "" {
			if hk.Release, err = ReadRelease(hk.BzImage); err != nil {
				return k, nil, nil, &InfraError{Op: "kernel artifact", Err: err}
			}
		}
		kernels[role] = hk
	}
	cand := k.Side
	if k.Peer == nil {
		cand = SideServer
	}
	k.Release, k.BuildID = kernels[cand].Release, kernels[cand].BuildID
	if k.Peer != nil {
		other := SideServer
		if cand == SideServer {
			other = SideClient
		}
		pk := kernels[other]
		k.Peer = &pk
	}
	return k, kernels, images, nil
}

// installBoth copies each host's kernel and modules and boots it, on the
// two hosts at once, recording in good the known-good identity of every
// host it may have changed (to restore whatever the error).
func (p *SSHPair) installBoth(ctx context.Context, hosts map[string]*sshHost, k Kernel, kernels map[string]Kernel, images map[string][]byte, good map[string]identity) error {
	var goodMu sync.Mutex
	return p.both(hosts, func(h *sshHost) error {
		if err := p.reach(ctx, h); err != nil {
			return err
		}
		id, err := h.identity(ctx)
		if err != nil {
			return &InfraError{Host: h.role, Op: "ssh", Err: err}
		}
		hk := kernels[h.role]
		path := "/boot/rdmabot/vmlinuz-" + hk.Release
		if err := h.put(ctx, path, images[h.role], 0o644); err != nil {
			return &InfraError{Host: h.role, Op: "copy kernel", Err: err}
		}
		if hk.Modules != "" {
			if err := p.putModules(ctx, h, hk.Modules); err != nil {
				return &InfraError{Host: h.role, Op: "copy modules", Err: err}
			}
		}
		// From here on the host may run something else: restore it.
		goodMu.Lock()
		good[h.role] = id
		goodMu.Unlock()
		if err := p.boot(ctx, h, path, hk.Release); err != nil {
			return trustedFault(k, h.role, err)
		}
		return p.verify(ctx, h, k)
	})
}

// trustedFault is a boot error of role's kernel as it is blamed: the
// trusted copy of the base beside a candidate (Kernel.Peer) failing to
// come up is the lab's fault, not the candidate's.
func trustedFault(k Kernel, role string, err error) error {
	var be *BootError
	if k.Peer == nil || !k.Trusted(role) || !errors.As(err, &be) {
		return err
	}
	return &InfraError{Host: role, Op: "boot trusted kernel", Err: be}
}

// both runs f on the two hosts at once and returns the first error.
func (p *SSHPair) both(hosts map[string]*sshHost, f func(*sshHost) error) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, role := range []string{"server", "client"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(hosts[role])
		}()
	}
	wg.Wait()
	return errors.Join(errs[0], errs[1])
}

// reach connects, power-cycling the host once if it does not answer.
func (p *SSHPair) reach(ctx context.Context, h *sshHost) error {
	if err := h.dial(ctx); err == nil {
		return nil
	} else if len(h.cfg.PowerCycle) == 0 {
		return &InfraError{Host: h.role, Op: "ssh unreachable", Err: err}
	}
	if err := p.powerCycle(ctx, h); err != nil {
		return err
	}
	if _, err := p.waitUp(ctx, h, ""); err != nil {
		return &InfraError{Host: h.role, Op: "ssh unreachable after power cycle", Err: err}
	}
	return nil
}

func (p *SSHPair) powerCycle(ctx context.Context, h *sshHost) error {
	if len(h.cfg.PowerCycle) == 0 {
		return &InfraError{Host: h.role, Op: "bmc", Err: errors.New("no power_cycle command configured")}
	}
	p.log.Warn("lab: power-cycling host", "host", h.role, "address", h.cfg.Address)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, h.cfg.PowerCycle[0], h.cfg.PowerCycle[1:]...).CombinedOutput()
	if err != nil {
		return &InfraError{Host: h.role, Op: "bmc power cycle", Err: fmt.Errorf("%v: %s", err, strings.TrimSpace(lastLines(string(out), 5)))}
	}
	return nil
}

// waitUp dials until the host answers with a boot id other than old.
func (p *SSHPair) waitUp(ctx context.Context, h *sshHost, old string) (string, error) {
	deadline := time.Now().Add(p.BootWait)
	var last error
	for time.Now().Before(deadline) {
		id, err := p.probe(ctx, h)
		if err == nil && id != old {
			return id, nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("still boot id %s", id)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(p.Poll):
		}
	}
	return "", fmt.Errorf("not back after %v: %w", p.BootWait, last)
}

// probe connects and reads the boot id within Probe. A host that resets
// while a try is under way leaves a connection that never answers and
// never closes (no FIN comes from a machine that is gone): the try is
// abandoned and its connection dropped, and the next one dials anew.
func (p *SSHPair) probe(ctx context.Context, h *sshHost) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Probe)
	defer cancel()
	if err := h.dial(ctx); err != nil {
		return "", err
	}
	id, err := h.bootID(ctx)
	if err != nil {
		h.close()
	}
	return id, err
}

// detached runs cmd in the background a second late, so the SSH session
// ends cleanly first, immune to the hangup when it does. It ignores
// SIGHUP itself rather than use nohup, which busybox builds (the QEMU
// guests') may lack: a missing nohup fails silently into /dev/null.
func detached(cmd string) string {
	return "sh -c 'trap \"\" HUP; sleep 1; " + strings.ReplaceAll(cmd, "'", `'\''`) + "' </dev/null >/dev/null 2>&1 &"
}

// bootCommand starts the host on the kernel at path; the session drops.
func bootCommand(method, path, release string) string {
	switch method {
	case "kexec":
		return fmt.Sprintf("kexec -l %s --reuse-cmdline && (systemctl kexec || kexec -e)", path)
	case "grub-reboot":
		// A one-shot entry: the reboot after that is the default again.
		return fmt.Sprintf(`cp %[1]s /boot/vmlinuz-%[2]s && update-grub >/dev/null 2>&1 &&
sub=$(sed -n "s/^submenu '\([^']*\)'.*/\1/p" /boot/grub/grub.cfg | head -1) &&
entry=$(sed -n "s/^[[:space:]]*menuentry '\([^']*%[2]s\)'.*/\1/p" /boot/grub/grub.cfg | grep -v recovery | head -1) &&
[ -n "$entry" ] && grub-reboot "${sub:+$sub>}$entry" && (systemctl reboot || reboot)`, path, release)
	}
	// "reboot": the boot loader itself picks the copied kernel (PXE, a
	// fixed entry); also what the tests use inside QEMU.
	return "systemctl reboot 2>/dev/null || reboot -f"
}

func (p *SSHPair) boot(ctx context.Context, h *sshHost, path, release string) error {
	old, err := h.bootID(ctx)
	if err != nil {
		return &InfraError{Host: h.role, Op: "ssh", Err: err}
	}
	cmd := bootCommand(h.cfg.Boot, path, release)
	// The connection drops as the host goes down: no error is final here;
	// the boot id says whether it rebooted.
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	h.run(bctx, detached(cmd), nil)
	cancel()
	h.close()
	if _, err := p.waitUp(ctx, h, old); err != nil {
		if ctx.Err() != nil {
			return &InfraError{Host: h.role, Op: "boot", Err: ctx.Err()}
		}
		// The kernel under test did not come up: power-cycle, which
		// returns the host to its default kernel, and blame the kernel.
		if perr := p.powerCycle(ctx, h); perr != nil {
			return perr
		}
		if _, uerr := p.waitUp(ctx, h, old); uerr != nil {
			return &InfraError{Host: h.role, Op: "ssh unreachable after power cycle", Err: uerr}
		}
		return &BootError{Host: h.role, Phase: "boot", Err: err}
	}
	return nil
}

// identity is what a host runs: its release and its kernel's build id.
type identity struct{ release, buildID string }

func (h *sshHost) identity(ctx context.Context) (identity, error) {
	out, err := h.run(ctx, "uname -r; cat /sys/kernel/notes 2>/dev/null | od -An -tx1 -v | tr -d ' \\n' | "+
		`sed -n 's/.*040000001400000003000000474e5500\([0-9a-f]\{40\}\).*/\1/p'`, nil)
	if err != nil {
		return identity{}, err
	}
	lines := strings.Split(strings.TrimSpace(out)+"\n", "\n")
	return identity{strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1])}, nil
}

// verify proves the host runs the artifact: release and build id. The
// kernel under test running as another is its own failure. A trusted
// kernel's build id that is not the one copied is the lab's, as
// verifyBuildIDs decides for the QEMU pair; so is the trusted base beside
// a candidate (Kernel.Peer) running another release, where a kernel
// booted alone on both sides that did not come up is its own.
func (p *SSHPair) verify(ctx context.Context, h *sshHost, k Kernel) error {
	hk := k.On(h.role)
	id, err := h.identity(ctx)
	if err != nil {
		return &InfraError{Host: h.role, Op: "verify", Err: err}
	}
	if id.release != hk.Release {
		wrong := fmt.Errorf("host runs %q, not %q", id.release, hk.Release)
		if k.Peer != nil && k.Trusted(h.role) {
			return &InfraError{Host: h.role, Op: "verify trusted kernel", Err: wrong}
		}
		return &BootError{Host: h.role, Phase: "verify", Err: wrong}
	}
	if hk.BuildID != "" && id.buildID != hk.BuildID {
		wrong := fmt.Errorf("host runs build id %q, not %q", id.buildID, hk.BuildID)
		if k.Trusted(h.role) {
			return &InfraError{Host: h.role, Op: "verify trusted kernel", Err: wrong}
		}
		return &BootError{Host: h.role, Phase: "verify", Err: wrong}
	}
	return nil
}

func (p *SSHPair) putModules(ctx context.Context, h *sshHost, dir string) error {
	pr, pw := io.Pipe()
	go func() {
		cmd := exec.CommandContext(ctx, "tar", "-C", dir, "-cf", "-", "lib/modules")
		cmd.Stdout = pw
		pw.CloseWithError(cmd.Run())
	}()
	_, err := h.run(ctx, "tar -C / -xf - && depmod -a", pr)
	return err
}

// restore reboots each host we changed into its default kernel and checks
// it is the known-good one it ran before (release and build id: a patched
// kernel may well have the same release).
func (p *SSHPair) restore(ctx context.Context, hosts map[string]*sshHost, good map[string]identity) error {
	return p.both(hosts, func(h *sshHost) error {
		want, changed := good[h.role]
		if !changed {
			return nil
		}
		if h.client == nil {
			h.dial(ctx)
		}
		old, _ := h.bootID(ctx)
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		h.run(bctx, detached("systemctl reboot 2>/dev/null || reboot -f"), nil)
		cancel()
		h.close()
		if _, err := p.waitUp(ctx, h, old); err != nil {
			if perr := p.powerCycle(ctx, h); perr != nil {
				return perr
			}
			if _, err := p.waitUp(ctx, h, old); err != nil {
				return &InfraError{Host: h.role, Op: "restore", Err: err}
			}
		}
		id, err := h.identity(ctx)
		if err != nil || id != want {
			return &InfraError{Host: h.role, Op: "restore", Err: fmt.Errorf("runs %+v (%v), want known-good %+v", id, err, want)}
		}
		return nil
	})
}

// env is labtest.sh's environment on host h; timer is who takes the
// times (RB_TIMER: "server" when the client runs the kernel under test);
// data says h holds the transfer test's file.
func (p *SSHPair) env(h *sshHost, peer SSHHostConfig, t Test, timer string, data bool) string {
	// Netem is validated to words of [A-Za-z0-9.%]: double quotes hold it.
	e := fmt.Sprintf("RB_IP=%s RB_PEER=%s RB_DEV=%s RB_RDMA=%s RB_PROTO=%s RB_VERS=%s RB_TEST=%s RB_MB=%d RB_ITERS=%d RB_HUNG=%d RB_NETEM=\"%s\" RB_TIMER=%s",
		h.cfg.TestIP, peer.TestIP, h.cfg.Netdev, t.RDMA, t.Transport, t.NFSVersion, t.Kind, t.SizeMiB, t.Iterations, t.HungTaskSecs, t.Netem, timer)
	if data {
		e += " RB_DATA=" + remoteData
	}
	if p.crash != "" {
		e += " RB_CRASH=" + p.crash
	}
	return e
}

const (
	remoteScript = "/tmp/rdmabot-labtest.sh"
	// remoteData is the transfer test's file, fresh for each boot, on
	// the hosts that hold it (holdsData): a trusted server checks what
	// the client wrote and read back against it.
	remoteData = "/tmp/rdmabot-data"
)

// test runs the transfer test: server up, client loop, server down. The
// server waits for the client's word as in the QEMU guests, checks the
// files it wrote and, with the kernel under test on the client, takes
// the times.
func (p *SSHPair) test(ctx context.Context, hosts map[string]*sshHost, k Kernel, t Test) (*Result, error) {
	srv, cli := hosts["server"], hosts["client"]
	timer := "client"
	if !k.Trusted("client") {
		timer = "server"
	}
	data, err := putTest(ctx, []*sshHost{srv, cli}, k, t)
	if err != nil {
		return nil, err
	}
	// Each step has a deadline: a hung NFS mount must not hold the pair.
	stepCtx := func(sctx context.Context, h *sshHost, peer SSHHostConfig, fns string) (time.Time, error) {
		out, err := h.run(sctx, fmt.Sprintf("%s sh -c '. %s; %s'", p.env(h, peer, t, timer, data != nil && holdsData(k, h.role)), remoteScript, fns), nil)
		h.out.WriteString(out)
		return time.Now(), err
	}
	step := func(h *sshHost, peer SSHHostConfig, fns string, limit time.Duration) (time.Time, error) {
		sctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		return stepCtx(sctx, h, peer, fns)
	}
	t0 := time.Now()
	tServer, serr := step(srv, cli.cfg, "rdma_up && server_up", 5*time.Minute)
	if serr != nil {
		if msg, ok := netemFailed(srv.out.String()); ok {
			return nil, netemError("server", msg)
		}
		return nil, &BootError{Host: "server", Phase: "rdma", Err: serr, Console: tail(srv.out.String(), 40)}
	}
	testLimit := 5*time.Minute + time.Duration(t.Iterations)*(time.Minute+time.Duration(t.SizeMiB)*time.Second)
	waited := make(chan struct{})
	wctx, stopWait := context.WithTimeout(ctx, testLimit+2*time.Minute)
	defer stopWait()
	go func() {
		defer close(waited)
		stepCtx(wctx, srv, cli.cfg, "server_wait")
	}()
	tClient, cerr := step(cli, srv.cfg, "rdma_up && client_run", testLimit)
	// A client that never said it was done (it crashed, or was cut off)
	// must not keep the server waiting: say so for it. One that did has
	// closed the server's listener, and this finds no one. The server's
	// checks then read each file twice; a server that does not end them
	// in time (it crashed) is cut off.
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	srv.run(pctx, "echo lost | nc -w 2 127.0.0.1 7777", nil)
	cancel()
	select {
	case <-waited:
	case <-time.After(time.Minute + time.Duration(t.Iterations*t.SizeMiB)*time.Second):
		stopWait()
		<-waited
	}
	step(srv, cli.cfg, "server_down", time.Minute)

	res := &Result{Pair: p.cfg.Name, Mode: "ssh", Kernel: k, Test: t}
	for _, h := range []*sshHost{srv, cli} {
		dmesg, _ := h.run(ctx, "dmesg", nil)
		crashes, _ := console.Scan(strings.NewReader(dmesg))
		hk := k.On(h.role)
		host := Host{Role: h.role, Release: hk.Release, BuildID: hk.BuildID, Console: h.out.String(), Dmesg: dmesg, Crashes: crashes, Status: "ok"}
		if h == srv {
			res.Server = host
		} else {
			res.Client = host
		}
	}
	m, err := readMarkers(res, timer)
	var boot *BootError
	switch {
	case errors.As(err, &boot):
		return res, err
	case err != nil:
		return nil, err
	}
	res.Health = healthOf(res.Client.Console, res.Server.Console, timer == "client")
	res.LoopSecs = loopSecs(timer == "client", m.summary, m.sloop)
	// Over SSH the client's RDMA bring-up and mount are part of its step.
	res.Phases = Phases{RDMAUp: tServer.Sub(t0).Seconds(), Test: tClient.Sub(tServer).Seconds()}
	res.Failure = m.failure(res, cerr, timer == "server")
	res.Passed = res.Failure == ""
	if t.Kind == "transfer" {
		res.Corrupt = m.checks.corrupt(res.Iterations)
	}
	return res, nil
}

// putTest copies the test script to the hosts, and this boot's data
// (fresh) to those that hold it (holdsData); a host not given it has
// none (an earlier boot's copy is removed). data is nil for a test
// without data.
func putTest(ctx context.Context, hosts []*sshHost, k Kernel, t Test) (data []byte, err error) {
	if t.Kind == "transfer" {
		if data, err = newTestData(dataMiB(k, t)); err != nil {
			return nil, &InfraError{Op: "test data", Err: err}
		}
	}
	for _, h := range hosts {
		if err := h.put(ctx, remoteScript, labtestScript, 0o644); err != nil {
			return nil, &InfraError{Host: h.role, Op: "copy test", Err: err}
		}
		if data == nil || !holdsData(k, h.role) {
			if _, err := h.run(ctx, "rm -f "+remoteData, nil); err != nil {
				return nil, &InfraError{Host: h.role, Op: "remove test data", Err: err}
			}
			continue
		}
		if err := h.put(ctx, remoteData, data, 0o644); err != nil {
			return nil, &InfraError{Host: h.role, Op: "copy test data", Err: err}
		}
	}
	return data, nil
}

// sshMarkers is what the hosts' sessions said of the test.
type sshMarkers struct {
	summary, lastResult, srvio, sloop, drive marker
	driveSeen                                bool
	srvioSeen                                bool
	invalidDone                              bool
	checks                                   serverChecks
}

// readMarkers reads both hosts' sessions into res (the iterations from the
// side that takes the times, the transport, the mount) and returns what
// judges them.
func readMarkers(res *Result, timer string) (*sshMarkers, error) {
	m := &sshMarkers{checks: newServerChecks()}
	clientCmp := map[int]string{}
	proto := map[string]*protocol{"server": newProtocol("server"), "client": newProtocol("client")}
	for role, c := range map[string]string{"server": res.Server.Console, "client": res.Client.Console} {
		for _, l := range strings.Split(c, "\n") {
			if mk, ok := parseMarker(l); ok && !proto[role].accept(mk) {
				return nil, protocolError(res.Kernel, role, proto[role].violation, tail(c, 40))
			}
		}
	}
	for _, l := range strings.Split(res.Server.Console, "\n") {
		mk, ok := parseMarker(l)
		switch {
		case !ok:
		case mk.Event == "STIME" && timer == "server":
			res.Iterations = append(res.Iterations, iterationOf(mk))
		case mk.Event == "SRVCMP":
			m.checks.note(mk)
		case mk.Event == "SRVIO":
			m.srvio, m.srvioSeen = mk, true
		case mk.Event == "SLOOP":
			m.sloop = mk
		case mk.Event == "DRIVE_FAIL":
			m.drive, m.driveSeen = mk, true
		case mk.Event == "CLIENT_DONE":
			m.invalidDone = mk.Args["msg"] == "invalid"
		}
	}
	for _, l := range strings.Split(res.Client.Console, "\n") {
		mk, ok := parseMarker(l)
		if !ok {
			continue
		}
		switch mk.Event {
		case "RESULT", "FIO":
			m.lastResult = mk
			clientCmp[mk.int("iter")] = mk.Args["cmp"]
			if timer == "client" {
				res.Iterations = append(res.Iterations, iterationOf(mk))
			}
		case "TRANSPORT":
			res.Transport = mk.Args["xprt"]
		case "MOUNTED":
			res.MountOpts = mk.Args["opts"]
		case "SUMMARY":
			m.summary = mk
		case "NETEM_FAIL":
			return nil, netemError("client", mk.Args["msg"])
		case "RDMA_FAIL":
			return nil, &BootError{Host: "client", Phase: "rdma", Err: fmt.Errorf("%v", mk.Args), Console: tail(res.Client.Console, 40)}
		}
	}
	if timer == "server" {
		for i := range res.Iterations {
			res.Iterations[i].Cmp = clientCmp[res.Iterations[i].N]
		}
	}
	return m, nil
}

// failure is why the test did not pass, "" if it did; cerr is how the
// client's session ended.
func (m *sshMarkers) failure(res *Result, cerr error, clientUntrusted bool) string {
	t := res.Test
	switch c := res.Crash(); {
	case c != nil && c.Fatal:
		return c.Title
	case cerr != nil && m.summary.Event == "":
		return "client test failed: " + cerr.Error()
	case res.Transport != t.Transport:
		return fmt.Sprintf("transport is %q, not %q", res.Transport, t.Transport)
	case m.driveSeen:
		return driveFailure(m.drive)
	case m.invalidDone:
		return errInvalidDone
	case len(res.Iterations) != t.Iterations:
		return fmt.Sprintf("%d of %d iterations ran", len(res.Iterations), t.Iterations)
	}
	if clientUntrusted {
		if why := unbacked(t, m.srvio, m.srvioSeen, m.lastResult); why != "" {
			return why
		}
	}
	for _, it := range res.Iterations {
		if t.Kind != "transfer" {
			break
		}
		if why := m.checks.failure(it, clientUntrusted); why != "" {
			return why
		}
	}
	if m.summary.Args["ok"] != "1" {
		return "client test failed"
	}
	return ""
}

func iterationOf(m marker) Iteration {
	if m.Event == "FIO" {
		return Iteration{N: m.int("iter"), ReadMBps: m.float("read_MBps"), ReadSecs: m.float("read_s")}
	}
	return Iteration{
		N: m.int("iter"), WriteMBps: m.float("write_MBps"), ReadMBps: m.float("read_MBps"),
		WriteSecs: m.float("write_s"), ReadSecs: m.float("read_s"), GenSecs: m.float("gen_s"), Cmp: m.Args["cmp"],
	}
}
