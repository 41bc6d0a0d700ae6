package lab

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A TCG guest is a host program like any other: while something else on
// the host wants a core, the guests get less of it and their timings
// drift (a comment-only series once measured +2.9 % while other programs
// shared the CPU; guest RCU stalls appear when a cold kernel build runs
// beside a pair). The pair therefore measures, per boot, how much of the
// host's CPU went to programs other than its own two QEMUs, and a boot
// measured under contention is not evidence: it is repeated, and a host
// that stays busy is the lab's fault (INFRA), never a verdict.

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux
// architecture Go supports (the kernel fixes it for the ABI).
const clockTicks = 100

// hostBusy is the CPU time all of the host's CPUs spent running programs
// since boot: user, nice and system, and steal (a hypervisor's other
// guests are contention too; guest time is already inside user). irq and
// softirq time is left out: the guests' own loopback traffic is most of
// it, and the kernel charges it to no process.
func hostBusy(stat []byte) (time.Duration, error) {
	return statTime(stat, 1, 2, 3, 8) // user nice system steal
}

// hostBusyUnniced is hostBusy without niced programs, which only take
// time the guests leave idle (beside "nice -n 19 stress-ng --cpu 2" the
// guests waited no longer and copied no slower).
func hostBusyUnniced(stat []byte) (time.Duration, error) {
	return statTime(stat, 1, 3, 8) // user system steal
}

// statTime sums the given columns of /proc/stat's "cpu" line.
func statTime(stat []byte, columns ...int) (time.Duration, error) {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 9 || f[0] != "cpu" {
			continue
		}
		var ticks int64
		for _, i := range columns {
			n, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/stat: %q: %w", sc.Text(), err)
			}
			ticks += n
		}
		return time.Duration(ticks) * time.Second / clockTicks, nil
	}
	return 0, fmt.Errorf("/proc/stat has no cpu line")
}

// hostMeter measures one boot's contention: the host's busy time over
// the boot, less the time the pair's own QEMUs used.
type hostMeter struct {
	read  func() ([]byte, error) // /proc/stat
	now   func() time.Time
	busy0 time.Duration
	t0    time.Time
	err   error
}

func startHostMeter(read func() ([]byte, error), now func() time.Time) *hostMeter {
	m := &hostMeter{read: read, now: now}
	b, err := read()
	if err == nil {
		m.busy0, err = hostBusy(b)
	}
	m.err, m.t0 = err, now()
	return m
}

func procStat() ([]byte, error) { return os.ReadFile("/proc/stat") }

// otherCores is how many of the host's cores, on average over the boot,
// went to other programs than the pair's QEMUs (whose CPU time is own);
// -1 when the host could not be read.
func (m *hostMeter) otherCores(own time.Duration) float64 {
	if m.err != nil {
		return -1
	}
	b, err := m.read()
	if err != nil {
		return -1
	}
	busy1, err := hostBusy(b)
	wall := m.now().Sub(m.t0)
	if err != nil || wall <= 0 {
		return -1
	}
	other := busy1 - m.busy0 - own
	if other < 0 {
		other = 0
	}
	return other.Seconds() / wall.Seconds()
}

// qemuCPU is the CPU time the run's guests used, once reaped.
func (r *run) qemuCPU() time.Duration {
	var d time.Duration
	for _, g := range r.guests {
		if ps := g.cmd.ProcessState; ps != nil {
			d += ps.UserTime() + ps.SystemTime()
		}
	}
	return d
}

// waitMeter follows the guests' process family: each QEMU runs as a
// descendant of the process the lab starts (a shell that execs bwrap,
// whose child runs QEMU), so the family, not that process, is read.
// It sums how long the family's threads waited for a CPU while runnable
// (the second field of /proc/<pid>/task/<tid>/schedstat, nanoseconds):
// the starvation a busy host inflicts, which a niced program that only
// takes idle time barely adds to; and the CPU time the family used (the
// guests' own, which is no other program's). Processes and threads
// vanish, so each is sampled while it lives and its last value kept.
type waitMeter struct {
	proc string // where /proc is
	mu   sync.Mutex
	last map[string]int64         // "pid/task/tid" -> ns waited
	cpu  map[string]time.Duration // "pid@start" -> user+system time
	stop chan struct{}
	done chan struct{}
}

