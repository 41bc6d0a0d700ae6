package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lab/symbolize"
)

// Runner is the lab as the bot uses it (bot.Lab): n boots of a kernel on
// a named pair, one sample per boot with the per-iteration figures kept
// for the statistics; its profiles (Lossy, Pressure, Debug) boot through
// it.
type Runner struct {
	Cfg  Config
	Dirs Dirs
	Test Test
	Log  *slog.Logger
	// Consoles keeps each boot's guest consoles (nil: they are not
	// kept, as in the A/A runner); a sample names them.
	Consoles ConsoleKeeper
	// BuildDirs are the directories kernels are built in (the builder's
	// sandbox paths): a crash's frames are decoded against them.
	BuildDirs []string

	mu sync.Mutex
	// Pairs are made on first use (lab.NewPair); a test may preset one.
	Pairs map[string]Pair
}

func (l *Runner) pair(ctx context.Context, name string) (Pair, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.Pairs[name]; ok {
		return p, nil
	}
	p, err := NewPair(ctx, l.Cfg, l.Dirs, name, l.Log)
	if err != nil {
		return nil, err
	}
	if l.Pairs == nil {
		l.Pairs = map[string]Pair{}
	}
	l.Pairs[name] = p
	return p, nil
}

// ConsoleKeeper keeps a console and names it (store.Store).
type ConsoleKeeper interface {
	PutConsole(ctx context.Context, text string) (string, error)
}

// Run boots the kernel in dir n times, or until a boot crashes. A
// *BootError is returned as it is (the kernel's fault); every other error
// is the lab's.
func (l *Runner) Run(ctx context.Context, pairName string, boot flow.Boot, n int, trace io.Writer) ([]flow.Sample, error) {
	return l.RunTest(ctx, pairName, boot, n, l.Test, trace)
}

// kernelIn is the lab's view of one kernel directory.
func kernelIn(dir string) Kernel {
	k := Kernel{BzImage: filepath.Join(dir, "bzImage")}
	if st, err := os.Stat(filepath.Join(dir, "modules")); err == nil && st.IsDir() {
		k.Modules = filepath.Join(dir, "modules")
	}
	return k
}

