package main

import (
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/reports/outbox"
)

// The --json shapes. Their field names are part of the command line
// interface: scripts read them, so they are only ever added to.

// statusJSON is rdmabot status --json.
type statusJSON struct {
	Sources    []store.Health  `json:"sources"`
	Tests      []testJSON      `json:"tests"`
	Bisections []bisectionJSON `json:"bisections"`
	Queues     []queueJSON     `json:"queues"`
	Leases     []leaseJSON     `json:"leases"`
}

type testJSON struct {
	ID        int64     `json:"id"`
	Kind      string    `json:"kind"`
	Tree      string    `json:"tree"`
	Base      string    `json:"base"`
	State     string    `json:"state"`
	Verdict   string    `json:"verdict"`
	Summary   string    `json:"summary"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Series names the series a test is of; absent for a test of a ref,
	// a mainline head or the canary.
	Series *seriesJSON `json:"series,omitempty"`
}

// seriesJSON is which mail a test is about.
type seriesJSON struct {
	Subject   string `json:"subject"`
	MessageID string `json:"message_id"`
	Version   int    `json:"version"`
	List      string `json:"list"`
}

type bisectionJSON struct {
	ID        int64     `json:"id"`
	Tree      string    `json:"tree"`
	Good      string    `json:"good"`
	Bad       string    `json:"bad"`
	State     string    `json:"state"`
	Culprit   string    `json:"culprit"`
	UpdatedAt time.Time `json:"updated_at"`
}

type queueJSON struct {
	Queue string `json:"queue"`
	State string `json:"state"`
	Jobs  int    `json:"jobs"`
}

type leaseJSON struct {
	Pair    string    `json:"pair"`
	Holder  string    `json:"holder"`
	JobID   int64     `json:"job_id"`
	Expires time.Time `json:"expires"`
}

// toTestJSON is a test's row; s is its series (nil: none).
func toTestJSON(t store.Test, s *store.SeriesRow) testJSON {
	out := testJSON{ID: t.ID, Kind: t.Kind, Tree: t.Tree, Base: t.Base, State: string(t.State), Verdict: t.Verdict.String(),
		Summary: t.Summary, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	if s != nil {
		out.Series = &seriesJSON{Subject: s.Subject, MessageID: s.MessageID(), Version: s.Version, List: s.MailList()}
	}
	return out
}

func toBisectionJSON(b store.Bisection) bisectionJSON {
	return bisectionJSON{ID: b.ID, Tree: b.Tree, Good: b.Good, Bad: b.Bad, State: string(b.State), Culprit: b.Culprit, UpdatedAt: b.UpdatedAt}
}

// outboxJSON is one entry of rdmabot outbox list --json.
type outboxJSON struct {
	MessageID string    `json:"message_id"`
	State     string    `json:"state"`
	Created   time.Time `json:"created"`
	Outcome   string    `json:"outcome"`
	Channel   string    `json:"channel"`
	Recipient string    `json:"recipient"`
	Envelope  []string  `json:"envelope"`
	Reason    string    `json:"reason"`
	Attempts  int       `json:"attempts"`
}

func toOutboxJSON(x *outbox.Entry) outboxJSON {
	env := x.Envelope
	if env == nil {
		env = []string{}
	}
	return outboxJSON{MessageID: x.MessageID, State: string(x.State), Created: x.Created, Outcome: x.Outcome,
		Channel: x.Channel, Recipient: x.Recipient, Envelope: env, Reason: x.Reason, Attempts: x.Attempts}
}

// branchJSON is one entry of rdmabot tree list --json.
type branchJSON struct {
	Tree   string `json:"tree"`
	Branch string `json:"branch"`
	Commit string `json:"commit"`
}

func toBranchJSON(b builder.Branch) branchJSON {
	return branchJSON{Tree: b.Tree, Branch: b.Branch, Commit: b.Commit.String()}
}

// configCheckJSON is rdmabot config check --json.
type configCheckJSON struct {
	Path     string   `json:"path"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
}

// testQueuedJSON is rdmabot test --json: the test queued (or the one
// that had the series already) and its page; with --wait, its end.
type testQueuedJSON struct {
	ID   int64     `json:"id"`
	URL  string    `json:"url"`
	Test *testJSON `json:"test,omitempty"`
}

// bisectQueuedJSON is rdmabot bisect --json: the bisection queued, its
// page, and the commits its refs resolved to.
type bisectQueuedJSON struct {
	ID   int64  `json:"id"`
	URL  string `json:"url"`
	Tree string `json:"tree"`
	Good string `json:"good"`
	Bad  string `json:"bad"`
}
