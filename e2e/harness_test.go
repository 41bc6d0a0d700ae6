// Package e2e runs the whole pipeline the way an operator does: the
// rdmabot binary, `rdmabot serve`, watching a real local public-inbox,
// testing on the local 6.12 tree with the real builder and the QEMU
// soft-RoCE lab, and writing its replies to the outbox.
//
// It needs what scripts/prepare-lab.sh makes (the imported tree, a warm
// ccache and the guest image): without RDMABOT_TEST_TREE it skips, saying
// so.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/rdmabot/rdmabot/internal/pitest"
	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/wire"
)

// list is the one mailing list of the scenario.
const list = "linux-rdma"

// machine is what prepare-lab.sh leaves on the machine.
type machine struct {
	store string // the bare tree store holding the imported 6.12 tree
	rev   string // its import ref
	cache string // ccache, kbuild artifacts, guest images
}

func needMachine(t testing.TB) machine {
	t.Helper()
	m := machine{store: os.Getenv("RDMABOT_TEST_TREE"), rev: os.Getenv("RDMABOT_TEST_TREE_REV"), cache: os.Getenv("RDMABOT_TEST_CACHE")}
	if m.store == "" || m.rev == "" {
		t.Skip("RDMABOT_TEST_TREE/RDMABOT_TEST_TREE_REV unset: run `eval \"$(bash scripts/prepare-lab.sh)\"` first (imports the 6.12 tree, builds the lab kernel and guest image)")
	}
	if m.cache == "" {
		m.cache = "/var/cache/rdmabot"
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 missing: apt install qemu-system-x86")
	}
	return m
}

func root(t testing.TB) string {
	return testenv.ModuleRoot(t)
}

