// Package dashboard serves the bot's state to people and programs: HTML
// pages (tests with verdicts, runs with their traces, bisections,
// mainline history as inline SVG charts), the same as JSON under /api/,
// and Prometheus text metrics at /metrics. No JavaScript.
package dashboard

import (
	"compress/gzip"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/bundle"
	"github.com/rdmabot/rdmabot/reports/outbox"
	"github.com/rdmabot/rdmabot/reports/stats"
)

//go:embed templates/*.html
var templateFS embed.FS

// Jobs lists the River jobs of a test, the A/A canary's false alarms,
// the jobs not finished and the periodic jobs' schedules (bot.Bot).
type Jobs interface {
	JobsOfTest(ctx context.Context, testID int64) ([]*rivertype.JobRow, error)
	FalseAlarmRates(ctx context.Context) ([]bot.FalseAlarms, []store.Canary, error)
	ActiveJobs(ctx context.Context, limit int) ([]*rivertype.JobRow, error)
	Schedules(now time.Time) ([]bot.Schedule, error)
}

// Reproducers make a test's reproducer bundle (reproduce.Maker), and
// its archive once, to be served as a file.
type Reproducers interface {
	Bundle(ctx context.Context, id int64) (*bundle.Bundle, error)
	Archive(ctx context.Context, id int64, now time.Time) (*os.File, string, error)
}

// Replies lists what the outbox holds for one series version
// (outbox.Ledger): the reply and the patchwork checks, with their state.
type Replies interface {
	ForThread(ctx context.Context, threadID string, version int) ([]*outbox.Entry, error)
	List(ctx context.Context, states ...outbox.State) ([]*outbox.Entry, error)
}

// Server is the dashboard.
type Server struct {
	st   *store.Store
	jobs Jobs
	log  *slog.Logger
	tmpl *template.Template
	// Reproducer, when set, serves each series test's reproducer.
	Reproducer Reproducers
	// Replies, when set, shows each series test's reply and checks.
	Replies Replies
	// Lists are the watched lists' addresses by name (lore.lists), for
	// the per-list page.
	Lists map[string]string
	// AA, when set, adds `rdmabot lab aa`'s comparisons to /canary.
	AA AAResults
	// inflating is held while a request has consoles inflated.
	inflating chan struct{}
}

// New makes a dashboard over the store.
func New(st *store.Store, jobs Jobs, log *slog.Logger) *Server {
	funcs := template.FuncMap{
		"short": short,
		"when":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
		"lower": func(v any) string { return strings.ToLower(fmt.Sprint(v)) }, // a name or a flow.Outcome
		"mulf":  func(x float64) float64 { return x * 100 },
		"inc":   func(i int) int { return i + 1 },
		"ago":   func(at, now time.Time) string { return now.Sub(at).Round(time.Second).String() },
		"every": func(d time.Duration) string { return "every " + d.String() },
		// now is the page's NowView; render gives each page its own.
		"now": func() *NowView { return nil },
	}
	return &Server{st: st, jobs: jobs, log: log, inflating: make(chan struct{}, 1),
		tmpl: template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html"))}
}

// Register adds the dashboard's routes to mux.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("GET /tests/{id}", byID(s, s.testView, "test.html"))
	mux.HandleFunc("GET /tests/{id}/reproducer.tar.gz", s.reproducer)
	mux.HandleFunc("GET /tests/{id}/files/{name}", s.reproducerFile)
	mux.HandleFunc("GET /tests/{id}/consoles", s.testConsoles)
	mux.HandleFunc("GET /consoles/{id}", s.console)
	mux.HandleFunc("GET /jobs/{id}/trace", s.trace)
	mux.HandleFunc("GET /bisect/{id}", byID(s, s.bisectView, "bisect.html"))
	mux.HandleFunc("GET /reports", s.reportsByState)
	mux.HandleFunc("GET /lists", s.lists)
	mux.HandleFunc("GET /mainline", s.mainline)
	mux.HandleFunc("GET /canary", s.canary)
	mux.HandleFunc("GET /api/tests", s.apiTests)
	mux.HandleFunc("GET /api/tests/{id}", byID(s, s.testView, ""))
	mux.HandleFunc("GET /api/bisect/{id}", byID(s, s.bisectView, ""))
	mux.HandleFunc("GET /api/mainline", s.apiMainline)
	mux.HandleFunc("GET /api/now", s.apiNow)
	mux.HandleFunc("GET /metrics", s.metrics)
}

// render writes a page with the strip of what is happening now at its
// top: the templates are cloned so that this request's strip is theirs.
func (s *Server) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	s.renderNow(w, s.now(r.Context()), name, data)
}

