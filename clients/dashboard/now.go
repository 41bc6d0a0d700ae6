package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
)

// nowJobs bounds the jobs one page reads: the oldest first, so a job
// stuck retrying is never pushed out by the ticks queued after it.
const nowJobs = 200

// NowView is what the bot is doing: the jobs running and waiting (to
// run, for their time, to be retried), who holds each lab pair, and
// when the periodic jobs run next. Every page shows it as a strip and
// /api/now as JSON.
type NowView struct {
	At      time.Time      `json:"at"`
	Running []NowJob       `json:"running"`
	Waiting []NowJob       `json:"waiting"`
	Leases  []LeaseView    `json:"leases"`
	Next    []bot.Schedule `json:"next"`
	// Err says what could not be read; a page shows the rest.
	Err string `json:"error,omitempty"`
}

// NowJob is one job not finished.
type NowJob struct {
	ID    int64  `json:"id"`
	Kind  string `json:"kind"`
	Queue string `json:"queue"`
	// State is River's: running, available (due now), scheduled (due
	// later: a snoozed job waiting for a lab pair, or a tick), retryable
	// (an attempt failed; due again at Since), pending.
	State       string `json:"state"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	// What is what the job works on ("test 12: [PATCH] ..."), Link its
	// page.
	What string `json:"what,omitempty"`
	Link string `json:"link,omitempty"`
	// Subject, MessageID and List name the series a job's test is of:
	// which mail it is about, without opening its page.
	Subject   string `json:"subject,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	List      string `json:"list,omitempty"`
	// Since is when a running job's attempt started, or when a waiting
	// one is due.
	Since time.Time `json:"since"`
	// By is the process a running job's attempt is on.
	By string `json:"by,omitempty"`
	// Tree and Branch are a mainline job's, or those of the mainline
	// head a job's test measures.
	Tree   string `json:"tree,omitempty"`
	Branch string `json:"branch,omitempty"`
	// Errors counts the failed attempts; LastError is the last one's
	// first line: an infrastructure failure being retried shows here.
	Errors    int    `json:"errors,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// Retrying says the job failed before and waits to be tried again.
func (j NowJob) Retrying() bool { return j.State == string(rivertype.JobStateRetryable) }

// LeaseView is one lab pair's lease: the job holding it, since when.
type LeaseView struct {
	Pair    string    `json:"pair"`
	Holder  string    `json:"holder"`
	JobID   int64     `json:"job_id"`
	What    string    `json:"what,omitempty"`
	Link    string    `json:"link,omitempty"`
	Since   time.Time `json:"since"`
	Expires time.Time `json:"expires"`
	// Expired: the holder stopped renewing it (its process died); the
	// next job asking takes the pair.
	Expired bool `json:"expired"`
}

// jobArgs are the fields of every job kind's arguments that say what it
// works on (bot's BaseArgs, LabArgs, ReportArgs, MainlineArgs, BisectArgs,
// CanaryArgs share these names).
type jobArgs struct {
	TestID      int64     `json:"test_id"`
	Round       int       `json:"round"`
	BisectionID int64     `json:"bisection_id"`
	Step        int       `json:"step"`
	Tree        string    `json:"tree"`
	Branch      string    `json:"branch"`
	At          time.Time `json:"at"`
}

// now reads what is happening. What fails to be read is said in Err and
// the rest is still shown.
func (s *Server) now(ctx context.Context) NowView {
	v := NowView{At: s.st.Now(), Running: []NowJob{}, Waiting: []NowJob{}, Leases: []LeaseView{}, Next: []bot.Schedule{}}
	var errs []string
	rows, err := s.jobs.ActiveJobs(ctx, nowJobs)
	if err != nil {
		errs = append(errs, "jobs: "+err.Error())
	}
	tests := map[int64]*nowTest{}
	byID := map[int64]NowJob{}
	for _, r := range rows {
		j := s.nowJob(ctx, r, tests)
		byID[j.ID] = j
		if r.State == rivertype.JobStateRunning {
			v.Running = append(v.Running, j)
		} else {
			v.Waiting = append(v.Waiting, j)
		}
	}
	sort.SliceStable(v.Waiting, func(i, k int) bool { return v.Waiting[i].Since.Before(v.Waiting[k].Since) })
	leases, err := s.st.Leases(ctx)
	if err != nil {
		errs = append(errs, "leases: "+err.Error())
	}
	for _, l := range leases {
		lv := LeaseView{Pair: l.Pair, Holder: l.Holder, JobID: l.JobID, Since: l.Acquired, Expires: l.Expires, Expired: !l.Expires.After(v.At)}
		if j, ok := byID[l.JobID]; ok {
			lv.What, lv.Link = j.What, j.Link
		}
		v.Leases = append(v.Leases, lv)
	}
	next, err := s.jobs.Schedules(v.At)
	if err != nil {
		errs = append(errs, "schedules: "+err.Error())
	}
	v.Next = append(v.Next, next...)
	if len(errs) > 0 {
		v.Err = strings.Join(errs, "; ")
		s.log.Warn("dashboard: now", "err", v.Err)
	}
	return v
}

// nowTest is a job's test as the strip names it.
type nowTest struct {
	store.Test
	subject, msgID, list string
}

// nowTestOf reads a test and names it: its series' subject, Message-ID
// and list, or its tree and ref. nil: not found.
func (s *Server) nowTestOf(ctx context.Context, id int64) *nowTest {
	t, err := s.st.Test(ctx, s.st.DB, id)
	if err != nil {
		return nil
	}
	nt := &nowTest{Test: t, subject: s.subject(ctx, t)}
	if t.SeriesID != 0 {
		if row, err := s.st.Series(ctx, s.st.DB, t.SeriesID); err == nil {
			nt.subject, nt.msgID, nt.list = row.Subject, row.MessageID(), row.MailList()
		}
	}
	return nt
}

// nowJob describes a job row; tests caches the tests read within one
// page (nil: not found).
func (s *Server) nowJob(ctx context.Context, r *rivertype.JobRow, tests map[int64]*nowTest) NowJob {
	j := NowJob{ID: r.ID, Kind: r.Kind, Queue: r.Queue, State: string(r.State), Attempt: r.Attempt, MaxAttempts: r.MaxAttempts,
		Since: r.ScheduledAt, Errors: len(r.Errors)}
	if r.State == rivertype.JobStateRunning && r.AttemptedAt != nil {
		j.Since = *r.AttemptedAt
		if n := len(r.AttemptedBy); n > 0 {
			j.By = r.AttemptedBy[n-1]
		}
	}
	if n := len(r.Errors); n > 0 {
		j.LastError, _, _ = strings.Cut(strings.TrimSpace(r.Errors[n-1].Error), "\n")
	}
	if r.Kind == (bot.WarmArgs{}).Kind() {
		j.What = "the default base's kernels (each profile's configuration), built before a series needs them"
		return j
	}
	var a jobArgs
	if json.Unmarshal(r.EncodedArgs, &a) != nil {
		return j
	}
	switch {
	case a.TestID != 0:
		t, ok := tests[a.TestID]
		if !ok {
			t = s.nowTestOf(ctx, a.TestID)
			tests[a.TestID] = t
		}
		j.What, j.Link = fmt.Sprintf("test %d", a.TestID), fmt.Sprintf("/tests/%d", a.TestID)
		if a.Round > 0 {
			j.What += fmt.Sprintf(" round %d", a.Round)
		}
		if t != nil {
			j.What += ": " + t.subject
			if t.msgID != "" {
				j.Subject, j.MessageID, j.List = t.subject, t.msgID, t.list
			}
			if t.Kind == store.KindMainline {
				j.Tree, j.Branch = t.Tree, t.Ref
			}
		}
	case a.BisectionID != 0:
		j.What, j.Link = fmt.Sprintf("bisection %d", a.BisectionID), fmt.Sprintf("/bisect/%d", a.BisectionID)
		if a.Step > 0 {
			j.What += fmt.Sprintf(" step %d", a.Step)
		}
	case a.Tree != "":
		j.What, j.Link = strings.TrimSpace(a.Tree+" "+a.Branch), "/mainline"
		j.Tree, j.Branch = a.Tree, a.Branch
	case !a.At.IsZero():
		j.What, j.Link = "A/A canary of "+a.At.UTC().Format("2006-01-02 15:04"), "/canary"
	}
	return j
}

func (s *Server) apiNow(w http.ResponseWriter, r *http.Request) {
	v := s.now(r.Context())
	if v.Err != "" {
		http.Error(w, v.Err, http.StatusInternalServerError)
		return
	}
	writeJSON(w, v)
}
