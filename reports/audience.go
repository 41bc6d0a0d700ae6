package reports

import (
	"fmt"

	"github.com/rdmabot/rdmabot/flow"
)

// Audience is who is mailed a verdict.
type Audience int

const (
	// Nobody: the verdict stays on the dashboard (and in patchwork's
	// checks and a GitHub comment, which are asked for where they go).
	Nobody Audience = iota
	// Asker: the one who asked by mail ("#rdmabot test", "#rdmabot
	// retest"), in reply to the command, with no list, maintainer or
	// other recipient of the posting in Cc (reports.archive_list aside):
	// no list's daily replies are spent on it.
	Asker
	// InThread: the series' author, its lists and maintainers, in its
	// thread.
	InThread
)

func (a Audience) String() string {
	switch a {
	case Asker:
		return "the one who asked"
	case InThread:
		return "the series' thread"
	}
	return "nobody (dashboard only)"
}

// Occasion is what about a verdict decides who hears of it.
type Occasion struct {
	// GuessedBase: the author named no base and none could be read from
	// the patches' blobs, so the bot took a default branch; a patch that
	// does not apply there may be the guess's fault.
	GuessedBase bool
	// Asked: a "#rdmabot test" mail asked for this test.
	Asked bool
	// ClosesReport: the series is a fix that names one of the bot's
	// reports (Closes:), so its author waits for the answer.
	ClosesReport bool
	// Unconfirmed: the verdict rests on a crash or stall seen in one
	// boot only (Crash.Confirmed): no evidence to mail a list.
	Unconfirmed bool
}

// Audience decides who is mailed a verdict. An answer someone asked for
// ("#rdmabot test", "#rdmabot retest") goes to the one who asked alone,
// whatever it found: the thread heard of the series from its own test,
// and a command must not reach, nor spend the daily replies of, a list
// (a throwaway mailbox's retests would silence it for a day). Else a
// list hears only of what a maintainer must act on
// (reports.mail_outcomes); a pass is quiet unless it confirms a fix of
// the bot's own report; a patch that does not apply to a guessed base is
// the guess's problem before it is the author's.
func (c *Config) Audience(o flow.Outcome, on Occasion) Audience {
	switch {
	case !Mailed(o) || o == flow.Incomplete || o == flow.Refused:
		return Nobody // notices have their own addressing
	case on.Asked:
		return Asker
	case o == flow.ApplyFailed && on.GuessedBase, on.Unconfirmed:
		return Nobody
	case on.ClosesReport, c.mailsOutcome(o):
		return InThread
	}
	return Nobody
}

func (c *Config) mailsOutcome(o flow.Outcome) bool {
	for _, s := range c.MailOutcomes {
		if s == o.String() {
			return true
		}
	}
	return false
}

// DefaultMailOutcomes are the verdicts a maintainer must act on.
func DefaultMailOutcomes() []string {
	return []string{flow.Regression.String(), flow.Crash.String(), flow.BootFailed.String(), flow.DataCorruption.String(),
		flow.BuildFailed.String(), flow.ApplyFailed.String()}
}

func validateMailOutcomes(v []string) error {
	for _, s := range v {
		o, err := flow.ParseOutcome(s)
		if err != nil {
			return fmt.Errorf("reports.mail_outcomes: %w", err)
		}
		if !Mailed(o) || o == flow.Incomplete || o == flow.Refused {
			return fmt.Errorf("reports.mail_outcomes: %s is never a verdict mailed to a thread", s)
		}
	}
	return nil
}
