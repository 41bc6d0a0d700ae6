package kbuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmabot/rdmabot/internal/bwrap"
	"github.com/rdmabot/rdmabot/internal/cgroup"
)

// BuildDirs are the directories a kernel's build runs in, inside the
// sandbox, as its line tables name its source files: make's srctree is
// relative to the output directory ("../src"), generated files are in
// the output directory.
func BuildDirs() []string { return []string{"../src", sandboxSrc, sandboxOut} }

// Inside the sandbox every slot's checkout, output and cache appear at
// the same paths, so compiler command lines are identical across slots:
// ccache hits survive a change of slot, and the build does not record
// where on the host it ran.
const (
	sandboxRoot   = "/kbuild"
	sandboxSrc    = sandboxRoot + "/src"
	sandboxOut    = sandboxRoot + "/out"
	sandboxCCache = sandboxRoot + "/ccache"
	// ccache's only configuration file: a host file, read-only inside,
	// so no build can leave settings (prefix_command ...) for the next.
	sandboxCCacheConf = sandboxRoot + "/ccache.conf"
	// A writable directory of the build's own, for ccache's statistics
	// log when the cache itself is read-only.
	sandboxStats = sandboxRoot + "/stats"
)

// Sandbox runs commands under bubblewrap: no network, the source
// read-only, only the output directory and the ccache directory writable,
// a clean environment, a minimal /proc and /dev, and nothing left running
// when the caller goes away.
type Sandbox struct {
	Bwrap  string // path of bwrap
	Src    string // host directory mounted read-only at /kbuild/src
	Out    string // host directory mounted read-write at /kbuild/out
	CCache string // host directory mounted at /kbuild/ccache; "" for none
	// CCacheRO mounts CCache read-only: an untrusted build uses the
	// trusted builds' cache but cannot add to it.
	CCacheRO   bool
	CCacheConf string // host file mounted read-only at /kbuild/ccache.conf; "" for none
	Stats      string // host directory mounted read-write at /kbuild/stats; "" for none
	Env        []string
	// Limits, when set, bound the run: a cgroup (memory, tasks, CPU
	// where this machine lets the bot make one), a sized /tmp and a
	// file size limit.
	Limits *Limits
}

// OOMError is a run in which the memory limit killed a process.
type OOMError struct {
	Limit int64
	Err   error // the run's error (*exec.ExitError)
}

func (e *OOMError) Error() string {
	return fmt.Sprintf("out of memory (limit %d MiB): %v", e.Limit>>20, e.Err)
}
func (e *OOMError) Unwrap() error { return e.Err }

// args is the bwrap command line that runs argv.
func (s *Sandbox) args(argv []string) []string {
	a := []string{
		"--unshare-all", // network, pid, ipc, uts, cgroup, user
		"--die-with-parent",
		"--new-session",
		"--cap-drop", "ALL",
	}
	a = append(a, bwrap.SystemArgs()...)
	a = append(a,
		"--proc", "/proc",
		"--dev", "/dev",
	)
	if s.Limits != nil && s.Limits.Tmp > 0 {
		a = append(a, "--size", strconv.FormatInt(s.Limits.Tmp, 10))
	}
	a = append(a,
		"--tmpfs", "/tmp",
		"--ro-bind", s.Src, sandboxSrc,
		"--bind", s.Out, sandboxOut,
	)
	if s.CCache != "" {
		bind := "--bind"
		if s.CCacheRO {
			bind = "--ro-bind"
		}
		a = append(a, bind, s.CCache, sandboxCCache)
	}
	if s.CCacheConf != "" {
		a = append(a, "--ro-bind", s.CCacheConf, sandboxCCacheConf)
	}
	if s.Stats != "" {
		a = append(a, "--bind", s.Stats, sandboxStats)
	}
	a = append(a, "--chdir", sandboxOut, "--")
	return append(a, argv...)
}

// Run runs argv in the sandbox with output to w. Cancelling ctx kills the
// whole sandbox: bwrap's process group is killed, and with it the pid
// namespace's init and everything under it. A non-zero exit comes back
// as *exec.ExitError; a sandbox that could not start as *InfraError.
func (s *Sandbox) Run(ctx context.Context, w io.Writer, argv ...string) error {
	cmd := exec.CommandContext(ctx, s.Bwrap, s.args(argv)...)
	var cg *cgroup.Group
	if s.Limits != nil {
		// A shell joins the cgroup and sets the file size limit, then
		// becomes bwrap: everything the build starts is inside from the
		// first instruction.
		var script strings.Builder
		if s.Limits.FileSize > 0 {
			fmt.Fprintf(&script, "ulimit -f %d; ", s.Limits.FileSize/512) // 512-byte blocks in POSIX sh
		}
		if cg = cgroup.New("rdmabot-kbuild", s.Limits.cgroupLimits()); cg != nil {
			defer cg.Remove()
			script.WriteString(cg.Join())
		}
		script.WriteString(`exec "$@"`)
		cmd = exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script.String(), "sh", s.Bwrap}, s.args(argv)...)...)
	}
	cmd.Env = s.Env
	cmd.Stdin = nil
	cmd.Stdout = w
	cmd.Stderr = w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return &InfraError{Op: "sandbox", Err: fmt.Errorf("%s killed: %w", filepath.Base(argv[0]), context.Cause(ctx))}
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return &InfraError{Op: "sandbox", Err: err}
	}
	if err != nil && cg != nil && cg.OOMs() > 0 {
		return &OOMError{Limit: s.Limits.Memory, Err: err}
	}
	return err
}

// Check runs `true` in the sandbox: bwrap missing, or user namespaces
// disabled, show up here as an infrastructure error and not as a failed
// kernel build.
func (s *Sandbox) Check(ctx context.Context) error {
	var out limitedBuffer
	if err := s.Run(ctx, &out, "true"); err != nil {
		return &InfraError{Op: "sandbox", Err: fmt.Errorf("bwrap cannot start: %v: %s", err, out.String())}
	}
	return nil
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if n := 4096 - len(l.b); n > 0 {
		l.b = append(l.b, p[:min(n, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
