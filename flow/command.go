package flow

// Command is a request a person made of the bot, whichever way it came:
// a "/rdmabot" comment on GitHub or a "#rdmabot" line in a reply on a
// list. Each transport keeps its own syntax and decides who sent it;
// the bot acts on every command in one place (bot.Bot.Act).
type Command struct {
	// Verb is one of the Command... verbs. Rows older bots stored
	// leave it empty for a test.
	Verb string `json:"verb,omitempty"`
	// Link is the series a test fetches (a lore link or Message-ID),
	// when the command does not come in the series' own thread.
	Link string `json:"link,omitempty"`
	// Tree names a configured tree: what a test or retest of a series
	// is based on (with Branch, "": its first), what a test of Ref or a
	// bisection runs on.
	Tree   string `json:"tree,omitempty"`
	Branch string `json:"branch,omitempty"`
	Ref    string `json:"ref,omitempty"`
	// Good and Bad are the ends of a bisection.
	Good string `json:"good,omitempty"`
	Bad  string `json:"bad,omitempty"`
	// Profiles are the lab profiles a test asks for beyond those the
	// series' changes choose, run in their larger variants
	// (ProfileFstests: "#rdmabot test fstests").
	Profiles []string `json:"profiles,omitempty"`
	// Note is what a dispute says: why the report is invalid, or the
	// report it repeats.
	Note string `json:"note,omitempty"`
	// Line is the command as written.
	Line string `json:"line"`
	// Refused says why it is not done ("": do it), when its transport
	// decided so: a stranger, an unsigned mail, a line it could not
	// read. The answer says that instead.
	Refused string `json:"refused,omitempty"`

	// A command by mail answers the reply that holds it, in place, and
	// only its sender; each is acted on once, keyed by MsgID.
	MsgID      string   `json:"msgid,omitempty"`
	References []string `json:"references,omitempty"` // the reply's References
	From       string   `json:"from,omitempty"`       // its sender's address
	Name       string   `json:"name,omitempty"`       // and name
}

// The command verbs. A transport offers those its syntax has: mail
// test, retest, invalid and dup; GitHub test, retest, bisect and cancel.
const (
	CommandTest   = "test"
	CommandRetest = "retest"
	CommandBisect = "bisect"
	CommandCancel = "cancel"
	// CommandInvalid and CommandDup dispute the bot's report on a
	// series: it is marked so, on the dashboard, not retracted.
	CommandInvalid = "invalid"
	CommandDup     = "dup"
)

// Acted is what the bot did for a command.
type Acted struct {
	// What it made: a test (ActedTest), a bisection, a cancel of a
	// test, a dispute recorded on a test, or a refusal answered as a
	// test of its own (the answer goes the way every reply does).
	What string
	ID   int64 // the test's or the bisection's
	// New is false when the command was acted on before (the same
	// mail, the same comment).
	New bool
}

// What a command made.
const (
	ActedTest      = "test"
	ActedBisection = "bisection"
	ActedCanceled  = "canceled"
	ActedDispute   = "dispute"
	ActedRefused   = "refused"
)

// CommandError is a command the bot cannot do as asked (an unknown tree,
// no test to retest): the asker's to change, never the bot's fault. Its
// text is said to the asker.
type CommandError struct{ Why string }

func (e *CommandError) Error() string { return e.Why }