func startWaitMeter(pids []int, every time.Duration) *waitMeter {
	w := newWaitMeter("/proc")
	go func() {
		defer close(w.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			w.sample(pids)
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func newWaitMeter(proc string) *waitMeter {
	return &waitMeter{proc: proc, last: map[string]int64{}, cpu: map[string]time.Duration{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// sample reads the threads' waits and the CPU time of roots and all
// their descendants.
func (w *waitMeter) sample(roots []int) {
	for _, p := range w.family(roots) {
		w.mu.Lock()
		key := fmt.Sprintf("%d@%d", p.pid, p.start)
		if p.cpu > w.cpu[key] {
			w.cpu[key] = p.cpu
		}
		w.mu.Unlock()
		tasks, _ := filepath.Glob(filepath.Join(w.proc, strconv.Itoa(p.pid), "task", "*", "schedstat"))
		for _, path := range tasks {
			b, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			f := strings.Fields(string(b))
			if len(f) < 2 {
				continue
			}
			ns, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				continue
			}
			w.mu.Lock()
			key := strings.TrimPrefix(filepath.Dir(path), w.proc+"/")
			// A thread that never waited (an idle host) is still one read.
			if old, ok := w.last[key]; !ok || ns > old {
				w.last[key] = ns
			}
			w.mu.Unlock()
		}
	}
}

// procInfo is what /proc/<pid>/stat says of a process.
type procInfo struct {
	pid, ppid int
	start     int64         // starttime: with pid, one process for good
	cpu       time.Duration // utime + stime
}

// family is roots and every process descended from them, as /proc
// lists them now.
func (w *waitMeter) family(roots []int) []procInfo {
	ents, err := os.ReadDir(w.proc)
	if err != nil {
		return nil
	}
	children := map[int][]procInfo{}
	byPID := map[int]procInfo{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(w.proc, e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		p, err := parseProcStat(b)
		if err != nil || p.pid != pid {
			continue
		}
		byPID[pid] = p
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []procInfo
	seen := map[int]bool{}
	queue := []int{}
	for _, r := range roots {
		if p, ok := byPID[r]; ok && !seen[r] {
			seen[r] = true
			out, queue = append(out, p), append(queue, r)
		}
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !seen[c.pid] {
				seen[c.pid] = true
				out, queue = append(out, c), append(queue, c.pid)
			}
		}
	}
	return out
}

// parseProcStat reads /proc/<pid>/stat: "pid (comm) state ppid ...",
// utime and stime the 14th and 15th fields, starttime the 22nd. comm
// may hold spaces and parentheses: the fields after it follow its last
// ")".
func parseProcStat(b []byte) (procInfo, error) {
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procInfo{}, fmt.Errorf("/proc/<pid>/stat: %q", s)
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3, state
	if len(f) < 20 {
		return procInfo{}, fmt.Errorf("/proc/<pid>/stat: %q", s)
	}
	var p procInfo
	var err error
	num := func(v string) int64 {
		n, e := strconv.ParseInt(v, 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("/proc/<pid>/stat: %q: %w", s, e)
		}
		return n
	}
	p.pid = int(num(strings.TrimSpace(s[:open])))
	p.ppid = int(num(f[1]))
	p.cpu = time.Duration(num(f[11])+num(f[12])) * time.Second / clockTicks
	p.start = num(f[19])
	return p, err
}

// finish stops sampling and returns the guests' total wait.
func (w *waitMeter) finish() time.Duration {
	if w == nil {
		return 0
	}
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	var ns int64
	for _, v := range w.last {
		ns += v
	}
	return time.Duration(ns)
}

// ownCPU stops sampling and returns the CPU time the guests' family
// used: what it was seen to use, or reaped (the started processes'
// rusage) when that says more, as it does for what ran after the last
// look.
func (w *waitMeter) ownCPU(reaped time.Duration) time.Duration {
	w.finish()
	w.mu.Lock()
	defer w.mu.Unlock()
	var seen time.Duration
	for _, v := range w.cpu {
		seen += v
	}
	return max(seen, reaped)
}

// quietSamples is how many one-second looks in a row must find the host
// quiet before a boot starts: a neighbour that pauses for a moment (a
// build between two compiler runs) is not gone.
const quietSamples = 3

// waitQuiet holds a boot back while other programs (not niced ones) keep
// more than limit of the host's cores busy, for at most max: a boot measured beside them
// would be set aside anyway, and three such boots make the run INFRA.
// Before a boot none of the pair's QEMUs runs, so all busy time is
// others'. It returns how long it waited and whether the host was quiet;
// an unreadable /proc/stat waits for nothing (the boot's own contention
// check still applies).
func waitQuiet(ctx context.Context, read func() ([]byte, error), now func() time.Time, sleep func(context.Context, time.Duration) error, limit float64, max time.Duration) (time.Duration, bool, error) {
	start := now()
	b, err := read()
	if err != nil {
		return 0, true, nil
	}
	prev, err := hostBusyUnniced(b)
	if err != nil {
		return 0, true, nil
	}
	prevT := start
	// An idle host boots after one look; once a neighbour was seen, it
	// must stay away for quietSamples looks in a row.
	quiet, need := 0, 1
	for {
		if err := sleep(ctx, time.Second); err != nil {
			return now().Sub(start), false, err
		}
		b, err := read()
		if err != nil {
			return now().Sub(start), true, nil
		}
		busy, err := hostBusyUnniced(b)
		if err != nil {
			return now().Sub(start), true, nil
		}
		t := now()
		cores := (busy - prev).Seconds() / t.Sub(prevT).Seconds()
		prev, prevT = busy, t
		if cores <= limit {
			quiet++
		} else {
			quiet, need = 0, quietSamples
		}
		waited := t.Sub(start)
		if quiet >= need {
			return waited, true, nil
		}
		if waited >= max {
			return waited, false, nil
		}
	}
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