// buildBinary builds the checkout's rdmabot, so the test runs this code.
func buildBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rdmabot")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rdmabot")
	cmd.Dir = root(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// bot is one `rdmabot serve` process and the peers it talks to.
type bot struct {
	t       testing.TB
	m       machine
	bin     string
	dir     string // data_dir
	cfg     wire.Config
	cfgPath string
	pi      *pitest.Server
	cmd     *exec.Cmd
	log     string
	done    chan error
}

// startBot writes a config for the local inbox and tree (adjust edits it
// further) and starts `rdmabot serve`.
func startBot(t testing.TB, m machine, adjust func(*wire.Config)) *bot {
	t.Helper()
	b := &bot{t: t, m: m, bin: buildBinary(t), dir: t.TempDir()}
	b.pi = pitest.Start(t, pitest.Inbox{Name: list})

	// The bot's tree store is the machine's: the imported tree and the
	// kernels built from it are what make the run warm.
	if err := os.MkdirAll(filepath.Join(b.dir, "trees"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(m.store, filepath.Join(b.dir, "trees", "kernel.git")); err != nil {
		t.Fatal(err)
	}
	c := wire.Default()
	c.DataDir, c.CacheDir = b.dir, m.cache
	c.Lore.PollInterval.Duration = 2 * time.Second
	// lore.grace_period stays config.toml's (6 h): the scenario's mails are
	// written minutes before they are posted one by one, and a shorter
	// grace would answer a two-patch series INCOMPLETE between its two
	// mails. TestServeMailCommandsOverIMAP proves the INCOMPLETE reply.
	c.Lore.Lists = c.Lore.Lists[:1]
	c.Lore.Lists[0].Name, c.Lore.Lists[0].URL = list, b.pi.InboxURL(list)
	c.Lore.BotAddresses = []string{"rdmabot@rdmabot.invalid"}
	branch := strings.TrimPrefix(m.rev, "refs/trees/local/")
	c.Builder.Trees = c.Builder.Trees[:1]
	c.Builder.Trees[0].Name, c.Builder.Trees[0].URL, c.Builder.Trees[0].Branches = "local", "", []string{branch}
	c.Builder.Trees[0].Tags = nil
	c.Reports.Moderate = false // nothing is mailed anyway: mail = false
	addr := freeAddr(t)
	c.Bot.Listen, c.Bot.URL = addr, "http://"+addr
	c.Bot.IngestInterval.Duration = 2 * time.Second // not in the file: serve takes lore.poll_interval
	c.Bot.Mainline.Trees = []string{"local"}
	c.Bot.Mainline.Schedules = []string{}
	c.Bot.Canary.Schedule = "" // a canary would take the lab pair for a whole A/A comparison
	// The debug profile's base is a cold build of its own (21 min), which
	// CI's hour has no room for: only TestDebugCatchesUseAfterFree, which
	// is opt-in, turns it back on.
	c.Lab.Debug.Boots = 0
	// The fstests profile's group is 10 minutes of lab per kernel: only
	// the scenario that posts a functional bug for it turns it on (with a
	// short group), the others' series would pay it too.
	c.Lab.Fstests.Providers = nil
	// The tests' own heavy lock (none when the caller holds it for the
	// whole run), never a production serve's.
	c.Builder.HeavyLock = testenv.HeavyLockPath()
	c.Lab.QEMU.HeavyLock = c.Builder.HeavyLock
	if adjust != nil {
		adjust(&c)
	}
	raw, err := toml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.Parse(raw); err != nil {
		t.Fatalf("the test's config does not load: %v\n%s", err, raw)
	}
	b.cfg, b.cfgPath = c, filepath.Join(b.dir, "config.toml")
	if err := os.WriteFile(b.cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	b.log = filepath.Join(b.dir, "serve.log")
	b.start()
	b.waitUp(time.Minute)
	t.Cleanup(func() {
		b.stop()
		if t.Failed() {
			t.Logf("serve log (last 150 lines but the periodic ingest and delivery rounds):\n%s", tailFile(b.log, 150))
		}
	})
	return b
}

func (b *bot) start() {
	f, err := os.OpenFile(b.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.t.Fatal(err)
	}
	b.cmd = exec.Command(b.bin, "serve", "-config", b.cfgPath)
	b.cmd.Stdout, b.cmd.Stderr = f, f
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	f.Close()
	b.done = make(chan error, 1)
	go func() { b.done <- b.cmd.Wait() }()
}

// waitUp waits for the dashboard to answer, i.e. for serve to be up.
func (b *bot) waitUp(limit time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Get(b.cfg.Bot.URL + "/api/tests")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-b.done:
			b.cmd = nil
			b.t.Fatalf("serve exited while starting: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("serve did not answer on %s within %s: %v", b.cfg.Bot.URL, limit, err)
		}
	}
}

// stop ends serve as an operator does (SIGTERM), then makes sure nothing
// of its process group (builds, guests) is left.
func (b *bot) stop() {
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(45 * time.Second):
		b.t.Errorf("serve ignored SIGTERM for 45 s")
	}
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	b.cmd = nil
}

// post puts mails on the list, in order, as lore would receive them.
func (b *bot) post(mails ...[]byte) {
	for _, m := range mails {
		b.pi.Add(b.t, list, m)
	}
}

// reply is one mail the bot wrote to its outbox.
type reply struct {
	File    string
	Raw     []byte // the message as the outbox holds it
	Header  mail.Header
	Body    string
	Arrived time.Time
}

func (r reply) String() string {
	var sb strings.Builder
	for _, k := range []string{"Subject", "In-Reply-To", "To", "Cc", "X-Rdmabot-Outcome"} {
		fmt.Fprintf(&sb, "%s: %s\n", k, r.Header.Get(k))
	}
	sb.WriteString("\n" + r.Body)
	return sb.String()
}

// replies reads the outbox Maildir.
func (b *bot) replies() []reply {
	var out []reply
	dir := b.cfg.Reports.Outbox
	if dir == "" {
		dir = filepath.Join(b.dir, "outbox")
	}
	for _, sub := range []string{"new", "cur"} {
		ents, _ := os.ReadDir(filepath.Join(dir, sub))
		for _, e := range ents {
			p := filepath.Join(dir, sub, e.Name())
			raw, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			m, err := mail.ReadMessage(bytes.NewReader(raw))
			if err != nil {
				b.t.Errorf("outbox %s: %v", p, err)
				continue
			}
			body := new(bytes.Buffer)
			body.ReadFrom(m.Body)
			info, _ := e.Info()
			out = append(out, reply{File: p, Raw: raw, Header: m.Header, Body: body.String(), Arrived: info.ModTime()})
		}
	}
	return out
}

// waitReply waits for the reply In-Reply-To one of msgids (angle
// brackets included: a reply answers the patch that failed, else the
// cover or the single patch) and fails if serve exits first.
func (b *bot) waitReply(ctx context.Context, msgids ...string) reply {
	b.t.Helper()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := 0; ; n++ {
		for _, r := range b.replies() {
			if slices.Contains(msgids, r.Header.Get("In-Reply-To")) {
				return r
			}
		}
		// INFRA is the dashboard's, never mailed: no reply will come,
		// and waiting out ctx would only hide why.
		if n%15 == 14 {
			if tv, ok := b.endedUnmailed(msgids); ok {
				b.explain()
				b.t.Fatalf("no reply to %v will come: test %d ended %s: %s", msgids, tv.ID, tv.Verdict, tv.Summary)
			}
		}
		select {
		case <-ctx.Done():
			b.explain()
			b.t.Fatalf("no reply to %v: %v", msgids, ctx.Err())
		case err := <-b.done:
			b.cmd = nil
			b.t.Fatalf("serve exited: %v", err)
		case <-tick.C:
		}
	}
}

// endedUnmailed finds a done INFRA test of a series or thread with one
// of msgids.
func (b *bot) endedUnmailed(msgids []string) (testView, bool) {
	list, err := b.testViews()
	if err != nil {
		return testView{}, false
	}
	for _, tv := range list {
		if tv.State != "done" || tv.Verdict != "INFRA" {
			continue
		}
		ids := []string{tv.Thread}
		for _, p := range tv.Patches {
			ids = append(ids, p.MessageID)
		}
		for _, id := range ids {
			if slices.Contains(msgids, "<"+strings.Trim(id, "<>")+">") {
				return tv, true
			}
		}
	}
	return testView{}, false
}

// explain logs where every test stands (state, and each job's state,
// attempts, time and errors), so a scenario that ran out of time says
// which stage held it.
func (b *bot) explain() {
	list, err := b.testViews()
	if err != nil {
		b.t.Logf("tests: %v", err)
		return
	}
	for _, tv := range list {
		var jobs []string
		for _, j := range tv.Jobs {
			jobs = append(jobs, fmt.Sprintf("%s %d %s attempt %d %.0fs %q", j.Kind, j.ID, j.State, j.Attempt, j.Took, j.Errors))
		}
		b.t.Logf("test %d %q: state %s, verdict %q, created %s, updated %s; jobs: %s", tv.ID, tv.Subject, tv.State, tv.Verdict,
			tv.CreatedAt.Format(time.TimeOnly), tv.UpdatedAt.Format(time.TimeOnly), strings.Join(jobs, "; "))
	}
}

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		// The periodic polls are most of an idle serve's log and say
		// nothing about why a test stalled.
		l := sc.Text()
		if strings.Contains(l, "Producer job counts") ||
			strings.Contains(l, `msg="job start"`) && (strings.Contains(l, "kind=ingest") || strings.Contains(l, "kind=deliver")) {
			continue
		}
		lines = append(lines, l)
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
