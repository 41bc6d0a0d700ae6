package kbuild

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits bound what one sandboxed run may use. Zero fields take the
// defaults (DefaultLimits); a negative one means no limit.
type Limits struct {
	// Memory is the memory cgroup limit of the whole run, in bytes.
	Memory int64
	// Tasks is the cgroup's process and thread limit.
	Tasks int64
	// CPUs caps the run's CPU bandwidth (cgroup cpu quota), in CPUs.
	CPUs int
	// Tmp is the size of the sandbox's /tmp tmpfs, in bytes.
	Tmp int64
	// FileSize is the largest file a process may write (RLIMIT_FSIZE).
	FileSize int64
	// Disk caps an untrusted build's own directory (its copy of the
	// output tree and what it writes), in bytes, checked every few
	// seconds from the host.
	Disk int64
	// Files caps how many files and directories that directory holds:
	// inodes, which a build can use up without using blocks.
	Files int64
	// Log caps the build log the host keeps, in bytes.
	Log int64
}

// DefaultLimits fit a kernel build with -j of a few CPUs.
var DefaultLimits = Limits{
	Memory:   16 << 30,
	Tasks:    4096,
	Tmp:      2 << 30,
	FileSize: 4 << 30,
	Disk:     32 << 30,
	Files:    200_000, // the lab kernel's output tree holds about 5,000
	Log:      64 << 20,
}

func (l Limits) withDefaults(jobs int) Limits {
	d := DefaultLimits
	d.CPUs = jobs
	for _, f := range []struct{ v, def *int64 }{{&l.Memory, &d.Memory}, {&l.Tasks, &d.Tasks}, {&l.Tmp, &d.Tmp},
		{&l.FileSize, &d.FileSize}, {&l.Disk, &d.Disk}, {&l.Files, &d.Files}, {&l.Log, &d.Log}} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if l.CPUs == 0 {
		l.CPUs = d.CPUs
	}
	return l
}

// cgroup is one run's control group: under cgroup v2 one directory;
// under v1 one directory in each of the memory, pids and cpu hierarchies
// this machine has. Best effort: where the bot may not create cgroups,
// the run goes without (Sandbox.Run logs nothing; Limits.Tmp, FileSize,
// Disk and Log still hold).
type cgroup struct {
	dirs []string // one per hierarchy; dirs[0] holds the memory controller, if any
	v2   bool
	mem  string // the directory with memory accounting ("" without)
}

var cgroupSeq atomic.Int64

// newCgroup creates the run's cgroup under the bot's own with l's
// limits, or returns nil when it cannot.
func newCgroup(l Limits) *cgroup {
	own := map[string]string{} // controller (or "" for v2) -> own path
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	f.Close()
	name := fmt.Sprintf("rdmabot-kbuild-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	cg := &cgroup{}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		// cgroup v2, unified at /sys/fs/cgroup.
		d := filepath.Join("/sys/fs/cgroup", own[""], name)
		if os.Mkdir(d, 0o755) != nil {
			return nil
		}
		cg.v2, cg.dirs, cg.mem = true, []string{d}, d
		set := func(file, v string) { os.WriteFile(filepath.Join(d, file), []byte(v), 0o644) }
		if l.Memory > 0 {
			set("memory.max", strconv.FormatInt(l.Memory, 10))
			set("memory.swap.max", "0")
		}
		if l.Tasks > 0 {
			set("pids.max", strconv.FormatInt(l.Tasks, 10))
		}
		if l.CPUs > 0 {
			set("cpu.max", fmt.Sprintf("%d 100000", l.CPUs*100000))
		}
		return cg
	}
	for _, c := range []struct {
		ctrl  string
		limit func(d string) error
	}{
		{"memory", func(d string) error {
			if l.Memory <= 0 {
				return nil
			}
			v := []byte(strconv.FormatInt(l.Memory, 10))
			err := os.WriteFile(filepath.Join(d, "memory.limit_in_bytes"), v, 0o644)
			os.WriteFile(filepath.Join(d, "memory.memsw.limit_in_bytes"), v, 0o644) // no swap, where accounted
			return err
		}},
		{"pids", func(d string) error {
			if l.Tasks <= 0 {
				return nil
			}
			return os.WriteFile(filepath.Join(d, "pids.max"), []byte(strconv.FormatInt(l.Tasks, 10)), 0o644)
		}},
		{"cpu", func(d string) error {
			if l.CPUs <= 0 {
				return nil
			}
			os.WriteFile(filepath.Join(d, "cpu.cfs_period_us"), []byte("100000"), 0o644)
			return os.WriteFile(filepath.Join(d, "cpu.cfs_quota_us"), []byte(strconv.Itoa(l.CPUs*100000)), 0o644)
		}},
	} {
		p, ok := own[c.ctrl]
		if !ok {
			continue
		}
		d := filepath.Join("/sys/fs/cgroup", c.ctrl, p, name)
		if os.Mkdir(d, 0o755) != nil {
			continue
		}
		if c.limit(d) != nil {
			os.Remove(d)
			continue
		}
		cg.dirs = append(cg.dirs, d)
		if c.ctrl == "memory" {
			cg.mem = d
		}
	}
	if len(cg.dirs) == 0 {
		return nil
	}
	return cg
}

