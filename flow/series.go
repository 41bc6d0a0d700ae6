package flow

import "slices"

// Series is a patch series as the bot carries it between stages.
type Series struct {
	MsgID string `json:"msgid"` // cover letter, or first patch when there is none
	// Root is the Message-ID the series' replies answer (the cover
	// letter's, or the first patch's), when MsgID is not it.
	Root    string `json:"root,omitempty"`
	Version int    `json:"version"`
	// Subject is the series' title as lore read it: the cover letter's
	// subject (else the first patch's) without Re:, [PATCH ...] groups
	// and extra blanks, as git am would commit it.
	Subject string `json:"subject"`
	Author  string `json:"author"`
	Link    string `json:"link"`
	List    string `json:"list,omitempty"` // list address the reply goes to
	Tree    string `json:"tree,omitempty"` // the tree the series names, if any
	// Branch is the branch of Tree a command asked for ("": its first).
	Branch string `json:"branch,omitempty"`
	// Patches are its patch mails in order and Cover its cover letter,
	// if any: parsed once, when the series was read off the list.
	Patches []*Message `json:"patches"`
	Cover   *Message   `json:"cover,omitempty"`
	// BaseHint is the commit the series names as its base, as lore read
	// it (b4's "base-commit:" line: 7 to 40 hex digits, lower-cased),
	// "" when none: the builder tests on it when a configured tree
	// holds it.
	BaseHint string `json:"base_hint,omitempty"`
	// Tags are the bracket words of its mails' subjects (cover first,
	// then the patches in order, each once) other than PATCH, RFC,
	// RESEND, vN and n/m, as lore read them: a tree tag among them
	// (rdma-next) may name the base.
	Tags []string `json:"tags,omitempty"`
	// Changes are the files and lines its patches' diffs change, read
	// once with them: what the lab chooses the candidate's side by.
	Changes []Change `json:"changes,omitempty"`
	// Files are the files its diffs name (both names of a rename), each
	// once: whose MAINTAINERS hear of its reply.
	Files []string `json:"files,omitempty"`
	// Incomplete, set by the ingester, says which patches never arrived
	// within the grace period: the series is answered with that, not
	// tested.
	Incomplete string `json:"incomplete,omitempty"`
	// Closes are the Message-IDs its patches' Closes: trailers name.
	// When one is a reply of the bot's that reported a failure, the
	// series is a fix of it and reruns that test (a fix follow-up).
	Closes []string `json:"closes,omitempty"`
	// Fixes are the commits (abbreviated hashes) its patches' Fixes:
	// trailers name: one a mainline bisection of the bot's blamed makes
	// the series a fix of that regression, rerun the same way.
	Fixes []string `json:"fixes,omitempty"`
	// Reviews are other bots' reviews in its thread (Sashiko, 0-day,
	// syzbot) as the lists showed them when last read: a reply links
	// them instead of repeating them.
	Reviews []Review `json:"reviews,omitempty"`
	// Command, set by the ingester, is the command in a reply that
	// brought the series back: a test or a dispute asked for by mail.
	Command *Command `json:"-"`
}

// RootMail is the mail the series' replies answer: its cover letter,
// else its first patch (nil when it has neither).
func (s *Series) RootMail() *Message {
	if s.Cover != nil {
		return s.Cover
	}
	if len(s.Patches) > 0 {
		return s.Patches[0]
	}
	return nil
}

// Mails are its cover letter, if any, and then its patches.
func (s *Series) Mails() []*Message {
	if s.Cover == nil {
		return s.Patches
	}
	return append([]*Message{s.Cover}, s.Patches...)
}

// Base is the commit a series is tested on.
type Base struct {
	Tree   string `json:"tree"`
	Commit string `json:"commit"`
	// Reason says how the base was chosen; every report states it.
	Reason string `json:"reason,omitempty"`
	// Branch of Tree the base is on ("" when found only by id).
	Branch string `json:"branch,omitempty"`
}

// How a series' base was chosen, as a reply says it ("base chosen by
// ..."): who hears of an APPLY_FAILED and what it asks for depend on it.
const (
	BaseByTrailer = "base-commit trailer"
	BaseByBlobs   = "pre-image blob ids"
	BaseByTag     = "subject tree tag"
	BaseByDefault = "default branch"
)

// Origin is where a request came from and where its answer goes.
type Origin struct {
	Kind    string `json:"kind"` // mail, github, cli, mainline
	Repo    string `json:"repo,omitempty"`
	Issue   int    `json:"issue,omitempty"`
	Comment int64  `json:"comment,omitempty"`
	User    string `json:"user,omitempty"`
	// Command is the mail command that asked (Kind "mail"). Its key
	// is "request", as older bots stored it.
	Command *Command `json:"request,omitempty"`
	// Asked are the lab profiles the request asked for (Command.Profiles),
	// by any transport.
	Asked []string `json:"asked,omitempty"`
}

// AskedFor says the request asked for lab profile name.
func (o Origin) AskedFor(name string) bool { return slices.Contains(o.Asked, name) }

// Change is one line a patch changes, or the function a hunk is in (the
// text after a hunk header's second "@@"), with the file it is in.
type Change struct {
	File string
	Text string
	// Context says Text is a hunk's function context, not a change.
	Context bool
}

// Review is another bot's review in a series' thread.
type Review struct {
	By        string `json:"by"` // "Sashiko AI review", "syzbot"
	MessageID string `json:"message_id"`
	// URL is the review's own page, when its mail links one ("": the
	// mail on lore).
	URL string `json:"url,omitempty"`
}
