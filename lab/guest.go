package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rdmabot/rdmabot/internal/bwrap"
	"github.com/rdmabot/rdmabot/internal/cgroup"
)

// guestSpec is one QEMU guest of a pair.
type guestSpec struct {
	role    string
	binary  string
	kernel  string
	initrd  string
	cmdline string
	memMiB  int
	icount  string
	netdev  string // the -netdev of the test link
	mac     string
	extra   []string // more QEMU arguments (the SSH test's forward)
	// reboot lets a guest reboot instead of ending QEMU (the SSH
	// driver's tests reboot guests as it reboots real hosts).
	reboot bool
}

func (s guestSpec) args() []string {
	a := []string{
		"-name", "rdmabot-" + s.role,
		"-accel", "tcg", "-M", "pc", "-cpu", "max", "-smp", "1", "-m", strconv.Itoa(s.memMiB),
		"-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none",
		// mon: lets the host send a break (Ctrl-A b on QEMU's stdin) for
		// SysRq; the guest cannot reach the monitor (blocked.go).
		"-serial", "mon:stdio",
		// QEMU's seccomp filter: the process a guest would own, should it
		// escape, can start no program, gain no privilege and use no
		// obsolete or resource-control system call.
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-kernel", s.kernel, "-initrd", s.initrd, "-append", s.cmdline,
		"-netdev", s.netdev, "-device", "virtio-net-pci,netdev=n0,mac=" + s.mac,
	}
	if !s.reboot {
		// A panic (panic=-1) or a reboot ends QEMU instead of booting again.
		a = append(a, "-no-reboot")
	}
	if s.icount != "" {
		a = append(a, "-icount", s.icount)
	}
	return append(a, s.extra...)
}

// consoleEvent is a console line, or the end of a guest (exited set).
type consoleEvent struct {
	role   string
	text   string
	at     time.Time
	exited bool
	err    error // the process's exit error, with exited
}

// guest is a running QEMU process in its own process group.
type guest struct {
	role   string
	cmd    *exec.Cmd
	stderr *tailBuffer
	// stdin is QEMU's: the serial console's input and its mux's escapes.
	stdin  io.WriteCloser
	killed bool // we signalled it
	done   bool // its exit event was seen
}

// The paths a confined QEMU sees its kernel and initramfs at.
const (
	guestKernel = "/guest/bzImage"
	guestInitrd = "/guest/initrd"
)

// qemuOverheadMiB is what QEMU itself may use beyond its guest's memory
// (the translation cache, device state) before its cgroup stops it.
const qemuOverheadMiB = 1536