// LimitsError says which of a build's cgroup limits this process
// cannot apply, and why: the operator's to fix (run.sh delegates a
// cgroup to the serve user), never a series'.
type LimitsError struct {
	Missing []string // "memory", "pids"
	Under   string   // the process's own cgroups, where it tried
}

func (e *LimitsError) Error() string {
	return fmt.Sprintf("builds run without their %s limits: this process cannot create a cgroup under its own (%s); "+
		"start serve in a cgroup delegated to its user, as scripts/run.sh does", strings.Join(e.Missing, " and "), e.Under)
}

// CheckLimits makes one cgroup with a memory and a pid limit, the way
// every sandboxed run does, and removes it: nil when both limits apply
// here, a *LimitsError naming the missing ones when not.
func CheckLimits() error {
	own, _ := os.ReadFile("/proc/self/cgroup")
	under := strings.Join(strings.Fields(string(own)), " ")
	cg := newCgroup(Limits{Memory: DefaultLimits.Memory, Tasks: DefaultLimits.Tasks})
	if cg == nil {
		return &LimitsError{Missing: []string{"memory", "pids"}, Under: under}
	}
	defer cg.remove()
	var missing []string
	for _, c := range []struct{ name, v2file string }{{"memory", "memory.max"}, {"pids", "pids.max"}} {
		ok := false
		if cg.v2 {
			_, err := os.Stat(filepath.Join(cg.dirs[0], c.v2file))
			ok = err == nil
		} else {
			ok = slices.ContainsFunc(cg.dirs, func(d string) bool { return strings.HasPrefix(d, "/sys/fs/cgroup/"+c.name+"/") })
		}
		if !ok {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return &LimitsError{Missing: missing, Under: under}
	}
	return nil
}

// procsFiles are the files a process writes its pid to, to join.
func (c *cgroup) procsFiles() []string {
	var out []string
	for _, d := range c.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

// ooms is how many processes the memory limit killed.
func (c *cgroup) ooms() int {
	if c.mem == "" {
		return 0
	}
	file := "memory.oom_control" // v1: "oom_kill N"
	if c.v2 {
		file = "memory.events"
	}
	b, _ := os.ReadFile(filepath.Join(c.mem, file))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// remove kills what is left in the cgroup and removes it.
func (c *cgroup) remove() {
	for _, d := range c.dirs {
		for range 50 {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			pids := strings.Fields(string(b))
			if len(pids) == 0 {
				break
			}
			for _, p := range pids {
				if n, err := strconv.Atoi(p); err == nil {
					syscall.Kill(n, syscall.SIGKILL)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		os.Remove(d)
	}
}

// diskUsage sums the blocks allocated under dir (sparse files count what
// they use) and counts its entries, without following symlinks.
func diskUsage(dir string) (bytes, files int64) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		files++
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				bytes += st.Blocks * 512
			}
		}
		return nil
	})
	return bytes, files
}

// diskLimitError ends an untrusted build that wrote more than its limit
// of bytes or of files.
type diskLimitError struct{ Limit, Files int64 }

func (e *diskLimitError) Error() string {
	if e.Files > 0 {
		return fmt.Sprintf("the build made more than its limit of %d files", e.Files)
	}
	return fmt.Sprintf("the build wrote more than its %d MiB disk limit", e.Limit>>20)
}

// overDisk says which limit dir is past, if any (nil: neither).
func overDisk(dir string, limit, files int64) *diskLimitError {
	b, n := diskUsage(dir)
	switch {
	case limit > 0 && b > limit:
		return &diskLimitError{Limit: limit}
	case files > 0 && n > files:
		return &diskLimitError{Files: files}
	}
	return nil
}

// watchDisk cancels ctx when dir grows past limit bytes or files; it
// returns when ctx ends.
func watchDisk(ctx context.Context, dir string, limit, files int64, cancel context.CancelCauseFunc, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if e := overDisk(dir, limit, files); e != nil {
				cancel(e)
				return
			}
		}
	}
}

// hostDiskLow says whether the file system holding dir is nearly full:
// the host's fact, unlike a "No space left" a build can print.
func hostDiskLow(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	free := int64(st.Bavail) * st.Bsize
	total := int64(st.Blocks) * st.Bsize
	return free < 1<<30 || free < total/50
}

// limitedLog passes the first max bytes to the log file and drops the
// rest, saying so once: a build cannot fill the host's disk by printing.
type limitedLog struct {
	f       *os.File
	max, n  int64
	dropped bool
}

func (l *limitedLog) Write(p []byte) (int, error) {
	if l.n >= l.max {
		if !l.dropped {
			l.dropped = true
			fmt.Fprintf(l.f, "\nrdmabot: build log truncated at %d bytes\n", l.max)
		}
		return len(p), nil
	}
	q := p
	if int64(len(q)) > l.max-l.n {
		q = q[:l.max-l.n]
	}
	n, err := l.f.Write(q)
	l.n += int64(n)
	if err != nil {
		return n, err
	}
	return len(p), nil
}
