package lab

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/lab/console"
)

// A stalled boot (a phase's deadline passed, or the kernel reported a
// hung task) says nothing by itself of what was stuck where. Before the
// guests are stopped the host asks each live one for its tasks in
// uninterruptible sleep with their stacks (SysRq w), over the serial
// console: QEMU's serial mux sends a break on Ctrl-A b, and the kernel
// reads the character after a break as a SysRq command
// (CONFIG_MAGIC_SYSRQ_SERIAL, on in the lab's config). It works while the
// guest's userland is stuck, since the kernel answers in its interrupt
// handler.
const (
	sysrqBreak = "\x01b"
	// blockedStart opens SysRq w's dump; SysRq answers a key it does not
	// know ("?", sent after "w") with its help line, which closes it.
	blockedStart = "sysrq: Show Blocked State"
	blockedEnd   = "sysrq: HELP :"
	// blockedWait bounds the wait for every guest's dump.
	blockedWait = 20 * time.Second
	// maxBlockedLines bounds one guest's dump as it is kept.
	maxBlockedLines = 2000
	// stallStacks and stallFrames bound a side's part of StallLog: the
	// distinct stacks shown, the lines of each.
	stallStacks = 3
	stallFrames = 16
	// stallLastLines is how many kernel lines before the dump StallLog
	// shows per side.
	stallLastLines = 4
)

// askBlocked writes SysRq w, then the help key that marks the dump's
// end, to a guest's serial input. A write to a guest already gone fails,
// and nothing is asked of it.
func askBlocked(w io.Writer) {
	for _, s := range []string{sysrqBreak, "w", sysrqBreak, "?"} {
		if _, err := io.WriteString(w, s); err != nil {
			return
		}
		// The break and its key reach the kernel as two serial events;
		// a pause keeps them apart.
		time.Sleep(200 * time.Millisecond)
	}
}

// The NFS client's RPC tasks in flight (what xprtrdma waits on) have
// no SysRq key: the kernel lists them when /proc/sys/sunrpc/rpc_debug is
// written (rpc_show_tasks, CONFIG_SUNRPC_DEBUG, on in the lab's config),
// which takes a process. The guest's init keeps a small one waiting on
// /dev/kmsg (rpc_tasks_on_sysrq in lab/guest/init.sh): once SysRq w's
// dump ended it prints the list between these two lines, which it
// writes to /dev/kmsg so that they keep their place among the kernel's.
// A guest whose userland cannot run any more prints none; the host waits
// no longer than blockedWait for it.
const (
	rpcStart = "rdmabot: RPC tasks begin"
	rpcEnd   = "rdmabot: RPC tasks end"
	// maxRPCLines bounds one guest's list as it is kept, stallRPCLines
	// as StallLog shows it.
	maxRPCLines   = 500
	stallRPCLines = 12
)

// section is the kernel lines (printk's "[time]" prefix) of one console
// between a line holding start and one holding end, at most max of them.
type section struct {
	start, end     string
	max            int
	started, ended bool
	lines          []string
	cut            int // kernel lines past max, counted
}

// add reads one console line and says whether it was the section's:
// its start, its end or a line between them.
func (s *section) add(line string) bool {
	switch {
	case s.ended || !strings.HasPrefix(line, "["):
		return false
	case !s.started:
		s.started = strings.Contains(line, s.start)
		return s.started
	case strings.Contains(line, s.end):
		s.ended = true
	case len(s.lines) >= s.max:
		s.cut++
	default:
		s.lines = append(s.lines, line)
	}
	return true
}

// text is the section's lines, with what was cut and whether it (what)
// ended within blockedWait said; none when it ended with no line.
func (s *section) text(none, what string) string {
	out := strings.Join(s.lines, "\n")
	if len(s.lines) == 0 {
		out = none
	}
	if s.cut > 0 {
		out += fmt.Sprintf("\n[... %d more lines]", s.cut)
	}
	if !s.ended {
		out += fmt.Sprintf("\n(the %s did not end within %v)", what, blockedWait)
	}
	return out
}

