package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/wire"
)

// runServe runs the pipeline: the jobs of its role, the dashboard, the
// webhook and the artifact server, until SIGINT or SIGTERM.
func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "serve")
	path := fs.String("config", "config.toml", "config file")
	role := fs.String("role", bot.RoleAll, "work to do: all, ingest, build, lab, or several joined by commas")
	id := fs.String("id", "", "this process's stable name (default hostname/role/listen)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, st, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer st.Close()
	svc, err := wire.NewService(ctx, cfg, st, wire.ServiceOptions{Role: *role, ID: *id, Version: readVersion().String(),
		Artifacts: func(h http.Handler) http.Handler { return longWrite(h, timeouts.artifact) }}, e.log)
	if err != nil {
		return err
	}
	b := svc.Bot
	ln, err := net.Listen("tcp", cfg.Bot.Listen)
	if err != nil {
		return err
	}
	srv := newServer(svc.Handler, timeouts)
	go srv.Serve(ln)
	if err := b.Start(ctx); err != nil {
		return err
	}
	e.log.Info("serving", "dashboard", cfg.Bot.URL, "listen", cfg.Bot.Listen, "role", *role)
	<-ctx.Done()
	stop, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv.Shutdown(stop)
	return b.Stop(stop)
}

// serverTimeouts bound what one connection may hold of the server.
type serverTimeouts struct {
	header, read, write, idle time.Duration
	// artifact is the write time an artifact download gets instead of
	// write: a build's tar to a lab worker.
	artifact time.Duration
}

// timeouts: a request (the webhook's 2 MiB at most) is read within a
// minute, an answer written within two, an idle keep-alive kept two.
var timeouts = serverTimeouts{header: 10 * time.Second, read: time.Minute, write: 2 * time.Minute, idle: 2 * time.Minute,
	artifact: 30 * time.Minute}

func newServer(h http.Handler, t serverTimeouts) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.header, ReadTimeout: t.read, WriteTimeout: t.write, IdleTimeout: t.idle}
}

