package reply

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/outbox"
)

var update = flag.Bool("update", false, "rewrite the golden replies in testdata/replies")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testenv.Golden(t, filepath.Join("testdata", name), got, *update)
}

// githubGolden names a GitHub comment's golden file for golden (which
// reads below testdata/): every comment's, the renderer's (reports) and
// the replier's, is in reports/testdata/github.
func githubGolden(name string) string {
	return filepath.Join("..", "..", "testdata", "github", name)
}

// fixture is what the replies are fed, as wire makes it
// (wire.TestReplyFixture keeps testdata/svcrdma-v2.json current): the
// replier's parts under the default configuration, the real svcrdma v2
// thread as the lore stage reads it, and the builder's failures as the
// build job stores them.
type fixture struct {
	Reports reports.Config `json:"reports"`
	Lab     labWords       `json:"lab"`
	Kernels Kernels        `json:"kernels"`
	Lists   []string       `json:"lists"`
	// MaintainersOnly are the lists that hear of a reply through their
	// maintainers only (lore.lists reply), as wire sets them.
	MaintainersOnly []string           `json:"maintainers_only"`
	TreeURLs        map[string]string  `json:"tree_urls"`
	Side            string             `json:"side"`
	Series          flow.Series        `json:"series"`
	Failures        map[string]failure `json:"failures"`
}

// labWords is what the default lab says of itself, for the pairs and
// profiles the replies name; a name it does not hold fails the test
// that asked.
type labWords struct {
	TestName, Test string
	Default        string `json:"DefaultPair"`
	Pairs          map[string]string
	Links          map[string]string
	Pressure       map[string]string // by providers, comma-separated
	DebugIters     int               `json:"DebugIterations"`
	Limits         map[string][]string
	t              *testing.T
}

