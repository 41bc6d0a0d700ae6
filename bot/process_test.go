package bot_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/cfgtype"
	"github.com/rdmabot/rdmabot/internal/fakestage"
	"github.com/rdmabot/rdmabot/internal/pgtest"
)

// The process tests run this test binary again as a bot server (a real,
// separate process they can kill -9), with the recording fakes made
// durable: calls and replies go to files in its directory.
func TestMain(m *testing.M) {
	if os.Getenv("RDMABOT_CHILD_DIR") != "" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

func childMain() int {
	dir := os.Getenv("RDMABOT_CHILD_DIR")
	role := os.Getenv("RDMABOT_CHILD_ROLE")
	listen := os.Getenv("RDMABOT_CHILD_LISTEN")
	shared := os.Getenv("RDMABOT_CHILD_SHARED") // series file and outbox, shared by all processes
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	st, err := store.Open(ctx, os.Getenv("RDMABOT_CHILD_DB"), dir)
	if err != nil {
		log.Error("store", "err", err)
		return 1
	}
	calls := &fakestage.Calls{File: filepath.Join(dir, "calls")}
	cfg := bot.DefaultConfig()
	cfg.Runs = 3
	cfg.Listen = listen
	cfg.URL = "http://" + listen
	cfg.IngestInterval = cfgtype.D(300 * time.Millisecond)
	cfg.Mainline.Schedules = nil
	cfg.LeaseTTL = cfgtype.D(3 * time.Second)
	cfg.Artifacts = filepath.Join(dir, "artifacts")
	outbox := filepath.Join(shared, "outbox")
	os.MkdirAll(outbox, 0o755)
	build := &fakestage.Builder{Dir: filepath.Join(dir, "kernels"), Calls: calls, Delay: 300 * time.Millisecond}
	b, err := bot.New(st, bot.Options{
		Config: cfg,
		Role:   role,
		Params: "p",
		Stages: bot.Stages{
			Ingest: &fakestage.Ingest{File: filepath.Join(shared, "series.json"), Calls: calls},
			Build:  build,
			Check:  &fakestage.Checker{Of: build, Calls: calls, Delay: 300 * time.Millisecond},
			Lab:    &fakestage.Lab{Calls: calls, Delay: 400 * time.Millisecond},
			Decide: fakestage.Decider{},
			Report: &fakestage.Reporter{Dir: outbox, Calls: calls},
		},
		Log:          log,
		ID:           "child/" + role + "/" + listen,
		PollInterval: 100 * time.Millisecond,
		LeaseWait:    200 * time.Millisecond,
		Heartbeat:    200 * time.Millisecond,
		Quick:        true,
	})
	if err != nil {
		log.Error("bot", "err", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle("/artifacts/", http.StripPrefix("/artifacts/", b.Artifacts()))
	srv := &http.Server{Addr: listen, Handler: mux}
	go srv.ListenAndServe()
	if err := b.Start(ctx); err != nil {
		log.Error("start", "err", err)
		return 1
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.Stop(sctx)
	srv.Shutdown(sctx)
	return 0
}

type child struct {
	t                             *testing.T
	dir, role, listen, db, shared string
	cmd                           *exec.Cmd
}

func (c *child) start() {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RDMABOT_CHILD_DIR="+c.dir, "RDMABOT_CHILD_ROLE="+c.role,
		"RDMABOT_CHILD_LISTEN="+c.listen, "RDMABOT_CHILD_DB="+c.db, "RDMABOT_CHILD_SHARED="+c.shared)
	logf, err := os.OpenFile(filepath.Join(c.dir, "log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	logf.Close()
	c.cmd = cmd
	c.t.Cleanup(func() { c.kill() })
}

func (c *child) kill() {
	if c.cmd != nil && c.cmd.Process != nil {
		c.cmd.Process.Signal(syscall.SIGKILL)
		c.cmd.Wait()
		c.cmd = nil
	}
}

func (c *child) calls() []string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "calls"))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func (c *child) count(prefix string) int {
	n := 0
	for _, l := range c.calls() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func writeSeries(t *testing.T, shared string, s ...flow.Series) {
	b, _ := json.Marshal(s)
	tmp := filepath.Join(shared, "series.json.tmp")
	os.WriteFile(tmp, b, 0o644)
	if err := os.Rename(tmp, filepath.Join(shared, "series.json")); err != nil {
		t.Fatal(err)
	}
}

func outbox(t *testing.T, shared string) map[string]flow.Report {
	ents, _ := os.ReadDir(filepath.Join(shared, "outbox"))
	out := map[string]flow.Report{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(shared, "outbox", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var r flow.Report
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		out[r.Key] = r
	}
	return out
}

// allTestsDone reads the child's database beside it (WAL lets a reader in).
func allTestsDone(t *testing.T, dir string) bool {
	ctx := context.Background()
	st, err := store.Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tests, err := st.Tests(ctx, st.DB, 10)
	if err != nil || len(tests) == 0 {
		return false
	}
	for _, tt := range tests {
		if tt.State != store.StateDone {
			return false
		}
	}
	return true
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool, logs ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			var tail []string
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				s := string(b)
				if len(s) > 4000 {
					s = s[len(s)-4000:]
				}
				tail = append(tail, l+":\n"+s)
			}
			t.Fatalf("timed out waiting for %s\n%s", what, strings.Join(tail, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill -9 at every stage, restart each time: every series still gets
// exactly one reply with the right verdict, and every job completed once.
func TestCrashAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: spawns processes")
	}
	dir := t.TempDir()
	c := &child{t: t, dir: dir, role: "all", listen: freeAddr(t), shared: dir}
	writeSeries(t, dir,
		series("<pass@x>", "[PATCH] svcrdma: harmless"),
		series("<slow@x>", "[PATCH] svcrdma: slow send"),
		series("<broken@x>", "[PATCH] svcrdma: build-fails"))
	logs := filepath.Join(dir, "log")
	// Kill while applying, while checking, while building, in the middle
	// of a lab round, and right after the first reply went out (before
	// its job completed).
	kills := []struct{ prefix string }{{"apply"}, {"check"}, {"build"}, {"run"}, {"deliver"}}
	c.start()
	for _, k := range kills {
		seen := c.count(k.prefix)
		waitFor(t, "a "+k.prefix+" call", 60*time.Second, func() bool { return c.count(k.prefix) > seen }, logs)
		c.kill()
		t.Logf("killed -9 after a %q call; restarting", k.prefix)
		c.start()
	}
	waitFor(t, "three replies", 120*time.Second, func() bool { return len(outbox(t, dir)) == 3 }, logs)
	// The reply sent just before the last kill is already in the outbox;
	// its report job is rerun by the successor (and must not send again).
	// Wait for every test to be done, not for a fixed time: a busy CI
	// machine took longer than a second to rerun it.
	waitFor(t, "every test done", 120*time.Second, func() bool { return allTestsDone(t, dir) }, logs)
	c.cmd.Process.Signal(syscall.SIGTERM)
	c.cmd.Wait()
	c.cmd = nil

	want := map[string]string{"series:<pass@x>:v1:": "PASS", "series:<slow@x>:v1:": "REGRESSION", "series:<broken@x>:v1:": "BUILD_FAILED"}
	got := outbox(t, dir)
	for k, v := range want {
		if got[k].Verdict.String() != v {
			t.Errorf("%s: reply %q, want %s", k, got[k].Verdict, v)
		}
	}
	ctx := context.Background()
	st, err := store.Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Every job ran to completion exactly once: one completed row per
	// kind and arguments, none lost (still pending) or given up. The
	// periodic ticks (polling, delivering what is due, fetching) recur.
	rows, err := st.DB.QueryContext(ctx, `SELECT kind, CAST(args AS TEXT), state FROM river_job WHERE kind NOT IN ('ingest', 'deliver', 'fetch')`)
	if err != nil {
		t.Fatal(err)
	}
	completed := map[string]int{}
	for rows.Next() {
		var kind, args, state string
		rows.Scan(&kind, &args, &state)
		if state != "completed" {
			t.Errorf("job %s %s left %s", kind, args, state)
		}
		completed[kind+args]++
	}
	rows.Close()
	for k, n := range completed {
		if n != 1 {
			t.Errorf("%s completed %d times", k, n)
		}
	}
	tests, _ := st.Tests(ctx, st.DB, 10)
	for _, tt := range tests {
		if tt.State != store.StateDone {
			t.Errorf("test %s is %s", tt.Key, tt.State)
		}
	}
	t.Logf("calls: %d applies, %d checks, %d builds, %d lab runs, %d delivery attempts for 3 replies",
		c.count("apply"), c.count("check"), c.count("build"), c.count("run"), c.count("deliver"))
}

// A process killed -9 whose successor has another name (another host,
// another listen address) does not leave its running job for rescue_after
// (4 h): it stopped beating, so the successor takes the job over within
// the heartbeat's deadline (here about a second) and the series is
// answered once.
func TestDeadProcessJobsTakenOver(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: spawns processes")
	}
	dir := t.TempDir()
	a := &child{t: t, dir: dir, role: "all", listen: freeAddr(t), shared: dir}
	writeSeries(t, dir, series("<taken@x>", "[PATCH] svcrdma: harmless"))
	logs := filepath.Join(dir, "log")
	a.start()
	waitFor(t, "a lab run", 60*time.Second, func() bool { return a.count("run") > 0 }, logs)
	a.kill()
	killed := time.Now()
	b := &child{t: t, dir: dir, role: "all", listen: freeAddr(t), shared: dir}
	b.start()
	waitFor(t, "the reply", 60*time.Second, func() bool { return len(outbox(t, dir)) == 1 }, logs)
	took := time.Since(killed)
	if got := outbox(t, dir)["series:<taken@x>:v1:"].Verdict; got != flow.Pass {
		t.Errorf("reply %q, want PASS", got)
	}
	logb, _ := os.ReadFile(logs)
	if !strings.Contains(string(logb), "took over a job whose process stopped beating") {
		t.Errorf("the successor did not say it took over the dead process's job")
	}
	t.Logf("answered %s after the kill", took.Round(10*time.Millisecond))
}

// Two machines sharing one PostgreSQL: one ingests and builds, the other
// runs the lab and pulls the kernels it needs from the first over HTTP.
func TestTwoMachinesOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: spawns PostgreSQL and processes")
	}
	url := pgtest.Start(t)
	shared := t.TempDir()
	a := &child{t: t, dir: t.TempDir(), role: "ingest,build", listen: freeAddr(t), db: url, shared: shared}
	b := &child{t: t, dir: t.TempDir(), role: "lab", listen: freeAddr(t), db: url, shared: shared}
	a.start()
	b.start()
	writeSeries(t, shared,
		series("<pass@x>", "[PATCH] svcrdma: harmless"),
		series("<slow@x>", "[PATCH] svcrdma: slow send"))
	waitFor(t, "two replies", 120*time.Second, func() bool { return len(outbox(t, shared)) == 2 },
		filepath.Join(a.dir, "log"), filepath.Join(b.dir, "log"))
	got := outbox(t, shared)
	if got["series:<pass@x>:v1:"].Verdict != flow.Pass || got["series:<slow@x>:v1:"].Verdict != flow.Regression {
		t.Fatalf("replies %+v", got)
	}
	if a.count("run ") != 0 || b.count("build ") != 0 || b.count("apply ") != 0 {
		t.Fatalf("roles mixed: build machine ran %d lab runs, lab machine %d builds", a.count("run "), b.count("build "))
	}
	if a.count("build ") == 0 || b.count("run ") == 0 {
		t.Fatalf("work missing: %d builds, %d runs", a.count("build "), b.count("run "))
	}
	// The lab machine has its own copies of the kernels, pulled over HTTP.
	pulled, _ := filepath.Glob(filepath.Join(b.dir, "artifacts", "mainline-*", "kernel"))
	if len(pulled) < 3 {
		t.Fatalf("lab machine holds %d pulled kernels, want base + 2 candidates", len(pulled))
	}
	for _, p := range pulled {
		if _, err := os.Stat(filepath.Join(a.dir, "artifacts", filepath.Base(filepath.Dir(p)), "kernel")); err != nil {
			t.Errorf("%s: not built by the build machine: %v", p, err)
		}
	}
}