// command is the guest's QEMU, confined the way a build is: should the
// kernel under test break out of its guest, the QEMU process it would
// own runs under bwrap (it sees the system read-only, its kernel and
// initramfs, the host's loopback for its link, and nothing of the bot:
// no database, keys, token or other tests' files), with an empty
// environment, and in a cgroup of its own bounding its memory (the
// guest's and qemuOverheadMiB), tasks and CPUs. The cgroup is nil where
// the bot may make none (serve says so at start).
func (s guestSpec) command(bwrapBin string) (*exec.Cmd, *cgroup.Group, error) {
	// The binary by its path: bwrap binds and runs paths, not names.
	bin, err := exec.LookPath(s.binary)
	if err != nil {
		return nil, nil, err
	}
	if s.binary, err = filepath.Abs(bin); err != nil {
		return nil, nil, err
	}
	inner := s
	inner.kernel, inner.initrd = guestKernel, guestInitrd
	bw := []string{"--unshare-all", "--share-net", "--die-with-parent", "--cap-drop", "ALL", "--clearenv"}
	bw = append(bw, bwrap.SystemArgs()...)
	bw = append(bw, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind", s.kernel, guestKernel, "--ro-bind", s.initrd, guestInitrd)
	if !strings.HasPrefix(s.binary, "/usr/") {
		bw = append(bw, "--ro-bind", s.binary, s.binary)
	}
	bw = append(bw, "--", s.binary)
	bw = append(bw, inner.args()...)
	cg := cgroup.New("rdmabot-qemu", cgroup.Limits{Memory: int64(s.memMiB+qemuOverheadMiB) << 20, Tasks: 256, CPUs: 2})
	join := ""
	if cg != nil {
		join = cg.Join()
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", join + `exec "$@"`, "sh", bwrapBin}, bw...)...)
	cmd.Env = []string{}
	return cmd, cg, nil
}

// startGuest starts QEMU, confined (see command), and streams its
// console to events. The process leads its own group so a kill reaches
// anything it started, and the kernel kills it should this process die
// first.
func startGuest(spec guestSpec, bwrapBin string, events chan<- consoleEvent) (*guest, error) {
	cmd, cg, err := spec.command(bwrapBin)
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	g := &guest{role: spec.role, cmd: cmd, stdin: in, stderr: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = g.stderr
	if err := cmd.Start(); err != nil {
		if cg != nil {
			cg.Remove()
		}
		return nil, err
	}
	go func() {
		readConsole(out, func(line string) {
			events <- consoleEvent{role: spec.role, text: line, at: time.Now()}
		})
		err := cmd.Wait()
		if cg != nil {
			if n := cg.OOMs(); n > 0 && err != nil {
				err = fmt.Errorf("%w: its cgroup's memory limit (%d MiB) killed it", err, spec.memMiB+qemuOverheadMiB)
			}
			cg.Remove()
		}
		events <- consoleEvent{role: spec.role, at: time.Now(), exited: true, err: err}
	}()
	return g, nil
}

// maxConsoleLine is the longest console line kept whole; the rest of a
// longer one is dropped, and the lines after it are read as ever.
const maxConsoleLine = 64 << 10

// readConsole calls line for each line of a guest's console until it
// ends. A kernel under test may print a line of any length: one longer
// than maxConsoleLine is cut there (saying so), never the end of what
// is read, so a crash printed after it is still seen.
func readConsole(r io.Reader, line func(string)) {
	br := bufio.NewReaderSize(r, maxConsoleLine)
	for {
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			line(strings.TrimRight(string(b), "\r") + " [rdmabot: line cut at 64 KiB]")
			// Skip to the end of the over-long line.
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			if err != nil {
				return
			}
			continue
		}
		if len(b) > 0 {
			line(strings.TrimRight(strings.TrimSuffix(string(b), "\n"), "\r"))
		}
		if err != nil {
			return
		}
	}
}

// signal sends sig to the guest's process group.
func (g *guest) signal(sig syscall.Signal) {
	if g.cmd.Process == nil || g.done {
		return
	}
	g.killed = true
	syscall.Kill(-g.cmd.Process.Pid, sig)
}

// tailBuffer keeps the last max bytes written (all when max is 0), for
// writers in other goroutines: QEMU's stderr, an SSH session's output.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if t.max > 0 && len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.TrimSpace(t.text()) }

// text is what the buffer keeps, as written.
func (t *tailBuffer) text() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before QEMU binds it; callers retry on "Address already in use".
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// listeningBy reports whether process pid, or one it started (QEMU runs
// under sh and bwrap), LISTENs on 127.0.0.1:port, from /proc/net/tcp and
// the processes' descriptors. Connecting to find out is not an option:
// QEMU's socket netdev would take the probe for its peer. Checking the
// owner matters when someone else holds the port.
func listeningBy(pid, port int) (bool, error) {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false, err
	}
	want := fmt.Sprintf("0100007F:%04X", port)
	inodes := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		// sl local_address rem_address st ... uid timeout inode; st 0A is LISTEN.
		if len(f) > 9 && f[1] == want && f[3] == "0A" {
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return false, nil
	}
	for _, p := range family(pid) {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
		if err != nil {
			continue // exited; its exit event follows
		}
		for _, fd := range fds {
			link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p, fd.Name()))
			if err == nil && inodes[link] {
				return true, nil
			}
		}
	}
	return false, nil
}

// family is pid and every process under it, from /proc.
func family(pid int) []int {
	children := map[int][]int{}
	procs, _ := os.ReadDir("/proc")
	for _, d := range procs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// waitListening polls until the port listens, the guest exits (its exit
// event is returned, for the caller to handle) or the timeout passes.
func waitListening(ctx context.Context, pid, port int, events <-chan consoleEvent, early *[]consoleEvent, timeout time.Duration) (exited *consoleEvent, err error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := listeningBy(pid, port)
		if err != nil {
			return nil, err
		}
		if ok {
			return nil, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("port %d not listening after %v", port, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev := <-events:
			*early = append(*early, ev)
			if ev.exited {
				return &ev, nil
			}
		case <-tick.C:
		}
	}
}