// EmulationLimits is what the lab said of a series changing each file
// alone, joined (a limit once).
func (l *labWords) EmulationLimits(pair string, changes []flow.Change) []string {
	var out []string
	for _, c := range changes {
		said, ok := l.Limits[c.File]
		if !ok {
			l.t.Errorf("the fixture's lab has no limits for %q (add them in wire.TestReplyFixture)", c.File)
		}
		for _, s := range said {
			if pair == "qemu" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

func (l *labWords) TestWords() (string, string)  { return l.TestName, l.Test }
func (l *labWords) DefaultPair() string          { return l.Default }
func (l *labWords) DebugIterations() int         { return l.DebugIters }
func (l *labWords) PairWords(pair string) string { return l.word(l.Pairs, pair) }
func (l *labWords) LinkWords(profile string) string {
	return l.word(l.Links, profile)
}
func (l *labWords) PressureWords(providers []string) string {
	return l.word(l.Pressure, strings.Join(providers, ","))
}

func (l *labWords) word(m map[string]string, key string) string {
	w, ok := m[key]
	if !ok {
		l.t.Errorf("the fixture's lab has no words for %q (add them in wire.TestReplyFixture)", key)
	}
	return w
}

// failure is a stage's error as a test row keeps it.
type failure struct {
	Error  string
	Detail json.RawMessage
}

// side is where the fixture's series boots.
type side string

func (s side) CandidateSide(flow.Series) string { return string(s) }

// loadFixture reads testdata/svcrdma-v2.json.
func loadFixture(t *testing.T) *fixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "svcrdma-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	if err := json.Unmarshal(raw, f); err != nil {
		t.Fatal(err)
	}
	f.Lab.t = t
	return f
}

// replyRig is the production path of a reply from the fixture on: the
// default configuration, a real outbox on its own database.
type replyRig struct {
	r  *Replier
	ob *outbox.Outbox
	s  flow.Series
	f  *fixture
}

var replyNow = time.Date(2026, 11, 30, 4, 5, 6, 0, time.UTC)

func newReplyRig(t *testing.T, mods ...func(*reports.Config)) *replyRig {
	t.Helper()
	f := loadFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg := f.Reports
	for _, mod := range mods {
		mod(&cfg)
	}
	ob, err := outbox.Open(ctx, db, &cfg, dir, nil, func() time.Time { return replyNow }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	r := &Replier{Cfg: cfg, Outbox: ob, Lab: &f.Lab, Limits: &f.Lab, Sides: side(f.Side), Lists: f.Lists, MaintainersOnly: f.MaintainersOnly, TreeURLs: f.TreeURLs, Kernels: f.Kernels,
		Now: func() time.Time { return replyNow }}
	return &replyRig{r: r, ob: ob, s: f.Series, f: f}
}

// report is what bot's deliver() hands the reporter for a finished test:
// the test row's fields, its stored detail and its samples.
func (g *replyRig) report(id int, verdict flow.Outcome, summary string, detail json.RawMessage, base, cand []flow.Sample) flow.Report {
	rep := flow.Report{Key: fmt.Sprintf("series:%s:v2:nfsd:%d", g.s.MsgID, id), Kind: "series", Verdict: verdict, Summary: summary,
		Series: &g.s, Tree: "nfsd", BaseBranch: "nfsd-next", Base: "6613476e225e090cc9aad49be7fa504e290dd33d", BaseReason: "subject tree tag",
		Lab: "qemu", Candidate: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c", URL: fmt.Sprintf("http://127.0.0.1:8480/tests/%d", id),
		TraceURL: fmt.Sprintf("http://127.0.0.1:8480/tests/%d#traces", id), Origin: flow.Origin{Kind: "mail"},
		Detail: detail, BaseSamples: base, CandSamples: cand}
	if verdict == flow.BuildFailed || verdict == flow.ApplyFailed || verdict == flow.BootFailed {
		rep.Log = summary
	}
	return rep
}

// failed is the report of a test whose stage failed as the fixture's
// failure name did.
func (g *replyRig) failed(t *testing.T, id int, verdict flow.Outcome, name string) flow.Report {
	t.Helper()
	fl, ok := g.f.Failures[name]
	if !ok {
		t.Fatalf("the fixture has no failure %q", name)
	}
	return g.report(id, verdict, fl.Error, fl.Detail, nil, nil)
}

// quiet runs the reporter and checks that it recorded no reply.
func (g *replyRig) quiet(t *testing.T, rep flow.Report) {
	t.Helper()
	ctx := context.Background()
	before, _ := g.ob.Ledger().List(ctx)
	if err := g.r.Deliver(ctx, rep); err != nil {
		t.Fatal(err)
	}
	if es, err := g.ob.Ledger().List(ctx); err != nil || len(es) != len(before) {
		t.Fatalf("ledger %d -> %d entries, %v: %s is mailed", len(before), len(es), err, rep.Verdict)
	}
}

// deliver runs the reporter and returns the one reply it recorded.
func (g *replyRig) deliver(t *testing.T, rep flow.Report) *outbox.Entry {
	t.Helper()
	ctx := context.Background()
	before, _ := g.ob.Ledger().List(ctx)
	if err := g.r.Deliver(ctx, rep); err != nil {
		t.Fatal(err)
	}
	es, err := g.ob.Ledger().List(ctx)
	if err != nil || len(es) != len(before)+1 {
		t.Fatalf("ledger %d -> %d entries, %v", len(before), len(es), err)
	}
	for _, e := range es {
		if e.Outcome == rep.Verdict.String() {
			return e
		}
	}
	t.Fatalf("no %s reply in the ledger", rep.Verdict)
	return nil
}

// counts is a boot's transport counts as the lab reports them
// (lab.Health.Counters): every count, zero unless set.
func counts(set map[string]int) map[string]int {
	h := map[string]int{"retrans": 0, "timeouts": 0, "reconnects": 0, "bad_xids": 0, "bad_replies": 0, "server_bad_calls": 0,
		"sq_full": 0, "cq_full": 0, "write_chunks": 0, "read_chunks": 0, "sq_starve": 0}
	for k, v := range set {
		if _, ok := h[k]; !ok {
			panic("no count " + k)
		}
		h[k] = v
	}
	return h
}

// samples are n boots of the decided metrics: copy throughput around
// copy (spread wide) and a loop time that follows it.
func samples(n int, copy float64, spread float64) []flow.Sample {
	var out []flow.Sample
	for i := range n {
		var it []float64
		for j := range 4 {
			it = append(it, copy+spread*float64((i*5+j*3)%7-3)/3)
		}
		loop := 2000 / (copy + spread*float64(i%3-1)/3)
		out = append(out, flow.Sample{Metrics: map[string]float64{"copy_MBps": copy, "loop_s": loop}, Iterations: map[string][]float64{"copy_MBps": it},
			Health: counts(nil)})
	}
	return out
}

// withRetrans gives the boots at idx n retransmissions.
func withRetrans(s []flow.Sample, n int, idx ...int) []flow.Sample {
	out := append([]flow.Sample(nil), s...)
	for _, i := range idx {
		out[i].Health = counts(map[string]int{"retrans": n})
	}
	return out
}

// decide is Replier.Decide with a live context, which never fails it.
func decide(t *testing.T, r *Replier, base, cand []flow.Sample) flow.Decision {
	t.Helper()
	d, err := r.Decide(context.Background(), "series:<test@example.org>:v1:", base, cand)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