// renderNow is render with the strip read already (a page that shows
// part of it again).
func (s *Server) renderNow(w http.ResponseWriter, now NowView, name string, data any) {
	t, err := s.tmpl.Clone()
	if err != nil {
		s.fail(w, err)
		return
	}
	t.Funcs(template.FuncMap{"now": func() *NowView { return &now }})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := t.ExecuteTemplate(w, name, data); err != nil {
		s.log.Warn("dashboard template", "page", name, "err", err)
	}
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	if strings.Contains(err.Error(), store.ErrNotFound.Error()) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	s.log.Warn("dashboard", "err", err)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// bundle is the reproducer of the path's test, or an answer saying why
// there is none.
func (s *Server) bundle(w http.ResponseWriter, r *http.Request) (*bundle.Bundle, bool) {
	id, err := pathID(r)
	if err != nil || s.Reproducer == nil {
		http.NotFound(w, r)
		return nil, false
	}
	b, err := s.Reproducer.Bundle(r.Context(), id)
	if err != nil {
		s.fail(w, err)
		return nil, false
	}
	return b, true
}

// reproducer serves a test's reproducer as a gzipped tar: one download
// that redoes the test without the bot (its run.sh). The archive is a
// file made once: a download costs no gzip.
func (s *Server) reproducer(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil || s.Reproducer == nil {
		http.NotFound(w, r)
		return
	}
	f, name, err := s.Reproducer.Archive(r.Context(), id, time.Now())
	if err != nil {
		s.fail(w, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	http.ServeContent(w, r, "", time.Time{}, f)
}

// reproducerFile serves one file of a test's reproducer, as text where
// it is text: what a reply links (the series as applied, the .config).
func (s *Server) reproducerFile(w http.ResponseWriter, r *http.Request) {
	b, ok := s.bundle(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	for _, f := range b.Files {
		if f.Name != name {
			continue
		}
		if f.Path != "" {
			ct := "text/plain; charset=utf-8"
			if f.Mode&0o111 != 0 {
				ct = "application/octet-stream" // the binary
			}
			w.Header().Set("Content-Type", ct)
			http.ServeFile(w, r, f.Path)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(f.Data)
		return
	}
	http.Error(w, fmt.Sprintf("test %s's reproducer has no file %q", r.PathValue("id"), name), http.StatusNotFound)
}

// console serves one guest's whole console of one boot, as kept.
func (s *Server) console(w http.ResponseWriter, r *http.Request) {
	text, err := s.st.OpenConsole(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	// Streamed: an unauthenticated request costs the compressed text.
	if _, err := io.Copy(w, text); err != nil {
		fmt.Fprintf(w, "\n(the rest is not available: %v)\n", err)
	}
}

// testConsoles serves every console a test kept, boot after boot in the
// order they ran, each under a header naming it: the one link a reply
// gives for "what did the guests print".
func (s *Server) testConsoles(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		http.Error(w, "bad test id", http.StatusBadRequest)
		return
	}
	runs, err := s.st.Runs(r.Context(), s.st.DB, id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	type part struct{ header, id string }
	var parts []part
	for _, run := range runs {
		for i, smp := range run.Samples {
			for _, role := range []string{"server", "client"} {
				if c := smp.Consoles[role]; c != "" {
					what := run.Role
					if smp.Profile != "" {
						what = smp.Profile + " " + what
					}
					parts = append(parts, part{fmt.Sprintf("round %d, %s boot %d (%s), %s console", run.Round, what, i+1, short(run.Commit), role), c})
				}
			}
		}
	}
	if len(parts) == 0 {
		http.Error(w, fmt.Sprintf("test %d kept no consoles: it booted nothing, or before consoles were kept", id), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Add("Vary", "Accept-Encoding")
	intro := fmt.Sprintf("Test %d: the guests' whole serial consoles, %d of them, in the order they ran.\n", id, len(parts))
	if acceptsGzip(r) {
		// Each console as it is kept, one gzip member after another (a
		// reader inflates them as one text): a request inflates nothing.
		w.Header().Set("Content-Encoding", "gzip")
		gzipText(w, intro)
		for _, p := range parts {
			gzipText(w, fmt.Sprintf("\n===== %s (/consoles/%s) =====\n", p.header, p.id))
			gz, err := s.st.ConsoleGzip(r.Context(), p.id)
			if err != nil {
				gzipText(w, "(not available: "+err.Error()+")\n")
				continue
			}
			w.Write(gz)
		}
		return
	}
	// A reader that takes no gzip has them inflated here, one such
	// request at a time.
	select {
	case s.inflating <- struct{}{}:
		defer func() { <-s.inflating }()
	case <-r.Context().Done():
		return
	}
	io.WriteString(w, intro)
	for _, p := range parts {
		fmt.Fprintf(w, "\n===== %s (/consoles/%s) =====\n", p.header, p.id)
		text, err := s.st.OpenConsole(r.Context(), p.id)
		if err == nil {
			ew := &endWriter{w: w}
			_, err = io.Copy(ew, text)
			if !ew.newline {
				io.WriteString(w, "\n")
			}
		}
		if err != nil {
			io.WriteString(w, "(not available: "+err.Error()+")\n")
		}
	}
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func pathID(r *http.Request) (int64, error) {
	return strconv.ParseInt(r.PathValue("id"), 10, 64)
}

// byID serves the record the path's id names, loaded by load: as the
// page template when page is set, else as JSON. An id that is not a
// number is not found.
func byID[V any](s *Server, load func(context.Context, int64) (V, error), page string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		v, err := load(r.Context(), id)
		if err != nil {
			s.fail(w, err)
			return
		}
		if page == "" {
			writeJSON(w, v)
			return
		}
		s.render(w, r, page, v)
	}
}

// TestView is a test as pages and the API show it.
type TestView struct {
	store.Test
	Subject string `json:"subject"`
	// Version, Author and List are a series test's: its version, who
	// posted it, the list address it was posted to.
	Version int    `json:"version,omitempty"`
	Author  string `json:"author,omitempty"`
	List    string `json:"list,omitempty"`
	// Link is the series on its list's archive; Patches are its patches
	// in order (a series test only).
	Link    string      `json:"link,omitempty"`
	Patches []PatchView `json:"patches,omitempty"`
	Runs    []store.Run `json:"runs,omitempty"`
	// Consoles is where all of the runs' kept consoles are read in one
	// text ("" when none was kept).
	Consoles string    `json:"consoles,omitempty"`
	Jobs     []JobView `json:"jobs,omitempty"`
	// Judgement is the statistics' judgement the verdict and the reply
	// rest on, as stored; MetricTable is it as the reply's table.
	Judgement   *reports.Judgement `json:"judgement,omitempty"`
	MetricTable *JudgementView     `json:"-"`
	Medians     []MetricMedian     `json:"medians,omitempty"`
	// Charts draw every boot's value of each metric, base beside
	// patched: the spread a verdict was decided on.
	Charts []BootChart `json:"-"`
	// Reproducer is the reproducer's download and its files, each
	// readable alone (the series as applied, the .config, run.sh).
	Reproducer *ReproducerView `json:"reproducer,omitempty"`
	// Bisection is the test of the series' prefixes for the first bad
	// patch (bot.series_bisect), when one ran.
	Bisection *store.Bisection `json:"bisection,omitempty"`
	// FixOf is the reported test this one reran with the series as its
	// fix (a fix follow-up); Fixes are the follow-ups of this one.
	FixOf *FixLink  `json:"fix_of,omitempty"`
	Fixes []FixLink `json:"fixes,omitempty"`
	// Replies are the outbox's entries for the series version: the
	// reply (mail or comment) and each patch's checks, with their state.
	Replies []ReplyView `json:"replies,omitempty"`
	// Disputes are maintainers' "#rdmabot invalid" and "dup" replies to
	// the report.
	Disputes []store.Dispute `json:"disputes,omitempty"`
}

// FixLink is one side of a fix follow-up: a test, and whether the fix's
// rerun confirmed the reported failure gone.
type FixLink struct {
	ID        int64  `json:"id"`
	Subject   string `json:"subject"`
	Verdict   string `json:"verdict"`
	Confirmed bool   `json:"confirmed"`
}

// fixLinks fills a test's fix follow-ups, both ways.
func (s *Server) fixLinks(ctx context.Context, v *TestView) error {
	if v.Test.FixOf != 0 {
		orig, err := s.st.Test(ctx, s.st.DB, v.Test.FixOf)
		if err != nil {
			return err
		}
		v.FixOf = &FixLink{ID: orig.ID, Subject: s.subject(ctx, orig), Verdict: orig.Verdict.String(),
			Confirmed: v.Test.State == store.StateDone && flow.Fixed(v.Test.Verdict)}
	}
	fixes, err := s.st.FixesOf(ctx, s.st.DB, v.Test.ID)
	if err != nil {
		return err
	}
	for _, f := range fixes {
		v.Fixes = append(v.Fixes, FixLink{ID: f.ID, Subject: s.subject(ctx, f), Verdict: f.Verdict.String(), Confirmed: f.State == store.StateDone && flow.Fixed(f.Verdict)})
	}
	return nil
}

// ConfirmedFix is the first follow-up that confirmed a test's failure
// fixed (nil: none did).
func (v TestView) ConfirmedFix() *FixLink {
	for i := range v.Fixes {
		if v.Fixes[i].Confirmed {
			return &v.Fixes[i]
		}
	}
	return nil
}

// ReplyView is one outbox entry as a test's page shows it.
type ReplyView struct {
	Channel  string    `json:"channel"`
	Outcome  string    `json:"outcome"`
	State    string    `json:"state"`
	Reason   string    `json:"reason,omitempty"`
	Attempts int       `json:"attempts"`
	Created  time.Time `json:"created"`
	Sent     time.Time `json:"sent,omitzero"`
	// Text is a mail's or comment's text (not a check's payload).
	Text string `json:"-"`
}

// ReproducerView links a test's reproducer bundle and its files.
type ReproducerView struct {
	URL   string   `json:"url"`
	Files []string `json:"files"`
}

// PatchView is one patch of a tested series.
type PatchView struct {
	Subject   string `json:"subject"`
	MessageID string `json:"message_id"`
}

// BootChart is one metric's per-boot values as inline SVG.
type BootChart struct {
	Metric string
	SVG    template.HTML
}

// JobView is one job of a test, with its trace.
type JobView struct {
	ID      int64    `json:"id"`
	Kind    string   `json:"kind"`
	State   string   `json:"state"`
	Attempt int      `json:"attempt"`
	Errors  []string `json:"errors,omitempty"`
	// Took is the last attempt's wall time, for the per-stage breakdown.
	Took     float64           `json:"took_s"`
	Trace    []store.TraceLine `json:"-"`
	TraceURL string            `json:"trace_url"`
}

// MetricMedian compares a metric's medians.
type MetricMedian struct {
	Metric    string  `json:"metric"`
	Base      float64 `json:"base"`
	Candidate float64 `json:"candidate"`
	Change    float64 `json:"change"`
}

// tests are the newest tests, each with its series' subject, version,
// author and list (one read of the series).
func (s *Server) tests(ctx context.Context) ([]TestView, error) {
	ts, err := s.st.Tests(ctx, s.st.DB, 200)
	if err != nil {
		return nil, err
	}
	out := make([]TestView, 0, len(ts))
	for _, t := range ts {
		v := TestView{Test: t, Subject: s.subject(ctx, t)}
		if t.SeriesID != 0 {
			if row, err := s.st.Series(ctx, s.st.DB, t.SeriesID); err == nil {
				v.Subject, v.Version, v.Author, v.List = row.Subject, row.Version, row.Author, row.MailList()
			}
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *Server) subject(ctx context.Context, t store.Test) string {
	if t.SeriesID != 0 {
		if sr, err := s.st.Series(ctx, s.st.DB, t.SeriesID); err == nil {
			return sr.Subject
		}
	}
	if t.Ref != "" {
		return t.Tree + " " + t.Ref
	}
	return t.Tree
}

func (s *Server) testView(ctx context.Context, id int64) (TestView, error) {
	t, err := s.st.Test(ctx, s.st.DB, id)
	if err != nil {
		return TestView{}, err
	}
	v := TestView{Test: t}
	if v.Disputes, err = s.st.Disputes(ctx, s.st.DB, id); err != nil {
		return v, err
	}
	if t.SeriesID != 0 {
		if err := s.seriesView(ctx, &v); err != nil {
			return v, err
		}
	} else {
		v.Subject = s.subject(ctx, t)
	}
	v.Judgement, v.MetricTable = judgementView(t.Detail)
	if v.Runs, err = s.st.Runs(ctx, s.st.DB, id); err != nil {
		return v, err
	}
	if bis, ok, err := s.st.BisectionOfTest(ctx, s.st.DB, id); err != nil {
		return v, err
	} else if ok {
		v.Bisection = &bis
	}
	if err := s.fixLinks(ctx, &v); err != nil {
		return v, err
	}
	if s.Reproducer != nil && t.SeriesID != 0 && t.Base != "" {
		v.Reproducer = s.reproducerView(ctx, id)
	}
	bootsView(&v)
	if v.Jobs, err = s.jobViews(ctx, id); err != nil {
		return v, err
	}
	return v, nil
}

// seriesView fills what a series test's page shows of its series: one
// read of the row gives the subject, link and patches; the outbox, the
// replies to its thread.
func (s *Server) seriesView(ctx context.Context, v *TestView) error {
	row, err := s.st.Series(ctx, s.st.DB, v.SeriesID)
	if err != nil {
		return err
	}
	v.Subject, v.Link, v.Patches = row.Subject, row.Link, patches(row.Data)
	thread, version, ok := threadOf(row.Data)
	if !ok || s.Replies == nil {
		return nil
	}
	es, err := s.Replies.ForThread(ctx, thread, version)
	if err != nil {
		return err
	}
	for _, e := range es {
		rv := ReplyView{Channel: e.Channel, Outcome: e.Outcome, State: string(e.State), Reason: e.Reason,
			Attempts: e.Attempts, Created: e.Created, Sent: e.SentAt}
		if !strings.HasPrefix(e.Channel, "patchwork") {
			rv.Text = string(e.Raw)
		}
		v.Replies = append(v.Replies, rv)
	}
	return nil
}

// reproducerView lists a test's reproducer files, nil when it has none:
// the page still shows the rest, and the download says why.
func (s *Server) reproducerView(ctx context.Context, id int64) *ReproducerView {
	b, err := s.Reproducer.Bundle(ctx, id)
	if err != nil {
		s.log.Warn("dashboard: reproducer", "test", id, "err", err)
		return nil
	}
	rv := &ReproducerView{URL: fmt.Sprintf("/tests/%d/reproducer.tar.gz", id)}
	for _, f := range b.Files {
		rv.Files = append(rv.Files, f.Name)
	}
	return rv
}

// bootsView fills the medians, charts and consoles link of v's boots.
func bootsView(v *TestView) {
	base, cand := map[string][]float64{}, map[string][]float64{}
	for _, r := range v.Runs {
		dst := cand
		if r.Role == "base" {
			dst = base
		}
		for _, smp := range r.Samples {
			// A lossy boot's figures are not the default link's.
			for k, x := range smp.Metrics {
				if smp.Profile == "" {
					dst[k] = append(dst[k], x)
				}
			}
			if len(smp.Consoles) > 0 {
				v.Consoles = fmt.Sprintf("/tests/%d/consoles", v.ID)
			}
		}
	}
	for k, c := range cand {
		m := MetricMedian{Metric: k, Base: median(base[k]), Candidate: median(c)}
		if m.Base != 0 {
			m.Change = m.Candidate/m.Base - 1
		}
		v.Medians = append(v.Medians, m)
	}
	sort.Slice(v.Medians, func(i, j int) bool { return v.Medians[i].Metric < v.Medians[j].Metric })
	for _, m := range v.Medians {
		v.Charts = append(v.Charts, BootChart{Metric: m.Metric, SVG: bootChart(m.Metric, base[m.Metric], cand[m.Metric])})
	}
}

// jobViews are a test's jobs with their errors and traces.
func (s *Server) jobViews(ctx context.Context, id int64) ([]JobView, error) {
	jobs, err := s.jobs.JobsOfTest(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []JobView
	for _, j := range jobs {
		jv := JobView{ID: j.ID, Kind: j.Kind, State: string(j.State), Attempt: j.Attempt, TraceURL: fmt.Sprintf("/jobs/%d/trace", j.ID)}
		if j.AttemptedAt != nil && j.FinalizedAt != nil {
			jv.Took = j.FinalizedAt.Sub(*j.AttemptedAt).Seconds()
		}
		for _, e := range j.Errors {
			jv.Errors = append(jv.Errors, fmt.Sprintf("attempt %d: %s", e.Attempt, e.Error))
		}
		if jv.Trace, err = s.st.Trace(ctx, j.ID); err != nil {
			return nil, err
		}
		out = append(out, jv)
	}
	return out, nil
}

// patches lists a stored series' patches (its JSON) by subject and
// Message-ID. A row that does not decode is said so, not failed: the
// page still shows the rest.
func patches(data []byte) []PatchView {
	var sr flow.Series
	if err := json.Unmarshal(data, &sr); err != nil {
		return []PatchView{{Subject: fmt.Sprintf("patches unreadable: %v", err)}}
	}
	var out []PatchView
	for i, m := range sr.Patches {
		if m == nil {
			out = append(out, PatchView{Subject: fmt.Sprintf("patch %d: missing", i+1)})
			continue
		}
		out = append(out, PatchView{Subject: m.Subject, MessageID: m.MessageID})
	}
	return out
}

// bootChart draws each boot's value of a metric as a dot, the base's in
// the left column and the patched kernel's in the right, each with its
// median as a bar: how far apart the two kernels were, and how noisy.
func bootChart(metric string, base, cand []float64) template.HTML {
	const w, h, pad = 420.0, 200.0, 30.0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range append(append([]float64(nil), base...), cand...) {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	if math.IsInf(lo, 0) {
		return ""
	}
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	y := func(v float64) float64 { return h - pad - (v-lo)/(hi-lo)*(h-2*pad) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s per boot">`,
		w, h, w, h, template.HTMLEscapeString(metric))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%.0f" height="%.0f" fill="#fff" stroke="#ccc"/>`, w, h)
	fmt.Fprintf(&b, `<text x="4" y="%.0f" font-size="11">%.2f</text><text x="4" y="%.0f" font-size="11">%.2f</text>`, y(hi)+4, hi, y(lo)+4, lo)
	for i, col := range []struct {
		name  string
		vals  []float64
		color string
	}{{"base", base, "#36c"}, {"patched", cand, "#c60"}} {
		cx := w * float64(1+2*i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="12" text-anchor="middle">%s (%d boots)</text>`, cx, h-8, col.name, len(col.vals))
		if len(col.vals) == 0 {
			continue
		}
		med := median(col.vals)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"><title>%s median %.2f</title></line>`,
			cx-60, y(med), cx+60, y(med), col.color, col.name, med)
		for j, x := range col.vals {
			// Spread the dots sideways by boot so equal values stay apart.
			dx := (float64(j%9) - 4) * 10
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s" fill-opacity="0.7"><title>%s boot %d: %.2f</title></circle>`,
				cx+dx, y(x), col.color, col.name, j+1, x)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	ts, err := s.tests(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	bs, err := s.st.Bisections(r.Context(), 50)
	if err != nil {
		s.fail(w, err)
		return
	}
	hs, err := s.st.Healths(r.Context(), s.st.DB)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, r, "index.html", map[string]any{"Index": s.indexView(r, ts), "Bisections": bs, "Sources": hs})
}

// threadOf is what a series' replies are keyed by in the outbox: its
// root message's Message-ID (Series.RootMail, as the reply answers it) and
// its version.
func threadOf(data []byte) (string, int, bool) {
	var ser flow.Series
	if json.Unmarshal(data, &ser) != nil {
		return "", 0, false
	}
	root := ser.RootMail()
	if root == nil {
		return "", 0, false
	}
	return root.MessageID, max(ser.Version, 1), true
}

// ReportState is one state of the regressions and crashes page: the
// tests whose reply is in it.
type ReportState struct {
	State, Meaning string
	Tests          []TestView
}

// replyState is where a test's reply is: the state of its mail or
// comment in the outbox, "none" when none was queued.
func (s *Server) replyState(ctx context.Context, t store.Test) (string, error) {
	if s.Replies == nil || t.SeriesID == 0 {
		return "none", nil
	}
	row, err := s.st.Series(ctx, s.st.DB, t.SeriesID)
	if err != nil {
		return "", err
	}
	thread, version, ok := threadOf(row.Data)
	if !ok {
		return "none", nil
	}
	es, err := s.Replies.ForThread(ctx, thread, version)
	if err != nil {
		return "", err
	}
	for _, e := range es {
		if !strings.HasPrefix(e.Channel, "patchwork") {
			return string(e.State), nil
		}
	}
	return "none", nil
}

// reportsByState lists the regressions, crashes and build failures by
// where their reply is: a maintainer's triage (what waits for approval,
// what went out, what failed to).
func (s *Server) reportsByState(w http.ResponseWriter, r *http.Request) {
	ts, err := s.tests(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	groups := []ReportState{
		{State: "held", Meaning: "held for an operator's approval (rdmabot outbox approve)"},
		{State: "ready", Meaning: "approved, waiting to be sent (mail off, or a daily limit)"},
		{State: "sending", Meaning: "handed to the wire, not confirmed"},
		{State: "failed", Meaning: "failed to send: an operator must look"},
		{State: "sent", Meaning: "sent"},
		{State: "suppressed", Meaning: "recorded, never sent (opt-out)"},
		{State: "none", Meaning: "no reply queued"},
		{State: "fixed", Meaning: "closed: a later series' Closes: named the reply, and rerunning the test with it confirmed the failure gone"},
		{State: "disputed", Meaning: "a maintainer called the report invalid or a duplicate (#rdmabot invalid, #rdmabot dup)"},
	}
	var crashes []CrashGroup
	for _, t := range ts {
		if !t.Verdict.Failing() {
			continue
		}
		if t.Verdict == flow.Crash {
			crashes = addCrash(crashes, t)
		}
		if err := s.fixLinks(r.Context(), &t); err != nil {
			s.fail(w, err)
			return
		}
		st, err := s.replyState(r.Context(), t.Test)
		if err != nil {
			s.fail(w, err)
			return
		}
		ds, err := s.st.Disputes(r.Context(), s.st.DB, t.ID)
		if err != nil {
			s.fail(w, err)
			return
		}
		switch {
		case t.ConfirmedFix() != nil:
			st = "fixed"
		case len(ds) > 0:
			st = "disputed"
		}
		for i := range groups {
			if groups[i].State == st {
				groups[i].Tests = append(groups[i].Tests, t)
			}
		}
	}
	s.render(w, r, "reports.html", ReportsView{States: groups, Crashes: crashes})
}

// ReportsView is the regressions and crashes page: the failing tests by
// where their reply is, and the crashes by title.
type ReportsView struct {
	States  []ReportState
	Crashes []CrashGroup
}

// CrashGroup is the tests whose kernel crashed with one title (the
// crash the stored judgement names, else the summary's first line):
// one bug met by several series or versions.
type CrashGroup struct {
	Title string
	Tests []TestView
}

// addCrash puts a CRASH test into the group of its title (tests come
// newest first, so groups are in order of their newest crash).
func addCrash(groups []CrashGroup, t TestView) []CrashGroup {
	title, _, _ := strings.Cut(strings.TrimSpace(t.Summary), "\n")
	if j, _ := judgementView(t.Detail); j != nil && j.Crash != nil && j.Crash.Title != "" {
		title = j.Crash.Title
	}
	for i := range groups {
		if groups[i].Title == title {
			groups[i].Tests = append(groups[i].Tests, t)
			return groups
		}
	}
	return append(groups, CrashGroup{Title: title, Tests: []TestView{t}})
}

// ListView is one watched list: its source's health, the series seen
// from it and the replies to it not sent yet.
type ListView struct {
	Name, Address string
	Health        store.Health
	Read          bool // the source was read at least once
	// Lag is how long ago the last good read was: how far behind the
	// list the bot may be.
	Lag     string
	Tests   []TestView
	Pending []ReplyView
}

// lists shows each watched list: last poll, lag since the last good
// read, the failing source's error, its series and its pending replies.
func (s *Server) lists(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	names := make([]string, 0, len(s.Lists))
	for n := range s.Lists {
		names = append(names, n)
	}
	sort.Strings(names)
	ts, err := s.tests(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	var pending []*outbox.Entry
	if s.Replies != nil {
		if pending, err = s.Replies.List(ctx, outbox.Held, outbox.Ready, outbox.Sending, outbox.Failed); err != nil {
			s.fail(w, err)
			return
		}
	}
	var out []ListView
	for _, n := range names {
		lv := ListView{Name: n, Address: s.Lists[n]}
		if lv.Health, lv.Read, err = s.st.HealthOf(ctx, s.st.DB, "list", n); err != nil {
			s.fail(w, err)
			return
		}
		if !lv.Health.LastOK.IsZero() {
			lv.Lag = time.Since(lv.Health.LastOK).Round(time.Second).String()
		}
		for _, t := range ts {
			if t.List != "" && lv.Address != "" && strings.EqualFold(t.List, lv.Address) {
				lv.Tests = append(lv.Tests, t)
			}
		}
		for _, e := range pending {
			for _, l := range e.Lists {
				if strings.EqualFold(l, lv.Address) {
					lv.Pending = append(lv.Pending, ReplyView{Channel: e.Channel, Outcome: e.Outcome, State: string(e.State),
						Reason: e.Reason, Attempts: e.Attempts, Created: e.Created})
				}
			}
		}
		out = append(out, lv)
	}
	s.render(w, r, "lists.html", out)
}

func (s *Server) trace(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	lines, err := s.st.Trace(r.Context(), id)
	if err != nil {
		s.fail(w, err)
		return
	}
	if len(lines) == 0 {
		http.Error(w, "no trace for this job", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	for _, l := range lines {
		fmt.Fprintf(w, "%s %s\n", l.At.Format("15:04:05.000"), l.Line)
	}
}

// BisectView is a bisection with its progress.
type BisectView struct {
	store.Bisection
	Steps []flow.BisectStep `json:"steps"`
}

func (s *Server) bisectView(ctx context.Context, id int64) (BisectView, error) {
	b, err := s.st.Bisection(ctx, s.st.DB, id)
	if err != nil {
		return BisectView{}, err
	}
	steps, err := s.st.BisectSteps(ctx, s.st.DB, id)
	return BisectView{Bisection: b, Steps: steps}, err
}

// Chart is one metric's history on one branch, drawn as inline SVG.
type Chart struct {
	Tree, Branch, Metric string
	SVG                  template.HTML
	Points               []ChartPoint
}

// ChartPoint is one tested head.
type ChartPoint struct {
	Commit string              `json:"commit"`
	State  store.MainlineState `json:"state"`
	Value  float64             `json:"value"`
	At     time.Time           `json:"at"`
}

// charts are the mainline history's charts, and how many heads each
// branch (tree, branch) has in it, measured or not.
func (s *Server) charts(ctx context.Context) ([]Chart, map[[2]string]int, error) {
	hist, err := s.st.MainlineHistory(ctx, s.st.DB, "", "")
	if err != nil {
		return nil, nil, err
	}
	byKey := map[[3]string][]ChartPoint{}
	heads := map[[2]string]int{}
	var keys [][3]string
	for _, h := range hist {
		heads[[2]string{h.Tree, h.Branch}]++
		var m map[string]float64
		json.Unmarshal([]byte(h.Metrics), &m)
		for metric, v := range m {
			k := [3]string{h.Tree, h.Branch, metric}
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], ChartPoint{Commit: h.Commit, State: h.State, Value: v, At: h.CreatedAt})
		}
	}
	sort.Slice(keys, func(i, j int) bool { return strings.Join(keys[i][:], "\x00") < strings.Join(keys[j][:], "\x00") })
	var out []Chart
	for _, k := range keys {
		pts := byKey[k]
		out = append(out, Chart{Tree: k[0], Branch: k[1], Metric: k[2], Points: pts, SVG: svgChart(k[2], pts)})
	}
	return out, heads, nil
}

// unitOf is a lab figure's unit, which the lab names it by (lab's
// Figures: write_MBps, loop_s); "" when the name says none.
func unitOf(metric string) string {
	switch {
	case strings.HasSuffix(metric, "_MBps"):
		return "MB/s"
	case strings.HasSuffix(metric, "_s"):
		return "s"
	}
	return ""
}

// bandHeads is how many recent heads the noise band is drawn from.
const bandHeads = 10

// Band is the spread of a branch's recent heads that were not bad: the
// noise a new head is measured against.
type Band struct {
	Mean, SD float64
	Heads    int
}

// band is the mean ± sd of the last bandHeads heads that were not bad
// (nil with fewer than two: no spread to show).
func band(pts []ChartPoint) *Band {
	var vals []float64
	for i := len(pts) - 1; i >= 0 && len(vals) < bandHeads; i-- {
		if pts[i].State == store.MainlineGood {
			vals = append(vals, pts[i].Value)
		}
	}
	if len(vals) < 2 {
		return nil
	}
	m, sd := stats.MeanStd(vals)
	return &Band{Mean: m, SD: sd, Heads: len(vals)}
}

// niceStep is the smallest 1, 2 or 5 times a power of ten at least x.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// svgChart draws a branch's heads left to right on an axis from zero,
// in the metric's unit: a change is as tall as it is large, so the
// boot-to-boot noise of a few percent stays a ripple. The recent good
// heads' mean ± sd is the shaded band, labelled. Bad heads are red.
func svgChart(metric string, pts []ChartPoint) template.HTML {
	const w, h, left, right, top, bottom = 640.0, 220.0, 70.0, 20.0, 24.0, 24.0
	hi := 0.0
	for _, p := range pts {
		hi = math.Max(hi, p.Value)
	}
	step := niceStep(hi * 1.05 / 4)
	hi = step * math.Ceil(hi*1.05/step)
	if hi <= 0 {
		hi, step = 4, 1
	}
	unit := unitOf(metric)
	label := func(v float64) string {
		return strings.TrimSpace(strconv.FormatFloat(v, 'f', -1, 64) + " " + unit)
	}
	x := func(i int) float64 {
		if len(pts) == 1 {
			return (left + w - right) / 2
		}
		return left + float64(i)*(w-left-right)/float64(len(pts)-1)
	}
	y := func(v float64) float64 { return h - bottom - v/hi*(h-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`, w, h, w, h, template.HTMLEscapeString(metric))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%.0f" height="%.0f" fill="#fff" stroke="#ccc"/>`, w, h)
	for v := 0.0; v <= hi+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" font-size="11" text-anchor="end">%s</text>`,
			left, y(v), w-right, y(v), left-4, y(v)+4, template.HTMLEscapeString(label(v)))
	}
	axis := metric
	if unit != "" {
		axis += " (" + unit + ")"
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="14" font-size="11">%s</text>`, left, template.HTMLEscapeString(axis))
	if bd := band(pts); bd != nil {
		lo, top := math.Max(bd.Mean-bd.SD, 0), bd.Mean+bd.SD
		pct := ""
		if bd.Mean != 0 {
			pct = fmt.Sprintf(" (±%.1f%%)", 100*bd.SD/bd.Mean)
		}
		text := fmt.Sprintf("last %d good heads: %.2f ± %.2f %s%s", bd.Heads, bd.Mean, bd.SD, unit, pct)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.0f" height="%.1f" fill="#36c" fill-opacity="0.15"><title>%s</title></rect>`,
			left, y(top), w-left-right, math.Max(y(lo)-y(top), 1), template.HTMLEscapeString(text))
		fmt.Fprintf(&b, `<text x="%.0f" y="14" font-size="11" text-anchor="end" fill="#36c">band: %s</text>`, w-right, template.HTMLEscapeString(text))
	}
	var poly []string
	for i, p := range pts {
		poly = append(poly, fmt.Sprintf("%.1f,%.1f", x(i), y(p.Value)))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#36c" stroke-width="2" points="%s"/>`, strings.Join(poly, " "))
	for i, p := range pts {
		color := "#36c"
		if p.State == store.MainlineBad {
			color = "#c33"
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s %s %s (%s)</title></circle>`,
			x(i), y(p.Value), color, template.HTMLEscapeString(p.Commit[:min(12, len(p.Commit))]), template.HTMLEscapeString(metric),
			template.HTMLEscapeString(strings.TrimSpace(fmt.Sprintf("%.2f %s", p.Value, unit))), p.State)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// MainlineView is the mainline page: each scheduled or tested branch
// with what is happening to it now, then the charts.
type MainlineView struct {
	Branches []BranchNow
	Charts   []Chart
}

// BranchNow is one branch of the mainline schedule: its next cron runs
// and the jobs not finished for it (the mainline job reading its head,
// the jobs of a head's test), so that a job failing and being retried is
// seen before any head is tested.
type BranchNow struct {
	Tree, Branch string
	Next         []bot.Schedule
	Jobs         []NowJob
	Tested       int // heads in the history
}

// branches gathers each branch from the schedules, the jobs and the
// history (heads per branch), in that order of first mention.
func branches(now NowView, heads map[[2]string]int) []BranchNow {
	var out []BranchNow
	at := func(tree, branch string) *BranchNow {
		for i := range out {
			if out[i].Tree == tree && out[i].Branch == branch {
				return &out[i]
			}
		}
		out = append(out, BranchNow{Tree: tree, Branch: branch})
		return &out[len(out)-1]
	}
	for _, n := range now.Next {
		if n.Tree != "" {
			b := at(n.Tree, n.Branch)
			b.Next = append(b.Next, n)
		}
	}
	for _, j := range append(append([]NowJob(nil), now.Running...), now.Waiting...) {
		if j.Tree != "" {
			b := at(j.Tree, j.Branch)
			b.Jobs = append(b.Jobs, j)
		}
	}
	keys := make([][2]string, 0, len(heads))
	for k := range heads {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"\x00"+keys[i][1] < keys[j][0]+"\x00"+keys[j][1] })
	for _, k := range keys {
		at(k[0], k[1]).Tested = heads[k]
	}
	return out
}

func (s *Server) mainline(w http.ResponseWriter, r *http.Request) {
	charts, heads, err := s.charts(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	now := s.now(r.Context())
	s.renderNow(w, now, "mainline.html", MainlineView{Branches: branches(now, heads), Charts: charts})
}

// CanaryView is the A/A canary page: the false alarms per metric over
// the window (and which are muted), and every comparison.
type CanaryView struct {
	Rates       []bot.FalseAlarms
	Comparisons []store.Canary
	// Lab is the A/A comparisons `rdmabot lab aa` stored (nil: none read).
	Lab *AAView
}

func (s *Server) canary(w http.ResponseWriter, r *http.Request) {
	rates, cs, err := s.jobs.FalseAlarmRates(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, r, "canary.html", CanaryView{Rates: rates, Comparisons: cs, Lab: s.aaView(r.Context())})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func (s *Server) apiTests(w http.ResponseWriter, r *http.Request) {
	ts, err := s.tests(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	ts = s.filtered(ts, filterOf(r.URL.Query()))
	if ts == nil {
		ts = []TestView{}
	}
	writeJSON(w, ts)
}

func (s *Server) apiMainline(w http.ResponseWriter, r *http.Request) {
	charts, _, err := s.charts(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	type series struct {
		Tree   string       `json:"tree"`
		Branch string       `json:"branch"`
		Metric string       `json:"metric"`
		Points []ChartPoint `json:"points"`
	}
	out := []series{}
	for _, c := range charts {
		out = append(out, series{c.Tree, c.Branch, c.Metric, c.Points})
	}
	writeJSON(w, out)
}

// acceptsGzip says whether r's Accept-Encoding takes gzip (named, with
// a q above 0).
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(coding, ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			q := 1.0
			if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
				q, _ = strconv.ParseFloat(v, 64) // unreadable: not taken
			}
			return q > 0
		}
	}
	return false
}

// gzipText writes text as a gzip member of its own.
func gzipText(w io.Writer, text string) {
	gz := gzip.NewWriter(w)
	io.WriteString(gz, text)
	gz.Close()
}

// endWriter passes writes on and remembers whether the last byte was a
// newline (an empty text counts as ending in one).
type endWriter struct {
	w       io.Writer
	newline bool
}

func (e *endWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		e.newline = p[len(p)-1] == '\n'
	}
	return e.w.Write(p)
}