// RunTest is Run with another test than the configured one (a shaped
// link: the power bench's seeded slowdown).
func (l *Runner) RunTest(ctx context.Context, pairName string, boot flow.Boot, n int, test Test, trace io.Writer) ([]flow.Sample, error) {
	p, err := l.pair(ctx, pairName)
	if err != nil {
		return nil, flow.MarkInfra(err)
	}
	k := kernelIn(boot.Dir)
	if boot.Trusted != "" {
		peer := kernelIn(boot.Trusted)
		k.Peer, k.Side = &peer, boot.Side
	}
	var out []flow.Sample
	for i := range n {
		res, err := p.Run(ctx, k, test)
		if err != nil {
			var be *BootError
			if errors.As(err, &be) && !flow.IsInfra(err) {
				return nil, err
			}
			return nil, flow.MarkInfra(err)
		}
		f := res.Figures()
		s := flow.Sample{Metrics: f.Means, Iterations: f.PerIteration,
			HostOtherCores: res.HostOtherCores, GuestCPUWait: res.GuestCPUWait, BusyRepeated: res.Busy,
			QuietWait: res.QuietWait,
			Health:    res.Health.Counters(),
			Tests:     res.Tests, ServerOps: res.ServerOps}
		if l.Consoles != nil {
			for _, h := range []Host{res.Server, res.Client} {
				if h.Console == "" {
					continue
				}
				id, err := l.Consoles.PutConsole(ctx, h.Console)
				if err != nil {
					return nil, flow.MarkInfra(err)
				}
				if s.Consoles == nil {
					s.Consoles = map[string]string{}
				}
				s.Consoles[h.Role] = id
			}
		}
		// A stall's blocked tasks, each side's decoded with its kernel.
		stall := res.StallLog(func(role, text string) string {
			return decodeFrames(ctx, text, boot.KernelOn(role), l.BuildDirs, trace)
		})
		if c, on := res.CrashOn(); c != nil {
			s.Crash = c.Title
			s.Log = joinParts(decodeFrames(ctx, c.Report, boot.KernelOn(on), l.BuildDirs, trace), stall)
		} else if res.Corrupt != "" {
			s.Corrupt = res.Corrupt
		} else if !res.Passed {
			s.Crash, s.Log, s.Stall = res.Failure, stall, res.Stalled
		}
		which := "boot"
		if n > 1 {
			which = fmt.Sprintf("boot %d/%d", i+1, n)
		}
		if res.QuietWait >= 2 {
			fmt.Fprintf(trace, "%s on %s: waited %.0f s for other programs to leave the host's CPUs first\n", which, res.Pair, res.QuietWait)
		}
		for _, c := range res.Busy {
			fmt.Fprintf(trace, "%s on %s: booted again: its guests waited for a CPU %.2f on average (limit %.2f), so it was not measured\n",
				which, res.Pair, c, l.Cfg.QEMU.BusyGuestWait)
		}
		if test.Fstests != nil {
			fmt.Fprintf(trace, "%s on %s (%s): fstests on %s, NFS %s: %s; the server answered %d RPCs, host busy %.2f cores%s %s\n",
				which, res.Pair, res.Mode, test.RDMA, test.NFSVersion, fstestsTrace(res.Tests), res.ServerOps, res.HostOtherCores, healthTrace(res.Health), s.Crash)
		} else if test.Load != nil {
			h := res.Health
			fmt.Fprintf(trace, "%s on %s (%s): pressure on %s, NFS %s: read %.1f MB/s, write %.1f MB/s, %d Write chunk segments, %d Read chunks, %d server Send Queue waits, host busy %.2f cores%s %s\n",
				which, res.Pair, res.Mode, test.RDMA, test.NFSVersion, s.Metrics["read_MBps"], s.Metrics["write_MBps"], h.WriteChunks, h.ReadChunks, h.SQStarve, res.HostOtherCores, healthTrace(h), s.Crash)
		} else {
			fmt.Fprintf(trace, "%s on %s (%s): copy %.2f MB/s (write %.1f, read %.1f), loop %.2f s, host busy %.2f cores, guests waited for a CPU %.2f%s %s\n", which, res.Pair, res.Mode,
				s.Metrics["copy_MBps"], s.Metrics["write_MBps"], s.Metrics["read_MBps"], s.Metrics["loop_s"], res.HostOtherCores, res.GuestCPUWait, healthTrace(res.Health), s.Crash)
		}
		out = append(out, s)
		if s.Crash != "" && i+1 < n {
			// A crash decides the verdict before any metric does; more
			// boots would only crash again, slowly.
			fmt.Fprintf(trace, "stopping after boot %d/%d: the kernel crashed\n", i+1, n)
			break
		}
	}
	return out, nil
}

// decodeFrames is report with its frames' source lines, when the kernel
// in dir was built with line tables (the store kept its vmlinux: the
// debug profile's kernels); report as it is otherwise, or when they
// cannot be read (said in trace).
func decodeFrames(ctx context.Context, report, dir string, buildDirs []string, trace io.Writer) string {
	vmlinux := filepath.Join(dir, "vmlinux")
	if _, err := os.Stat(vmlinux); err != nil {
		return report
	}
	tab, err := symbolize.Open(vmlinux, buildDirs...)
	if err != nil {
		fmt.Fprintf(trace, "the crash's frames are not decoded: %v\n", err)
		return report
	}
	out, err := tab.Decode(ctx, report)
	if err != nil {
		fmt.Fprintf(trace, "decoding the crash's frames: %v\n", err)
	}
	return out
}

// healthTrace is a boot's transport counts for the test's trace, when
// any is not zero.
func healthTrace(h Health) string {
	if !h.Reported {
		return ", no transport counts"
	}
	if h.Faults() == 0 {
		return ""
	}
	return fmt.Sprintf(", transport: %d retransmissions, %d timeouts, %d reconnects, %d bad xids, %d bad replies, %d server bad calls, %d Sends refused for a full Send Queue, %d completions lost to a full CQ",
		h.Retrans, h.Timeouts, h.Reconnects, h.BadXIDs, h.BadReplies, h.ServerBadCalls, h.SQFull, h.CQFull)
}

// CandidateSide implements bot.Lab: the side the series' changed code
// runs on (CandidateSide), from the files its patches change.
func (l *Runner) CandidateSide(s flow.Series) string { return SideOf(s.Changes) }

// SideOf is the side a series' kernel boots on (CandidateSide), from
// what its patches change.
func SideOf(changes []flow.Change) string {
	seen := map[string]bool{}
	var files []string
	for _, c := range changes {
		if !c.Context && !seen[c.File] {
			seen[c.File] = true
			files = append(files, c.File)
		}
	}
	return CandidateSide(files)
}