// blockedDump is one guest's SysRq w dump and RPC task list as its
// console is read. Each guest's is read from its own console only: what
// the kernel under test prints never reaches the trusted side's.
type blockedDump struct {
	// before are the guest's last kernel lines when it was asked.
	before []string
	stacks section
	rpc    section
	// after counts the console lines read since it was asked; gone says
	// the guest ended before all was read; asked is how many times.
	after int
	gone  bool
	asked int
}

func newBlockedDump(before []string) *blockedDump {
	return &blockedDump{
		before: before,
		asked:  1,
		stacks: section{start: blockedStart, end: blockedEnd, max: maxBlockedLines},
		rpc:    section{start: rpcStart, end: rpcEnd, max: maxRPCLines},
	}
}

// add reads one console line: a line of SysRq w's dump is none of the
// RPC task list's.
func (d *blockedDump) add(line string) {
	d.after++
	if !d.stacks.add(line) {
		d.rpc.add(line)
	}
}

// over says the guest printed all it was asked for.
func (d *blockedDump) over() bool { return d.stacks.ended && d.rpc.ended }

// text is the dump as Host.Blocked keeps it. Without one it says whether
// the guest ended, or printed nothing more at all (its kernel no longer
// printing, or not reading its serial input), or went on printing
// without answering.
func (d *blockedDump) text() string {
	switch {
	case d.stacks.started:
		return d.stacks.text(noneBlocked, "dump")
	case d.gone:
		return "(no answer to SysRq w: the guest ended first)"
	}
	asked := ""
	if d.asked > 1 {
		asked = ", asked twice"
	}
	if d.after == 0 {
		return fmt.Sprintf("(no answer to SysRq w%s within %v: the guest printed nothing more after it was asked)", asked, blockedWait)
	}
	return fmt.Sprintf("(no answer to SysRq w%s within %v, though the guest printed %d more lines)", asked, blockedWait, d.after)
}

// rpcText is the RPC task list as Host.RPCTasks keeps it.
func (d *blockedDump) rpcText() string {
	switch {
	case d.rpc.started:
		return d.rpc.text(noRPCTasks, "list")
	case !d.stacks.ended:
		return "(none: the guest's userland lists them once SysRq w's dump ended, and it did not)"
	case d.gone:
		return "(none: the guest ended first)"
	}
	return fmt.Sprintf("(no list within %v: the guest's userland lists them, and did not)", blockedWait)
}

const noRPCTasks = "(no RPC task in flight)"

const noneBlocked = "(no task was blocked)"

// stalled says the run ended on a stall the guests can still explain: a
// phase deadline after both booted, or a hung task.
func (r *run) stalled() bool {
	if _, ok := r.both("BOOTED"); !ok {
		return false
	}
	if r.timedOut != "" {
		return true
	}
	for _, m := range r.mon {
		if c, ok := m.Fatal(); ok && c.Kind == console.Hang {
			return true
		}
	}
	return false
}

// dumpBlocked asks every live guest for its blocked tasks and reads the
// consoles until each dump ended, its guest is gone, blockedWait passed
// or ctx is done.
func (r *run) dumpBlocked(ctx context.Context) {
	r.dumps = map[string]*blockedDump{}
	for role, g := range r.guests {
		if g.done || g.stdin == nil {
			continue
		}
		r.dumps[role] = newBlockedDump(kernelTail(tail(r.consoles[role].String(), 200), stallLastLines))
		go askBlocked(g.stdin)
	}
	defer func() {
		for role, d := range r.dumps {
			d.gone = r.guests[role].done
		}
	}()
	wait := time.NewTimer(blockedWait)
	defer wait.Stop()
	again := time.NewTimer(blockedWait / 2)
	defer again.Stop()
	for !r.dumpsOver() {
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
			r.pair.log.Info("lab: blocked-task dumps did not end in time", "wait", blockedWait)
			return
		case <-again.C:
			// A hung server once printed nothing after it was asked,
			// and answered in every later run: a break lost on the
			// way is worth one more ask.
			for role, d := range r.dumps {
				if g := r.guests[role]; !d.stacks.started && !g.done {
					d.asked++
					r.pair.log.Info("lab: no answer to SysRq w yet; asking again", "role", role)
					go askBlocked(g.stdin)
				}
			}
		case ev := <-r.events:
			r.handle(ev)
		}
	}
}

