package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

func TestHostBusyReadsProgramTime(t *testing.T) {
	stat := []byte("cpu  1000 20 300 9000 50 7 8 40 0 0\ncpu0 500 10 150 4500 25 3 4 20 0 0\nintr 1\n")
	got, err := hostBusy(stat)
	if err != nil {
		t.Fatal(err)
	}
	// user+nice+system+steal = 1360 ticks of 10 ms; idle, iowait, irq
	// and softirq are not programs.
	if want := 13600 * time.Millisecond; got != want {
		t.Fatalf("busy %v, want %v", got, want)
	}
	for _, bad := range []string{"intr 1\n", "cpu  a b c d e f g h i j\n"} {
		if _, err := hostBusy([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A program spinning on the host while a boot is measured is seen as
// about a core of other programs; counted as the pair's own, it is not.
func TestHostMeterSeesABusyProgram(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat")
	}
	m := startHostMeter(procStat, time.Now)
	spin := exec.Command("sh", "-c", "while :; do :; done")
	spin.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	syscall.Kill(-spin.Process.Pid, syscall.SIGKILL)
	spin.Wait()
	own := spin.ProcessState.UserTime() + spin.ProcessState.SystemTime()
	other := m.otherCores(0)
	// The spinner gets at least half a core even on a two-core host
	// whose other core is taken.
	if other < 0.4 {
		t.Fatalf("other programs %.2f cores while one spun (it used %v)", other, own)
	}
	if mine := m.otherCores(own); mine > other-0.3 {
		t.Fatalf("the spinner counted as the pair's own still leaves %.2f cores of %.2f", mine, other)
	}
	bad := startHostMeter(func() ([]byte, error) { return nil, errors.New("no proc") }, time.Now)
	if c := bad.otherCores(0); c != -1 {
		t.Fatalf("unreadable host: %.2f, want -1 (unknown)", c)
	}
}

// Boots measured under contention are set aside and booted again; a host
// that stays busy is the lab's fault; a crash seen under contention is
// not the kernel's evidence either.
func TestRepeatWhileBusy(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := QEMUConfig{BusyGuestWait: 0.55, BusyRepeats: 2}
	boots := func(cores ...float64) (func() (*Result, error), *int) {
		n := 0
		return func() (*Result, error) {
			c := cores[n]
			n++
			if c == 9 { // a starved guest's stall
				return &Result{GuestCPUWait: c, QuietWait: 7}, &BootError{Host: "client", Phase: "rdma"}
			}
			return &Result{GuestCPUWait: c, Passed: true, QuietWait: 7}, nil
		}, &n
	}
	ctx := context.Background()

	boot, n := boots(0.9, 9, 0.1)
	res, err := repeatWhileBusy(ctx, cfg, log, false, boot)
	if err != nil || *n != 3 || len(res.Busy) != 2 || res.Busy[0] != 0.9 || res.GuestCPUWait != 0.1 {
		t.Fatalf("busy, busy with a boot error, calm: %d boots, %+v, %v", *n, res, err)
	}
	if res.QuietWait != 3*7 {
		t.Fatalf("waited for a quiet host %.0f s over 3 boots of 7 s each, want the sum 21", res.QuietWait)
	}

	boot, n = boots(0.9, 0.8, 0.7, 0.1)
	_, err = repeatWhileBusy(ctx, cfg, log, false, boot)
	if !flow.IsInfra(err) || *n != 3 || !strings.Contains(err.Error(), "0.90, 0.80, 0.70 on average during 3 boots") {
		t.Fatalf("always busy: %d boots, %v", *n, err)
	}

	boot, n = boots(-1)
	if res, err := repeatWhileBusy(ctx, cfg, log, false, boot); err != nil || *n != 1 || len(res.Busy) != 0 {
		t.Fatalf("an unknown host load is taken as it is: %d boots, %v", *n, err)
	}

	off := cfg
	off.BusyGuestWait = 0
	boot, n = boots(0.9)
	if res, err := repeatWhileBusy(ctx, off, log, false, boot); err != nil || *n != 1 || res.GuestCPUWait != 0.9 {
		t.Fatalf("off: %d boots, %v", *n, err)
	}

	// Under the pressure test the guests load the host themselves: their
	// wait and their traffic's host-side work are the load's, and no boot
	// of it is set aside.
	selfBoots := func(other ...float64) (func() (*Result, error), *int) {
		n := 0
		return func() (*Result, error) {
			c := other[n]
			n++
			return &Result{GuestCPUWait: 0.67, HostOtherCores: c, Passed: true}, nil
		}, &n
	}
	boot, n = selfBoots(0.79)
	if res, err := repeatWhileBusy(ctx, cfg, log, true, boot); err != nil || *n != 1 || len(res.Busy) != 0 {
		t.Fatalf("self-loaded: %d boots, %v", *n, err)
	}
	boot, n = selfBoots(0.79, 0.79, 0.79)
	if _, err := repeatWhileBusy(ctx, cfg, log, false, boot); !flow.IsInfra(err) || *n != 3 {
		t.Fatalf("the same waits on the default test: %d boots, %v (want contended)", *n, err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	boot, n = boots(0.9)
	if _, err := repeatWhileBusy(cancelled, cfg, log, false, boot); err != nil || *n != 1 {
		t.Fatalf("stopped: %d boots, %v (a stop is no reason to boot again)", *n, err)
	}
}

// On the real pair: each boot's guest wait is measured (a pair of TCG
// guests on a host always waits a little), and a boot that reads as
// contended throughout gives INFRA after the repeats, each boot booted
// for real and no QEMU left behind.
func TestPairBusyHostIsInfra(t *testing.T) {
	p, pids := testPair(t)
	p.cfg.BusyRepeats = 1
	var measured []float64
	p.hooks.guestWait = func(w float64) float64 {
		measured = append(measured, w)
		return 5 // five threads starved, all the time
	}
	_, err := p.Run(context.Background(), testKernel(t), DefaultTest())
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Op != "busy host" || !strings.Contains(err.Error(), "5.00, 5.00 on average during 2 boots") {
		t.Fatalf("want busy host INFRA after 2 boots, got %v", err)
	}
	if len(measured) != 2 || measured[0] <= 0 {
		t.Fatalf("guest waits measured: %v, want two boots' figures above 0", measured)
	}
	noSurvivors(t, *pids)
}

// More spinning programs than cores: together they wait for a CPU about
// one core's worth of the time, and the meter, sampling their threads,
// sees it.
func TestWaitMeterSeesStarvation(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("no /proc/<pid>/schedstat (CONFIG_SCHED_INFO)")
	}
	var pids []int
	var spins []*exec.Cmd
	for range runtime.NumCPU() + 1 {
		spin := exec.Command("sh", "-c", "while :; do :; done")
		spin.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := spin.Start(); err != nil {
			t.Fatal(err)
		}
		spins = append(spins, spin)
		pids = append(pids, spin.Process.Pid)
	}
	start := time.Now()
	w := startWaitMeter(pids, 100*time.Millisecond)
	time.Sleep(2 * time.Second)
	w.sample(pids) // the last look while they live
	for _, s := range spins {
		syscall.Kill(-s.Process.Pid, syscall.SIGKILL)
		s.Wait()
	}
	waited := w.finish().Seconds() / time.Since(start).Seconds()
	if waited < 0.5 {
		t.Fatalf("%d spinners on %d CPUs waited %.2f CPUs' worth, want about 1", len(pids), runtime.NumCPU(), waited)
	}
	if again := w.finish(); again <= 0 {
		t.Fatal("a second finish lost the figure")
	}
}

// The meter reads the family of the process the lab starts, not that
// process alone: QEMU is bwrap's grandchild. A shell that forks a busy
// child is seen to wait and to use about the child's CPU, which its
// own rusage (the child killed, never reaped by it) does not show, and
// that CPU is the guests' own, not other programs'.
func TestWaitMeterReadsTheFamily(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("no /proc/<pid>/schedstat (CONFIG_SCHED_INFO)")
	}
	host := startHostMeter(procStat, time.Now)
	sh := exec.Command("sh", "-c", `sh -c 'while :; do :; done' & wait`)
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	w := startWaitMeter([]int{sh.Process.Pid}, 100*time.Millisecond)
	// A busy machine can be slow to fork the child and to give it a CPU:
	// look until the family has two members and has run half a second.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		fam := w.family([]int{sh.Process.Pid})
		var used time.Duration
		for _, p := range fam {
			used += p.cpu
		}
		if len(fam) >= 2 && used >= 500*time.Millisecond {
			break
		}
	}
	w.sample([]int{sh.Process.Pid}) // the last look while they live
	syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
	sh.Wait()
	reaped := sh.ProcessState.UserTime() + sh.ProcessState.SystemTime()
	own := w.ownCPU(reaped)
	var tasks []string
	for k := range w.last {
		tasks = append(tasks, k)
	}
	if len(tasks) < 2 {
		t.Errorf("threads read: %q, want the shell's and its child's", tasks)
	}
	// The child gets a tenth of a core even niced on a two-core host
	// busy with a kernel build.
	if own < 100*time.Millisecond || own < 10*reaped {
		t.Errorf("the family used %v of CPU (the shell's rusage %v), want the busy child's, above 0.1 s", own, reaped)
	}
	wall := time.Since(host.t0).Seconds()
	if other, mine := host.otherCores(0), host.otherCores(own); mine > other-0.9*own.Seconds()/wall {
		t.Errorf("other programs: %.2f cores counting the family, %.2f without it", other, mine)
	}
}

// /proc/<pid>/stat is read past a command name holding spaces and
// parentheses; a process that is gone or unreadable, or another's, is
// not the family's; a process seen before and gone keeps its figure.
func TestWaitMeterFamilyFromProc(t *testing.T) {
	proc := t.TempDir()
	stat := func(pid, ppid int, comm string, utime, stime int) {
		dir := filepath.Join(proc, strconv.Itoa(pid))
		os.MkdirAll(filepath.Join(dir, "task", strconv.Itoa(pid)), 0o755)
		os.WriteFile(filepath.Join(dir, "stat"), []byte(fmt.Sprintf("%d (%s) S %d 1 1 0 -1 4194304 0 0 0 0 %d %d 0 0 20 0 1 0 %d 0 0\n", pid, comm, ppid, utime, stime, 1000+pid)), 0o644)
		os.WriteFile(filepath.Join(dir, "task", strconv.Itoa(pid), "schedstat"), []byte(fmt.Sprintf("1 %d 3\n", pid*1000)), 0o644)
	}
	stat(10, 1, "sh", 1, 1)
	stat(11, 10, "bwrap", 2, 0)
	stat(12, 11, "qemu (a) b)", 300, 100)
	stat(13, 12, "qemu-child", 50, 0)
	stat(20, 1, "make", 900, 0)                   // another program
	os.MkdirAll(filepath.Join(proc, "14"), 0o755) // gone meanwhile: no stat
	os.WriteFile(filepath.Join(proc, "15"), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(proc, "16"), 0o755)
	os.WriteFile(filepath.Join(proc, "16", "stat"), []byte("16 (x) S 10 broken"), 0o644)
	os.MkdirAll(filepath.Join(proc, "self"), 0o755)
	w := newWaitMeter(proc)
	w.sample([]int{10, 99})
	var pids []int
	for _, p := range w.family([]int{10}) {
		pids = append(pids, p.pid)
	}
	if fmt.Sprint(pids) != "[10 11 12 13]" {
		t.Errorf("family %v, want [10 11 12 13]", pids)
	}
	os.RemoveAll(filepath.Join(proc, "13"))
	w.sample([]int{10})
	close(w.done) // no sampler runs
	if got, want := w.finish(), time.Duration(10+11+12+13)*time.Microsecond; got != want {
		t.Errorf("waited %v, want %v", got, want)
	}
	if got := w.ownCPU(0); got != 4540*time.Millisecond {
		t.Errorf("family CPU %v, want 4.54 s (qemu-child's kept after it left)", got)
	}
	if got := w.ownCPU(time.Minute); got != time.Minute {
		t.Errorf("the rusage reaped says more: %v", got)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1", "x (y) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 0 0"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if (&waitMeter{proc: filepath.Join(proc, "none")}).family([]int{10}) != nil {
		t.Error("a family read where there is no /proc")
	}
}