// longWrite gives h's responses d to be written instead of the server's
// WriteTimeout.
func longWrite(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d)); err != nil {
			http.Error(w, "artifact: "+err.Error(), http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// openStore loads the config at path and opens its database.
func openStore(ctx context.Context, path string) (wire.Config, *store.Store, error) {
	cfg, err := wire.Load(path)
	if err != nil {
		return cfg, nil, err
	}
	st, err := store.Open(ctx, cfg.Bot.DBURL, cfg.DataDir)
	return cfg, st, err
}

// client opens the database and an insert-only bot: the CLI queues work
// for a running `rdmabot serve`.
func client(ctx context.Context, e *env, path string, withLore bool) (*bot.Bot, *store.Store, wire.Config, error) {
	cfg, st, err := openStore(ctx, path)
	if err != nil {
		return nil, nil, cfg, err
	}
	b, err := wire.NewClient(cfg, st, withLore, e.log)
	if err != nil {
		st.Close()
		return nil, nil, cfg, err
	}
	return b, st, cfg, nil
}

// runTest queues a series from an mbox or fetched by Message-ID.
func runTest(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "test")
	path := fs.String("config", "config.toml", "config file")
	mbox := fs.String("mbox", "", "mbox file holding the series")
	msgid := fs.String("msgid", "", "Message-ID or lore URL of the series to fetch")
	wait := fs.Bool("wait", false, "wait for the verdict; exit 1 unless it is PASS or IMPROVEMENT")
	asJSON := fs.Bool("json", false, "print JSON: id and url, with --wait the test's end")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*mbox == "") == (*msgid == "") {
		return fmt.Errorf("%w: rdmabot test --mbox FILE | --msgid ID [--wait] [--json]", errUsage)
	}
	b, st, cfg, err := client(ctx, e, *path, true)
	if err != nil {
		return err
	}
	defer st.Close()
	var id int64
	o := flow.Origin{Kind: "cli"}
	if *mbox != "" {
		data, err := os.ReadFile(*mbox)
		if err != nil {
			return err
		}
		s, err := wire.NewLore(cfg, st, e.log).ReadMbox(ctx, data)
		if err != nil {
			return fmt.Errorf("%s: %w", *mbox, err)
		}
		a, err := b.Act(ctx, flow.Command{Verb: flow.CommandTest}, &s, o)
		if err != nil {
			return err
		}
		id = a.ID
		if !a.New && !*asJSON {
			fmt.Fprintf(e.stdout, "already queued or tested: ")
		}
	} else {
		a, err := b.Act(ctx, flow.Command{Verb: flow.CommandTest, Link: *msgid}, nil, o)
		if err != nil {
			return err
		}
		id = a.ID
	}
	out := testQueuedJSON{ID: id, URL: fmt.Sprintf("%s/tests/%d", cfg.Bot.URL, id)}
	if !*asJSON {
		fmt.Fprintf(e.stdout, "test %d: %s\n", id, out.URL)
	}
	if !*wait {
		if *asJSON {
			return writeJSON(e, out)
		}
		return nil
	}
	for {
		t, err := st.Test(ctx, st.DB, id)
		if err != nil {
			return err
		}
		if t.State == store.StateDone || t.State == store.StateFailed || t.State == store.StateCanceled {
			if *asJSON {
				sr, err := seriesOf(ctx, st, t)
				if err != nil {
					return err
				}
				tj := toTestJSON(t, sr)
				out.Test = &tj
				if err := writeJSON(e, out); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(e.stdout, "%s %s\n%s\n", t.State, t.Verdict, t.Summary)
			}
			if !passed(t) {
				return needsAttention(nil) // the output says why
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// passed says whether a series' finished test needs no one's attention:
// its verdict finds nothing wrong. A failed or canceled test has no
// verdict; every other verdict is the patch's problem or undecided.
func passed(t store.Test) bool {
	return t.State == store.StateDone && (t.Verdict == flow.Pass || t.Verdict == flow.Improvement)
}

// runBisect queues a bisection.
func runBisect(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bisect")
	path := fs.String("config", "config.toml", "config file")
	tree := fs.String("tree", "", "tree name from builder.trees")
	good := fs.String("good", "", "a good commit")
	bad := fs.String("bad", "", "a bad commit")
	asJSON := fs.Bool("json", false, "print JSON: id, url, tree and the commits good and bad resolved to")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *tree == "" || *good == "" || *bad == "" {
		return fmt.Errorf("%w: rdmabot bisect --tree T --good G --bad B [--json]", errUsage)
	}
	b, st, cfg, err := client(ctx, e, *path, false)
	if err != nil {
		return err
	}
	defer st.Close()
	out := bisectQueuedJSON{Tree: *tree}
	if out.Good, out.Bad, err = resolveBisect(cfg, *tree, *good, *bad); err != nil {
		return err
	}
	a, err := b.Act(ctx, flow.Command{Verb: flow.CommandBisect, Tree: *tree, Good: out.Good, Bad: out.Bad}, nil, flow.Origin{Kind: "cli"})
	if err != nil {
		return err
	}
	out.ID = a.ID
	out.URL = fmt.Sprintf("%s/bisect/%d", cfg.Bot.URL, out.ID)
	if *asJSON {
		return writeJSON(e, out)
	}
	fmt.Fprintf(e.stdout, "bisection %d: %s (good %.12s, bad %.12s)\n", out.ID, out.URL, out.Good, out.Bad)
	return nil
}

// resolveBisect checks the tree and resolves good and bad to commits in
// this machine's tree store, as the build resolves them. A typo is the
// caller's to fix (exit 2) here; once queued, a ref that does not
// resolve fails the build as the machine's fault and is retried. The
// bisection gets the commits, so a branch that moves later changes
// nothing.
func resolveBisect(cfg wire.Config, tree, good, bad string) (string, string, error) {
	var names []string
	for _, t := range cfg.Builder.Trees {
		names = append(names, t.Name)
	}
	if !slices.Contains(names, tree) {
		return "", "", fmt.Errorf("%w: --tree %q is not a configured tree (%s)", errUsage, tree, strings.Join(names, ", "))
	}
	dir := builder.StorePath(cfg.DataDir)
	ts, err := builder.OpenRepo(dir)
	if err != nil {
		return "", "", fmt.Errorf("the refs cannot be checked without the tree store (run bisect where serve builds, or rdmabot tree fetch first): %w", err)
	}
	var commits [2]string
	for i, r := range [2][2]string{{"good", good}, {"bad", bad}} {
		if commits[i], err = ts.ResolveInTree(tree, r[1]); err != nil {
			return "", "", fmt.Errorf("%w: --%s %q is neither a branch of tree %s nor a commit in %s", errUsage, r[0], r[1], tree, dir)
		}
	}
	return commits[0], commits[1], nil
}

// runStatus prints recent tests, bisections, queues and leases.
func runStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "status")
	path := fs.String("config", "config.toml", "config file")
	n := fs.Int("n", 20, "tests to list")
	asJSON := fs.Bool("json", false, "print JSON (sources, tests, bisections, queues, leases)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_, st, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer st.Close()
	tests, err := st.Tests(ctx, st.DB, *n)
	if err != nil {
		return err
	}
	series := make([]*store.SeriesRow, len(tests))
	for i, t := range tests {
		if series[i], err = seriesOf(ctx, st, t); err != nil {
			return err
		}
	}
	hs, err := st.Healths(ctx, st.DB)
	if err != nil {
		return err
	}
	bs, err := st.Bisections(ctx, 5)
	if err != nil {
		return err
	}
	queues, err := queueCounts(ctx, st)
	if err != nil {
		return err
	}
	leases, err := st.Leases(ctx)
	if err != nil {
		return err
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	if *asJSON {
		out := statusJSON{Sources: hs, Tests: []testJSON{}, Bisections: []bisectionJSON{}, Queues: queues, Leases: []leaseJSON{}}
		if out.Sources == nil {
			out.Sources = []store.Health{}
		}
		if out.Queues == nil {
			out.Queues = []queueJSON{}
		}
		for i, t := range tests {
			out.Tests = append(out.Tests, toTestJSON(t, series[i]))
		}
		for _, b := range bs {
			out.Bisections = append(out.Bisections, toBisectionJSON(b))
		}
		for _, l := range leases {
			out.Leases = append(out.Leases, leaseJSON{Pair: l.Pair, Holder: l.Holder, JobID: l.JobID, Expires: l.Expires})
		}
		return writeJSON(e, out)
	}
	return printStatus(e.stdout, hs, tests, series, bs, queues, leases)
}

// printStatus is rdmabot status's tables.
func printStatus(out io.Writer, hs []store.Health, tests []store.Test, series []*store.SeriesRow, bs []store.Bisection, queues []queueJSON, leases []store.Lease) error {
	if len(hs) > 0 {
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "SOURCE\tLAST READ\tSTATE\tLAST GOOD")
		for _, h := range hs {
			state, good := "ok", "never"
			if !h.OK {
				state = fmt.Sprintf("failing (%d): %s", h.Failures, firstLine(h.Err))
			}
			if !h.LastOK.IsZero() {
				good = h.LastOK.Format("2006-01-02 15:04")
			}
			fmt.Fprintf(w, "%s %s\t%s\t%s\t%s\n", h.Kind, h.Name, h.At.Format("2006-01-02 15:04"), state, good)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TEST\tKIND\tTREE\tBASE\tSTATE\tVERDICT\tUPDATED\tLIST\tMESSAGE-ID\tSUBJECT\tNOTE")
	for i, t := range tests {
		note := ""
		if t.State == store.StateFailed {
			// Why the bot gave up: what an operator has to fix.
			note = firstLine(t.Summary)
		}
		list, msgID, subject := "-", "-", cmp.Or(t.Ref, "-")
		if s := series[i]; s != nil {
			list, msgID, subject = cmp.Or(s.MailList(), "-"), "<"+s.MessageID()+">", s.Subject
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%.12s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.Tree, t.Base, t.State, t.Verdict,
			t.UpdatedAt.Format("2006-01-02 15:04"), list, msgID, subject, note)
	}
	if len(bs) > 0 {
		fmt.Fprintln(w, "\nBISECTION\tTREE\tGOOD\tBAD\tSTATE\tCULPRIT\t")
		for _, b := range bs {
			fmt.Fprintf(w, "%d\t%s\t%.12s\t%.12s\t%s\t%.12s\t\n", b.ID, b.Tree, b.Good, b.Bad, b.State, b.Culprit)
		}
	}
	fmt.Fprintln(w, "\nQUEUE\tSTATE\tJOBS\t")
	for _, q := range queues {
		fmt.Fprintf(w, "%s\t%s\t%d\t\n", q.Queue, q.State, q.Jobs)
	}
	for _, l := range leases {
		fmt.Fprintf(w, "\nlab %s leased by %s until %s\n", l.Pair, l.Holder, l.Expires.Format(time.TimeOnly))
	}
	return w.Flush()
}

// queueCounts are the jobs not completed, by queue and state.
func queueCounts(ctx context.Context, st *store.Store) ([]queueJSON, error) {
	var queues []queueJSON
	rows, err := st.DB.QueryContext(ctx, `SELECT queue, state, COUNT(*) FROM river_job WHERE state <> 'completed' GROUP BY queue, state ORDER BY queue, state`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var q queueJSON
		if err := rows.Scan(&q.Queue, &q.State, &q.Jobs); err != nil {
			return nil, err
		}
		queues = append(queues, q)
	}
	return queues, rows.Err()
}

// seriesOf is the series a test is of (nil for a test of no series).
func seriesOf(ctx context.Context, st *store.Store, t store.Test) (*store.SeriesRow, error) {
	if t.SeriesID == 0 {
		return nil, nil
	}
	r, err := st.Series(ctx, st.DB, t.SeriesID)
	if err != nil {
		return nil, fmt.Errorf("test %d: %w", t.ID, err)
	}
	return &r, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