func (r *run) dumpsOver() bool {
	for role, d := range r.dumps {
		if !d.over() && !r.guests[role].done {
			return false
		}
	}
	return true
}

// kernelTail is the last n kernel lines of a console's text.
func kernelTail(consoleText string, n int) []string {
	s := strings.TrimRight(dmesgOf(consoleText), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(lastLines(s, n), "\n")
}

// StallLog is what a stalled boot's report shows of it: for each side
// whose dump was asked for (the side running the kernel under test
// first), its last kernel lines before the dump, its blocked tasks,
// each distinct stack once, and its RPC tasks in flight. decode
// symbolizes one side's stacks with its kernel (nil: as printed). ""
// when no dump was asked for.
func (r *Result) StallLog(decode func(role, text string) string) string {
	var parts []string
	roles := []string{"server", "client"}
	if r.Kernel.Peer != nil && r.Kernel.Side == SideClient {
		roles = []string{"client", "server"}
	}
	for _, role := range roles {
		h := r.Server
		if role == "client" {
			h = r.Client
		}
		if h.Blocked == "" {
			continue
		}
		name := role
		if r.Kernel.Peer != nil {
			name += map[bool]string{true: " (the trusted base kernel)", false: " (the kernel under test)"}[r.Kernel.Trusted(role)]
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s, last kernel lines:\n", name)
		for _, l := range h.LastLines {
			b.WriteString(l + "\n")
		}
		if len(h.LastLines) == 0 {
			b.WriteString("(none)\n")
		}
		dump := h.Blocked
		if decode != nil {
			dump = decode(role, dump)
		}
		fmt.Fprintf(&b, "%s, blocked tasks (SysRq w):\n%s\n", role, compactStacks(dump))
		if h.RPCTasks != "" {
			fmt.Fprintf(&b, "%s, RPC tasks in flight (rpc_debug):\n%s", role, firstLines(h.RPCTasks, stallRPCLines))
		}
		parts = append(parts, strings.TrimRight(b.String(), "\n"))
	}
	return strings.Join(parts, "\n\n")
}

// firstLines is text's first n lines, saying how many more it had.
func firstLines(text string, n int) string {
	l := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(l) <= n {
		return strings.Join(l, "\n")
	}
	return strings.Join(l[:n], "\n") + fmt.Sprintf("\n[... %d more lines]", len(l)-n)
}

var (
	// taskLine opens one task of a SysRq w dump ("task:nfsd state:D ...").
	taskLine = regexp.MustCompile(`^(?:\[\s*\d+\.\d+\]\s?(?:\[\s*[CT]\d+\]\s?)?)?task:(\S+)\s+state:`)
	// stackLine is a line of a task's stack worth showing: a reliable
	// frame (decoded ones go on with their file:line), or the workqueue a
	// worker runs.
	stackLine   = regexp.MustCompile(`^(?:\[\s*\d+\.\d+\]\s?(?:\[\s*[CT]\d+\]\s?)?)?\s*(?:[A-Za-z0-9_.$]+\+0x[0-9a-f]+/0x[0-9a-f]+|Workqueue: )`)
	frameOffset = regexp.MustCompile(`\+0x[0-9a-f]+/0x[0-9a-f]+.*$`)
)

// compactStacks shows each distinct stack of a dump once, its reliable
// frames only, with the names of the other tasks blocked at the same
// place, bounded to stallStacks stacks of stallFrames frames; text that
// is no task list passes as it is.
func compactStacks(dump string) string {
	type task struct {
		lines  []string
		others []string
	}
	var tasks []*task
	byKey := map[string]*task{}
	var cur *task
	var key strings.Builder
	var name string
	flush := func() {
		if cur == nil {
			return
		}
		if t := byKey[key.String()]; t != nil {
			t.others = append(t.others, name)
		} else {
			byKey[key.String()] = cur
			tasks = append(tasks, cur)
		}
		cur = nil
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(dump, "\n"), "\n") {
		if m := taskLine.FindStringSubmatch(l); m != nil {
			flush()
			cur, name = &task{lines: []string{l}}, m[1]
			key.Reset()
			continue
		}
		switch {
		case cur == nil:
			out = append(out, l)
		case stackLine.MatchString(l):
			cur.lines = append(cur.lines, l)
			key.WriteString(frameOffset.ReplaceAllString(timestamp.ReplaceAllString(l, ""), "") + "\n")
		}
	}
	flush()
	for i, t := range tasks {
		if i == stallStacks {
			out = append(out, fmt.Sprintf("[... %d more distinct stacks]", len(tasks)-i))
			break
		}
		lines := t.lines
		if len(lines) > 1+stallFrames {
			lines = append(lines[:1+stallFrames:1+stallFrames], fmt.Sprintf("[... %d more frames]", len(t.lines)-1-stallFrames))
		}
		out = append(out, lines...)
		if len(t.others) > 0 {
			n := fmt.Sprintf("%d more tasks", len(t.others))
			if len(t.others) == 1 {
				n = "1 more task"
			}
			out = append(out, fmt.Sprintf("(%s with this stack: %s)", n, strings.Join(t.others, " ")))
		}
	}
	return strings.Join(out, "\n")
}

var timestamp = regexp.MustCompile(`^\[\s*\d+\.\d+\]\s?(?:\[\s*[CT]\d+\]\s?)?`)

// joinParts joins the non-empty texts with a blank line.
func joinParts(texts ...string) string {
	var out []string
	for _, t := range texts {
		if t = strings.TrimRight(t, "\n"); t != "" {
			out = append(out, t)
		}
	}
	return strings.Join(out, "\n\n")
}

// stallTitle names a stall as its own kind of failure: what stalled,
// how far it got and in how long, on which provider and NFS version
// ("transfer stalled: 1 of 4 iterations in 97 s on siw, NFS 4.1").
// Its numbers vary from boot to boot; reports.Signature makes one
// signature of them.
func (r *run) stallTitle(res *Result) string {
	on := "on " + r.test.RDMA
	if r.test.Transport != "rdma" {
		on = "over " + r.test.Transport
	}
	vers := r.test.NFSVersion
	if m := mountVers.FindStringSubmatch(res.MountOpts); m != nil {
		vers = m[1]
	}
	on += ", NFS " + vers
	mounted, ok := r.seen["client"]["MOUNTED"]
	switch {
	case r.timedOut == "test" && r.test.Load != nil:
		return fmt.Sprintf("pressure load stalled: not done %.0f s after the mount (%d s of load) %s",
			r.timedOutAt.Sub(mounted).Seconds(), r.test.Load.Seconds, on)
	case r.timedOut == "test":
		return fmt.Sprintf("%s stalled: %d of %d iterations in %.0f s %s", r.test.Kind, len(r.iters), r.test.Iterations,
			r.timedOutAt.Sub(mounted).Seconds(), on)
	case r.timedOut == "setup" && !ok:
		booted, _ := r.both("BOOTED")
		return fmt.Sprintf("setup stalled: no NFS mount %.0f s after boot %s", r.timedOutAt.Sub(booted).Seconds(), on)
	}
	return fmt.Sprintf("%s stalled: deadline of phase %s passed %s", r.test.Kind, r.timedOut, on)
}

var mountVers = regexp.MustCompile(`(?:^|,)vers=([0-9.]+)`)
