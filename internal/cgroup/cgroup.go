// Package cgroup puts a run's processes in a control group of their own
// with memory, task and CPU limits: a kernel build of a posted series,
// a QEMU guest booting one. It works with cgroup v1 (one directory per
// controller) and v2 (one directory, unified).
package cgroup

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Group is one run's control group: under cgroup v2 one directory;
// under v1 one directory in each of the memory, pids and cpu hierarchies
// this machine has.
type Group struct {
	dirs []string // one per hierarchy; dirs[0] holds the memory controller, if any
	v2   bool
	mem  string // the directory with memory accounting ("" without)
}

// Limits bound one run's processes together.
type Limits struct {
	Memory int64 // bytes of memory, no swap
	Tasks  int64 // processes and threads
	CPUs   int   // CPU bandwidth, in CPUs
}

// New creates a run's cgroup, named for what runs in it (prefix), under
// this process's own with l's limits, or returns nil when it cannot:
// best effort, for where the bot may not create cgroups (Check says so
// once, loudly).
func New(prefix string, l Limits) *Group {
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
	// The pid and a random word: unique among this process's groups and
	// any other's, with no counter kept between calls.
	name := fmt.Sprintf("%s-%d-%08x", prefix, os.Getpid(), rand.Uint32())
	cg := &Group{}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		// cgroup v2, unified at /sys/fs/cgroup.
		d := filepath.Join(v2Base("/sys/fs/cgroup", own[""]), name)
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

// v2Base is the directory a v2 run's cgroup goes in, for a process in
// cgroup own of the hierarchy at root: its own cgroup when memory is
// enabled for that one's children (the root's, which may have processes),
// else its parent when that one enables memory and hands this process
// its cgroup.procs, as a delegated parent with this process in a leaf of
// it does (scripts/delegate-cgroup.sh; systemd's Delegate= with the
// service in a sub-cgroup): v2 enables no controller below a cgroup with
// processes, so the runs sit beside this process, never below it. Else
// its own, where a group gets no limits and Check says so.
func v2Base(root, own string) string {
	d := filepath.Join(root, own)
	enabled := func(dir string) bool {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		return err == nil && slices.Contains(strings.Fields(string(b)), "memory")
	}
	if enabled(d) {
		return d
	}
	parent := filepath.Dir(d)
	if d != root && enabled(parent) && syscall.Access(filepath.Join(parent, "cgroup.procs"), 2 /* W_OK */) == nil {
		return parent
	}
	return d
}

// LostError says which cgroup limits this process cannot apply, and
// why: the operator's to fix (run.sh delegates a cgroup to the serve
// user), never a series'.
type LostError struct {
	Missing []string // "memory", "pids"
	Under   string   // the process's own cgroups, where it tried
}

func (e *LostError) Error() string {
	return fmt.Sprintf("builds and lab guests run without their %s limits: this process cannot create a cgroup under its own (%s); "+
		"start serve in a cgroup delegated to its user, as scripts/run.sh does", strings.Join(e.Missing, " and "), e.Under)
}

// Check makes one cgroup with a memory and a pid limit, the way every
// confined run does, and removes it: nil when both limits apply here, a
// *LostError naming the missing ones when not.
func Check() error {
	own, _ := os.ReadFile("/proc/self/cgroup")
	under := strings.Join(strings.Fields(string(own)), " ")
	cg := New("rdmabot-check", Limits{Memory: 1 << 30, Tasks: 64})
	if cg == nil {
		return &LostError{Missing: []string{"memory", "pids"}, Under: under}
	}
	defer cg.Remove()
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
		return &LostError{Missing: missing, Under: under}
	}
	return nil
}

// Join is shell that puts the shell running it into the group: run
// first by a "sh -c" that then execs the program, it puts everything
// the program starts inside from its first instruction.
func (c *Group) Join() string {
	var b strings.Builder
	for _, f := range c.procsFiles() {
		fmt.Fprintf(&b, "echo $$ 2>/dev/null > '%s'; ", f)
	}
	return b.String()
}

// procsFiles are the files a process writes its pid to, to join.
func (c *Group) procsFiles() []string {
	var out []string
	for _, d := range c.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

// OOMs is how many processes the memory limit killed.
func (c *Group) OOMs() int {
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

// Remove kills what is left in the cgroup and removes it.
func (c *Group) Remove() {
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
