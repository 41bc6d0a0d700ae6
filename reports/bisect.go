package reports

import (
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// Bisection is the outcome of a bisection as replies describe it.
type Bisection struct {
	// Title is the subject of the new thread, and the comment's heading.
	Title string
	// Scheduled says a mainline run found the regression (else someone
	// asked for the bisection).
	Scheduled    bool
	Tree, Metric string
	// Change is the metric's relative change at Bad (-0.48 = -48 %).
	Change    float64
	Good, Bad string
	Culprit   string
	// CulpritTitle and CulpritAuthor ("Name <addr>") are the culprit
	// commit's subject and author; CulpritSignoffs are the other
	// addresses that signed it off (the maintainers who applied it).
	// Empty when the tree could not say.
	CulpritTitle    string
	CulpritAuthor   string
	CulpritSignoffs []string
	// Confirmed: the culprit failed again, its parent passed again and
	// Bad with it reverted passed. Otherwise Summary says why not.
	Confirmed bool
	Summary   string
	Steps     []BisectStep
	// URL is the bisection's dashboard page.
	URL string
	// Config, Compiler, Lab and Test say how every step was built and
	// measured, as a series reply's lines do ("" lines are left out).
	Config, Compiler, Lab, Test string
	// To are the lists a mailed report goes to.
	To []string
	// Parent is the culprit's parent, and Against the culprit's
	// confirmation boots judged against the parent's as a series' boots
	// are against its base's (Judge): the table of culprit against
	// parent. ParentBoots and CulpritBoots count each side's boots and
	// those that showed Against's crash. nil: nothing was measured.
	Parent                    string
	Against                   *Verdict
	ParentBoots, CulpritBoots BisectBoots
}

// BisectBoots is one side of the table of culprit against parent: its
// confirmation boots, and how many of them showed the crash.
type BisectBoots struct{ Boots, Crashed int }

// BisectStep is one test of the bisection or of its confirmation.
type BisectStep struct {
	N                              int
	Phase, Commit, Outcome, Detail string
}

// confirmations counts the confirmation runs the steps record, for the
// sentence: how often the culprit failed again and its parent passed.
func (b *Bisection) confirmations() (culprit, parent string) {
	n := map[string]int{}
	for _, s := range b.Steps {
		n[s.Phase]++
	}
	return times(n["confirm-culprit"]), times(n["confirm-parent"])
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func (b *Bisection) found(c *Config) string {
	who := botName(c) + " bisected and found"
	if b.Scheduled {
		who = "A scheduled run found"
	}
	what := fmt.Sprintf("%s on %s %+.0f%%", b.Metric, b.Tree, b.Change*100)
	switch b.Metric {
	case flow.MetricCrash:
		what = "a crash on " + b.Tree
	case flow.MetricBuild:
		what = "a build failure on " + b.Tree
	}
	return fmt.Sprintf("%s %s at %s compared with %s", who, what, Short(b.Bad), Short(b.Good))
}

// blames says whether the report names a confirmed culprit whose author
// the tree told: then it goes To that author, with the tags a fix needs.
func (b *Bisection) blames() bool {
	return b.Confirmed && b.Culprit != "" && b.CulpritAuthor != ""
}

// commitRef is a commit as the kernel's Fixes: tag cites it:
// 12 hex digits and the subject in ("").
func (b *Bisection) commitRef() string {
	if b.CulpritTitle == "" {
		return Short(b.Culprit)
	}
	return fmt.Sprintf("%s (\"%s\")", Short(b.Culprit), oneLine(b.CulpritTitle, 2*MaxSubject))
}

// RegressionsList is where regzbot reads the regressions it tracks: a
// confirmed culprit's report Cc's it.
const RegressionsList = "regressions@lists.linux.dev"

// RenderBisection writes the report of a bisection as a new thread. A
// confirmed culprit's author is To, as 0-day does, and the lists, the
// culprit's other sign-offs, regzbot's list and the archive list are Cc,
// with the Reported-by/Closes/Fixes tags and the regzbot lines; without
// a confirmed culprit it goes To the lists (Cc the archive list), which
// the replier mails to no one (the dashboard has it).
func RenderBisection(c *Config, b *Bisection, msgID string, now time.Time) (*Mail, error) {
	if len(b.To) == 0 {
		return nil, fmt.Errorf("no list address to report %s to", b.Title)
	}
	m := &Mail{MessageID: msgID, From: c.From, Subject: oneLine(b.Title, MaxSubject), Date: now, Outcome: flow.Regression}
	seen := map[string]bool{}
	add := func(to *[]string, addr, what string) error {
		a, err := mail.ParseAddress(addr)
		if err != nil {
			return fmt.Errorf("%s address %q: %w", what, addr, err)
		}
		if k := strings.ToLower(a.Address); !seen[k] {
			seen[k] = true
			*to = append(*to, a.String())
		}
		return nil
	}
	lists := &m.To
	if b.blames() {
		if err := add(&m.To, b.CulpritAuthor, "culprit author"); err != nil {
			return nil, err
		}
		lists = &m.Cc
	}
	for _, l := range b.To {
		if err := add(lists, l, "list"); err != nil {
			return nil, err
		}
	}
	if b.blames() {
		for _, s := range b.CulpritSignoffs {
			// A malformed sign-off in the tree costs its Cc, not the report.
			_ = add(&m.Cc, s, "sign-off")
		}
		// regzbot reads this list: the #regzbot lines below reach it.
		if err := add(&m.Cc, RegressionsList, "regressions list"); err != nil {
			return nil, err
		}
	}
	// The archive list, so the report has a lore URL too; never a list
	// the report is already To.
	cc, err := listCc(c, nil, "")
	if err != nil {
		return nil, err
	}
	for _, a := range cc {
		if !slices.Contains(m.To, a) && !slices.Contains(m.Cc, a) {
			m.Cc = append(m.Cc, a)
		}
	}
	var body strings.Builder
	if b.Confirmed {
		cul, par := b.confirmations()
		fmt.Fprintf(&body, "%s.\n\n", b.found(c))
		if b.blames() {
			fmt.Fprintf(&body, "commit: %s\nauthor: %s\n\n", b.commitRef(), b.CulpritAuthor)
		}
		fmt.Fprintf(&body, "The first bad commit is %s.\nConfirmed: it fails again (%s), its parent passes again (%s), and %s with it reverted passes.\n\n",
			b.Culprit, cul, par, Short(b.Bad))
		if b.blames() {
			body.WriteString("If you fix the issue in a separate patch/commit (i.e. not just a new version of the same patch/commit), kindly add the following tags:\n")
			fmt.Fprintf(&body, "| Reported-by: %s\n| Closes: %s\n| Fixes: %s\n\n", c.From, c.CloseURL(msgID), b.commitRef())
			// regzbot tracks the regression from this line on.
			fmt.Fprintf(&body, "#regzbot introduced: %s\n#regzbot title: %s\n\n", Short(b.Culprit), oneLine(b.Title, MaxSubject))
		}
	} else {
		fmt.Fprintf(&body, "%s, but no culprit was confirmed:\n%s\n\n", b.found(c), b.Summary)
	}
	body.WriteString(b.setup())
	body.WriteString(b.against(c, false))
	fmt.Fprintf(&body, "good: %s\nbad:  %s\n\nsteps:\n", b.Good, b.Bad)
	for _, s := range b.Steps {
		fmt.Fprintf(&body, "  %2d %-16s %s %-4s %s\n", s.N, s.Phase, Short(s.Commit), s.Outcome, s.Detail)
	}
	fmt.Fprintf(&body, "\nDetails and traces: %s\n\n", b.URL)
	body.WriteString(signature(c))
	m.Body = body.String()
	return m, nil
}

// RenderBisectionComment writes the same report for the GitHub issue
// that asked for the bisection; login is who asked.
func RenderBisectionComment(c *Config, b *Bisection, login string) string {
	var s strings.Builder
	if login != "" {
		s.WriteString("@" + login + " ")
	}
	fmt.Fprintf(&s, "**%s**\n\n", oneLine(b.Title, MaxSubject))
	if b.Confirmed {
		cul, par := b.confirmations()
		fmt.Fprintf(&s, "First bad commit: %s (confirmed: fails again %s, its parent passes again %s, the revert on %s passes).\n",
			code(b.Culprit), cul, par, code(Short(b.Bad)))
		if b.blames() {
			// The tree's text, not the bot's: code, not Markdown.
			fmt.Fprintf(&s, "\ncommit: %s\nauthor: %s\n", code(b.commitRef()), code(b.CulpritAuthor))
		}
	} else {
		// The summary and the steps' details can quote the kernel (a
		// crash's title, a build error): code, not Markdown.
		fmt.Fprintf(&s, "No confirmed culprit between %s and %s: %s\n", code(Short(b.Good)), code(Short(b.Bad)), code(b.Summary))
	}
	s.WriteString("\n" + b.against(c, true))
	rows := [][]string{{"step", "phase", "commit", "outcome", "detail"}}
	for _, st := range b.Steps {
		rows = append(rows, []string{fmt.Sprint(st.N), st.Phase, code(Short(st.Commit)), st.Outcome, code(oneLine(st.Detail, MaxSubject))})
	}
	s.WriteString(markdownTable(rows, "rllll") + "\n")
	fmt.Fprintf(&s, "Details and traces: %s\n\n", b.URL)
	s.WriteString(commentSignature(c))
	return s.String()
}

// setup is how the steps were built and measured, a series reply's
// lines (infoBlock's labels), and a blank line; "" when nothing is known.
func (b *Bisection) setup() string {
	var out strings.Builder
	for _, l := range [][2]string{{"config", b.Config}, {"compiler", b.Compiler}, {"lab", b.Lab}, {"test", b.Test}} {
		if l[1] != "" {
			fmt.Fprintf(&out, "%-14s %s\n", l[0]+":", l[1])
		}
	}
	if out.Len() == 0 {
		return ""
	}
	return out.String() + "\n"
}

// againstRows is the table of the culprit's confirmation boots against
// its parent's, with its Markdown alignment: the decided metrics as a
// series reply's table has them (MetricRows, its sides named), or for a
// crash how many of each side's boots showed it; nil when nothing was
// measured, or no metric compared.
func (b *Bisection) againstRows() ([][]string, string) {
	v := b.Against
	switch {
	case v == nil:
		return nil, ""
	case v.Crash != nil:
		what := "crashed"
		if v.Crash.Stall {
			what = "stalled"
		}
		side := func(name, commit string, n BisectBoots) []string {
			return []string{name, Short(commit), fmt.Sprintf("%s in %d of %d boots", what, n.Crashed, n.Boots)}
		}
		return [][]string{{"", "commit", "outcome"}, side("parent", b.Parent, b.ParentBoots), side("culprit", b.Culprit, b.CulpritBoots)}, "lll"
	case len(v.Decision.Comparisons) == 0:
		return nil, ""
	}
	rows := MetricRows(v.Decision)
	rows[0][1], rows[0][4] = "parent mean ± sd", "culprit mean ± sd"
	return rows, "lrrrrrrr"
}

// against is the table of culprit against parent with the words a
// series reply has around its own (the crash's title, how the figures
// were computed, the rule that decided), as plain text for the mail or
// Markdown (md) for the comment, and a blank line; "" without a table.
func (b *Bisection) against(c *Config, md bool) string {
	rows, align := b.againstRows()
	if rows == nil {
		return ""
	}
	v := b.Against
	var out strings.Builder
	para := func(s string) {
		if !md {
			s = wrap(s, 72)
		}
		out.WriteString(s + "\n\n")
	}
	para(fmt.Sprintf("The culprit's confirmation boots against its parent's (%s):", Short(b.Parent)))
	if md {
		out.WriteString(markdownTable(rows, align) + "\n")
	} else {
		out.WriteString(table(rows, "") + "\n")
	}
	if v.Crash != nil {
		// The kernel's words: a line of their own, code in Markdown.
		if md {
			out.WriteString(fenced(v.Crash.Title))
		} else {
			out.WriteString("  " + v.Crash.Title + "\n\n")
		}
		return out.String()
	}
	para(intervalNote(v.Decision))
	switch v.Outcome {
	case flow.Pass, flow.Regression, flow.Improvement:
		if r := DecisionRule(c, v); r != "" {
			para(r)
		}
	}
	return out.String()
}
