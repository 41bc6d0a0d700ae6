package reports

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"mime"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/reports/stats"
)

// Mail is one rendered reply.
type Mail struct {
	MessageID  string // without <>
	From       string
	To, Cc     []string
	Subject    string
	InReplyTo  string
	References []string
	Date       time.Time
	Outcome    flow.Outcome
	Body       string
}

// NewMessageID makes a Message-ID on the bot's domain before anything is
// rendered, so the reply can cite its own lore URL in Closes:. The
// time part sorts; the random part makes it unique.
func NewMessageID(now time.Time, rng *rand.Rand, from string) (string, error) {
	a, err := mail.ParseAddress(from)
	if err != nil {
		return "", fmt.Errorf("bot address %q: %w", from, err)
	}
	at := strings.LastIndexByte(a.Address, '@')
	var r [6]byte
	for i := range r {
		r[i] = byte(rng.Uint32())
	}
	return fmt.Sprintf("%s.%s-rdmabot@%s", now.UTC().Format("20060102150405"), hex.EncodeToString(r[:]), a.Address[at+1:]), nil
}

// ErrNotMailed is returned for outcomes that are never mailed.
var ErrNotMailed = fmt.Errorf("outcome is never mailed")

// RenderEmail writes the in-thread reply for a verdict.
func RenderEmail(c *Config, v *Verdict, msgID string, now time.Time) (*Mail, error) {
	if !Mailed(v.Outcome) {
		return nil, fmt.Errorf("%v: %w", v.Outcome, ErrNotMailed)
	}
	t := v.In.Thread
	if t.MessageID == "" || t.Author.Email == "" {
		return nil, fmt.Errorf("thread has no Message-ID or author to answer")
	}
	answer, subject := answered(v.In)
	m := &Mail{
		MessageID: msgID,
		From:      c.From,
		To:        []string{(&mail.Address{Name: t.Author.Name, Address: t.Author.Email}).String()},
		Subject:   replySubject(subject),
		InReplyTo: answer,
		Date:      now,
		Outcome:   v.Outcome,
	}
	m.References = append(append([]string{}, t.References...), t.MessageID)
	if answer != t.MessageID {
		m.References = append(m.References, answer)
	}
	cc, err := listCc(c, slices.Concat(t.Lists, t.Addressed, t.Cc), t.Author.Email)
	if err != nil {
		return nil, err
	}
	m.Cc = append(m.Cc, cc...)
	m.Body = emailBody(c, v, msgID)
	return m, nil
}

// answered is the mail a reply answers, and its subject: the patch a
// failure is in when it is known (the apply or build error of patch 2/2
// answers patch 2/2), else the cover letter or single patch.
func answered(in *Input) (msgID, subject string) {
	t := in.Thread
	if p := in.Patch; p > 0 && p <= len(t.Patches) && t.Patches[p-1].MessageID != "" {
		subject = t.Patches[p-1].Subject
		if subject == "" {
			subject = t.Subject
		}
		return t.Patches[p-1].MessageID, subject
	}
	return t.MessageID, t.Subject
}

func replySubject(s string) string {
	s = oneLine(s, MaxSubject)
	if len(s) >= 3 && strings.EqualFold(s[:3], "re:") {
		return s
	}
	return "Re: " + s
}

// MaxSubject caps, in characters, the subject a reply quotes (its
// Subject and the "patch subject" line); kernel subjects are far shorter.
const MaxSubject = 200

// oneLine is s on one line, every run of whitespace (line breaks too) one
// space and other control characters dropped, cut to at most max
// characters (the cut marked with "...").
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:max-3]), " ") + "..."
}

// CloseURL is where the reply will be on lore.
func (c *Config) CloseURL(msgID string) string {
	if c.ArchiveURL != "" {
		return strings.TrimRight(c.ArchiveURL, "/") + "/" + msgID + "/"
	}
	return "https://lore.kernel.org/r/" + msgID + "/"
}

func botName(c *Config) string {
	if a, err := mail.ParseAddress(c.From); err == nil && a.Name != "" {
		return a.Name
	}
	return "rdmabot"
}

// Title is the crash or boot failure a Sentence ending in a colon
// announces, shown on a line of its own (never wrapped); "" otherwise.
func Title(v *Verdict) string {
	switch {
	case v.Outcome == flow.Crash && v.Crash != nil:
		return v.Crash.Title
	case v.Outcome == flow.BootFailed && v.In.Boot != nil:
		return v.In.Boot.Title
	}
	return ""
}

// Sentence is the one-sentence verdict every rendering leads with.
func Sentence(c *Config, v *Verdict) string {
	bot := botName(c)
	in := v.In
	switch v.Outcome {
	case flow.Pass:
		if u := in.Unchanged; u != nil {
			return fmt.Sprintf("%s compiled the files this series changes with and without it, in the lab kernel's configuration, "+
				"to the same objects, byte for byte (%s): the series changes no generated code, so its kernel is the base's and was not booted.",
				bot, strings.Join(u.Objects, ", "))
		}
		s := fmt.Sprintf("%s tested this series on the %s test and found no change of %.0f%% or more in any metric", bot, testName(in), 100*c.MinEffect)
		if h := closest(v); h != nil {
			s += fmt.Sprintf("; the closest was %s, %s (%.0f%% interval %s to %s)", sentenceLabel(*h), pct(h.CI.Ratio), 100*h.Level, pct(h.CI.Lo), pct(h.CI.Hi))
		}
		return s + "."
	case flow.Regression, flow.Improvement:
		if v.Functional.failing() {
			return v.Functional.sentence(bot, v.Outcome)
		}
		if h := v.faultHealth(); h != nil {
			f := h.fault()
			test := "on the " + testName(in) + " test"
			if h.Profile != "" {
				test = "under Send Queue pressure (" + h.Profile + ")"
			}
			return fmt.Sprintf("%s noticed transport errors with this series %s: %d %s in %d of %s of the patched kernel, none in %s of the base.",
				bot, test, f.Cand, f.Label, f.CandWith, Boots(h.CandBoots), Boots(h.BaseBoots))
		}
		h := Headline(v)
		kind := "regression"
		if v.Outcome == flow.Improvement {
			kind = "improvement"
		}
		return fmt.Sprintf("%s noticed a %.1f%% %s of %s with this series on the %s test: median %.2f to %.2f (%.0f%% interval %s to %s, p%s).",
			bot, 100*abs1(h.CI.Ratio), kind, sentenceLabel(*h), testName(in), stats.Median(h.Base), stats.Median(h.Cand),
			100*h.Level, pct(h.CI.Lo), pct(h.CI.Hi), pRelation(h.Test.P))
	case flow.ApplyFailed:
		if a := in.Apply; a != nil && a.Index > 0 {
			return fmt.Sprintf("%s could not apply patch %d of this series to %s.", bot, a.Index, baseName(in.Base))
		}
		return fmt.Sprintf("%s could not apply this series to %s.", bot, baseName(in.Base))
	case flow.BuildFailed:
		if in.Patch > 0 {
			return fmt.Sprintf("%s noticed the following build errors with this patch:", bot)
		}
		return fmt.Sprintf("%s noticed the following build errors with this series:", bot)
	case flow.BootFailed:
		return fmt.Sprintf("%s noticed that the kernel with this series does not boot on the lab pair:", bot)
	case flow.Crash:
		if v.Crash != nil && v.Crash.Stall {
			return fmt.Sprintf("%s noticed a stall with this series, which the kernel did not report:", bot)
		}
		return fmt.Sprintf("%s noticed a crash with this series:", bot)
	case flow.DataCorruption:
		if in.Corruption == nil && v.Functional.failing() {
			return v.Functional.sentence(bot, v.Outcome)
		}
		return fmt.Sprintf("%s noticed data corruption with this series: data written over NFS/RDMA came back different.", bot)
	case flow.Inconclusive:
		return fmt.Sprintf("%s could not decide: %s.", bot, v.Reason)
	case flow.Infra:
		return fmt.Sprintf("%s could not test this series because of its own infrastructure: %s.", bot, v.Reason)
	case flow.Incomplete:
		return fmt.Sprintf("%s did not test this series: %s.", bot, v.Reason)
	}
	return v.Outcome.String()
}

func abs1(r float64) float64 {
	if r < 1 {
		return 1 - r
	}
	return r - 1
}

// closest is the comparison of a pass that came nearest a regression:
// the one whose interval reaches furthest in the bad direction.
func closest(v *Verdict) *stats.Comparison {
	var best *stats.Comparison
	worst := math.Inf(-1)
	for i := range v.Decision.Comparisons {
		c := &v.Decision.Comparisons[i]
		bad := c.CI.Hi - 1
		if c.HigherIsBetter {
			bad = 1 - c.CI.Lo
		}
		if best == nil || bad > worst {
			best, worst = c, bad
		}
	}
	return best
}

func testName(in *Input) string {
	if in.Test.Name != "" {
		return in.Test.Name
	}
	return "NFS/RDMA transfer"
}

func baseName(b Base) string {
	s := b.Tree
	if b.Branch != "" {
		s += "/" + b.Branch
	}
	return strings.TrimSpace(s + " " + Short(b.SHA))
}

// provenance is the bracketed line saying what was tested where.
func provenance(b Base) string {
	reason := b.Reason
	if reason == "" {
		reason = "default"
	}
	return fmt.Sprintf("[tested on %s, base chosen by %s]", baseName(b), reason)
}

func infoBlock(v *Verdict) string {
	in := v.In
	b := in.Base
	base := strings.TrimSpace(b.URL + " " + b.Branch + " " + b.SHA)
	if b.URL == "" {
		if base = b.Tree; b.Branch != "" {
			base += "/" + b.Branch
		}
		base = strings.TrimSpace(base + " " + b.SHA)
		if b.Tree != "" {
			base += " (a tree without a public URL)"
		}
	}
	version := ""
	if in.Thread.Version > 1 {
		version = fmt.Sprintf("v%d", in.Thread.Version)
	}
	id, subject := answered(in)
	link := in.Thread.LoreURL
	if id != in.Thread.MessageID && link != "" {
		// Another mail of the thread: the archive's page of that mail,
		// as public-inbox names it, else lore's, which finds any id.
		root := "/" + url.PathEscape(in.Thread.MessageID) + "/"
		if strings.HasSuffix(link, root) {
			link = strings.TrimSuffix(link, root) + "/" + url.PathEscape(id) + "/"
		} else {
			link = "https://lore.kernel.org/r/" + id + "/"
		}
	}
	lab, test, reproduce := in.Test.Lab, in.Test.Test, in.Test.Reproduce
	switch {
	case in.Unchanged != nil:
		// Nothing booted; the reproducer boots, the steps below compare
		// objects.
		lab, test, reproduce = "", "", ""
	case v.Outcome == flow.ApplyFailed || v.Outcome == flow.BuildFailed:
		lab, test = "", "" // nothing ran
	}
	return keyValues(append(append([][2]string{
		{"url", in.Build.SeriesURL},
		{"base", base},
		{"patch link", link},
		{"patch subject", oneLine(subject, MaxSubject)},
		{"version", version},
		{"config", in.Build.Config},
		{"compiler", in.Build.Compiler},
		{"lab", lab},
		{"test", test},
		{"reproduce", reproduce}},
		in.Test.Files...),
		[2]string{"details", in.Test.RunURL}))
}

func emailBody(c *Config, v *Verdict, msgID string) string {
	var b strings.Builder
	para := func(s string) { b.WriteString(wrap(s, 72) + "\n\n") }
	raw := func(s string) { b.WriteString(strings.TrimRight(s, "\n") + "\n\n") }
	in := v.In
	if n := firstName(in.Thread.Author); n != "" {
		raw("Hi " + n + ",")
	} else {
		raw("Hello,")
	}
	para(Sentence(c, v))
	if t := Title(v); t != "" {
		raw("  " + t)
	}
	if f := in.FirstBad; f != nil {
		para(f.Sentence())
	}
	if f := in.Fix; f != nil {
		para(f.Sentence())
	}
	raw(provenance(in.Base)) // one line, as the 0-day tags are: greppable
	if v.Outcome == flow.ApplyFailed {
		if in.Base.Reason == flow.BaseByTrailer {
			para("The series names this base (base-commit:). If it depends on patches that are not on it, please post them with the series, or name a base that has them.")
		} else {
			para("If the series is meant for another tree or base, please say so with base-commit: (git format-patch --base) in the next version.")
		}
	}
	raw(infoBlock(v))
	if len(in.Thread.Reviews) > 0 {
		raw(reviewsText(in.Thread.Reviews))
	}
	if booted(v) {
		for _, l := range in.Test.Limits {
			para(l)
		}
	}
	if steps := in.Test.ByHand.steps(v); len(steps) > 0 {
		raw("To reproduce without rdmabot, in a clone of the base tree:\n\n        " + strings.Join(steps, "\n        "))
	}
	if OffersTags(v.Outcome) {
		para("If you fix the issue in a separate patch/commit (i.e. not just a new version of the same patch/commit), kindly add the following tags:")
		raw(fmt.Sprintf("| Reported-by: %s\n| Closes: %s", c.From, c.CloseURL(msgID)))
	}
	switch v.Outcome {
	case flow.Pass, flow.Regression, flow.Improvement:
		if m := Measurements(v); m != "" { // none for a kernel not booted
			raw(m)
		}
		if r := DecisionRule(c, v); r != "" {
			para(r)
		}
	case flow.ApplyFailed:
		a := in.Apply
		if a.Index > 0 {
			where := ""
			if a.File != "" {
				where = " in " + a.File
			}
			if a.Hunk != "" {
				where += ", hunk " + a.Hunk
			}
			para(fmt.Sprintf("Patch %d (%q) does not apply%s:", a.Index, oneLine(a.Patch, MaxSubject), where))
		}
		if a.Output != "" {
			raw(indent(excerpt(a.Output, 30)))
		}
	case flow.BuildFailed:
		f := in.BuildFail
		what := "All errors"
		if f.Target != "" {
			what += " of make " + f.Target
		}
		raw(what + " (new ones prefixed by >>):")
		raw(diagnostics(f.New, ">> "))
		if len(f.Warnings) > 0 {
			raw("Warnings of the same build (not compared with the base's):")
			raw(diagnostics(f.Warnings, "   "))
		}
	case flow.BootFailed:
		raw("Console:\n\n" + indent(excerpt(in.Boot.Console, 40)))
	case flow.Crash:
		raw(Measurements(v))
	case flow.DataCorruption:
		if in.Corruption != nil {
			raw("cmp:\n\n" + indent(excerpt(in.Corruption.Detail, 20)))
		}
		if v.Functional != nil {
			raw(Measurements(v))
		}
	}
	if v.Outcome == flow.Pass && c.TestedBy && in.Unchanged == nil {
		para("If you wish, you may add the following tag to the series:")
		raw("| Tested-by: " + c.From)
	}
	b.WriteString(signature(c))
	return b.String()
}

// Results is a verdict in plain text, as a reproducer prints it: the
// outcome and the reply's sentence, then what was measured.
func Results(c *Config, v *Verdict) string {
	head := wrap(v.Outcome.String()+": "+Sentence(c, v), 72) + "\n\n"
	if t := Title(v); t != "" {
		head += "  " + t + "\n\n"
	}
	return strings.TrimRight(head+Measurements(v), "\n") + "\n"
}

// Measurements is what a verdict measured, as the reply shows it: the
// metrics table with how it was computed and the transport's health, or
// the crash with its console. A reproducer prints the same.
func Measurements(v *Verdict) string {
	var b strings.Builder
	para := func(s string) { b.WriteString(wrap(s, 72) + "\n\n") }
	raw := func(s string) { b.WriteString(strings.TrimRight(s, "\n") + "\n\n") }
	switch v.Outcome {
	case flow.Pass, flow.Regression, flow.Improvement:
		if len(v.Decision.Comparisons) > 0 {
			raw(table(MetricRows(v.Decision), ""))
			note := "Base and patched kernels ran on the same pair, one boot per run. " + intervalNote(v.Decision)
			for _, cmp := range v.Decision.Comparisons {
				if cmp.Warmup {
					note += " The first iteration of each run was dropped as a warm-up."
					break
				}
			}
			para(note)
		}
		for _, h := range []*Health{v.Health, v.Pressure} {
			if h == nil {
				continue
			}
			text, rows := healthText(h)
			para(text)
			if rows != nil {
				raw(table(rows, ""))
			}
		}
	case flow.Crash:
		where, same, kind := "the console of the patched kernel", "", "crash"
		if v.Crash.Stall {
			where, kind = "a boot of the patched kernel", "stall"
			if v.Crash.Boots > 1 {
				where = fmt.Sprintf("%d boots of the patched kernel", v.Crash.Boots)
			}
		}
		n := baseRuns(v.In)
		if v.Crash.Link != "" {
			where += ", booted with " + v.Crash.Link + ","
			same, n = " with the same link", v.Crash.LinkBaseRuns
			switch {
			case v.Crash.Load:
				same = " under the same load"
			case v.Crash.Debug:
				where = "the console of the patched kernel's " + v.Crash.Link + ","
				same = " of the base's debug build"
			case v.Crash.Client:
				where = "a console of the pair with " + v.Crash.Link + ","
				same = " booted the same way"
			}
		}
		if n == 1 {
			para("The " + kind + " showed on " + where + " and not in the one base run" + same + ".")
		} else if n > 1 {
			para(fmt.Sprintf("The %s showed on %s and on none of the %d base runs%s.", kind, where, n, same))
		} else {
			para("The " + kind + " showed on " + where + " and not on the base kernel's.")
		}
		// The evidence it was mailed on (Confirmed): how many boots
		// failed, whichever place each crashed in (a hung task's title
		// names the drain its watchdog found first).
		if !v.Crash.Stall && v.Crash.Crashed > 1 {
			para(fmt.Sprintf("The patched kernel crashed or stalled in %d of its boots; the console below is this crash's.", v.Crash.Crashed))
		}
		raw("Console:\n\n" + indent(crashExcerpt(v.Crash.Console)))
		if v.Pressure != nil {
			text, rows := healthText(v.Pressure)
			para(text)
			raw(table(rows, ""))
		}
	}
	if v.Functional != nil {
		text, rows, evidence := FstestsText(v.Functional)
		para(text)
		raw(table(rows, ""))
		for _, e := range evidence {
			raw(e[0] + "\n\n" + indent(e[1]))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// diagnostics lists compiler messages as 0-day does: each line marked,
// the compiler's source excerpt under it.
func diagnostics(ds []Diagnostic, mark string) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(mark + d.Text + "\n")
		for _, l := range strings.Split(strings.TrimRight(d.Context, "\n"), "\n") {
			if l != "" {
				b.WriteString("   " + l + "\n")
			}
		}
	}
	return b.String()
}

// listCc is the Cc line of a reply in a thread: its lists and the
// archive list, each once, never the addressee nor the bot.
func listCc(c *Config, lists []string, to string) ([]string, error) {
	seen := map[string]bool{strings.ToLower(to): true}
	if a, err := mail.ParseAddress(c.From); err == nil {
		seen[strings.ToLower(a.Address)] = true
	}
	var out []string
	for _, l := range append(append([]string{}, lists...), c.ArchiveList) {
		if l == "" {
			continue
		}
		a, err := mail.ParseAddress(l)
		if err != nil {
			return nil, fmt.Errorf("list address %q: %w", l, err)
		}
		if !seen[strings.ToLower(a.Address)] {
			seen[strings.ToLower(a.Address)] = true
			out = append(out, a.String())
		}
	}
	return out, nil
}

// signature ends every mail the bot writes.
func signature(c *Config) string {
	contact := ""
	if c.Contact != "" {
		contact = "Wrong, or a question? Write to " + c.Contact + ".\n"
	}
	// The commands are lore's (lore.Command); the author, the files'
	// maintainers and reviewers may give them, one per line of a reply.
	return "-- \n" + botName(c) + ", a test bot for NFS/RDMA and RDMA core patches.\n" +
		"This report is generated by a bot. It may contain errors.\n" +
		contact +
		"Reply with a line \"#rdmabot retest\" to test again, \"#rdmabot retest\n" +
		"fstests\" to add fstests, \"#rdmabot test <tree> [<branch>]\" for another\n" +
		"base, \"#rdmabot invalid <why>\" or \"#rdmabot dup <link>\" if this report\n" +
		"is wrong or said before.\n" +
		"How it works, and how to opt out:\n" + c.DocsURL + "\n"
}

func baseRuns(in *Input) int {
	n := 0
	for _, m := range in.Metrics {
		n = max(n, len(m.Base))
	}
	return n
}

func indent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n")
}

// Bytes is the message as it goes on the wire and into the outbox (LF
// line ends; SMTP turns them into CRLF).
func (m *Mail) Bytes() []byte {
	var b bytes.Buffer
	h := func(k, v string) { b.WriteString(k + ": " + v + "\n") }
	h("From", m.From)
	h("To", foldList(m.To))
	if len(m.Cc) > 0 {
		h("Cc", foldList(m.Cc))
	}
	// Encoded words each on a line of their own: the whitespace between
	// two is not part of the subject, and no line passes 998 octets.
	h("Subject", strings.ReplaceAll(mime.QEncoding.Encode("utf-8", m.Subject), "?= =?", "?=\n =?"))
	h("Date", m.Date.Format(time.RFC1123Z))
	h("Message-ID", "<"+m.MessageID+">")
	if m.InReplyTo != "" { // a new thread (a bisection report) answers nothing
		h("In-Reply-To", "<"+m.InReplyTo+">")
	}
	if len(m.References) > 0 {
		refs := make([]string, len(m.References))
		for i, r := range m.References {
			refs[i] = "<" + r + ">"
		}
		h("References", strings.Join(refs, "\n "))
	}
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "8bit")
	h("Content-Disposition", "inline")
	h("Auto-Submitted", "auto-generated")
	h("X-Rdmabot-Outcome", m.Outcome.String())
	b.WriteString("\n")
	b.WriteString(m.Body)
	return b.Bytes()
}

// Recipients are the envelope addresses, each one plain mailbox.
func (m *Mail) Recipients() ([]string, error) {
	var out []string
	for _, s := range append(append([]string{}, m.To...), m.Cc...) {
		a, err := Mailbox(s)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// ErrBadAddress marks an address that is not one plain mailbox.
var ErrBadAddress = errors.New("not one plain mailbox")

// Mailbox is the one address s names ("Name <local@domain>" or a bare
// local@domain), strictly: net/mail must parse s as a single address,
// and the address must be printable ASCII without the characters that
// need quoting (so `Evil <a@x,b@y,c@z>`, a quoted local part with a
// comma, a route or a domain literal are all refused). What comes back
// is safe to give SMTP as one RCPT TO and to store in a list.
func Mailbox(s string) (string, error) {
	a, err := mail.ParseAddress(s)
	if err != nil {
		return "", fmt.Errorf("address %q: %w: %w", s, ErrBadAddress, err)
	}
	local, domain, ok := strings.Cut(a.Address, "@")
	bad := !ok || local == "" || domain == "" || strings.Contains(domain, "@") ||
		strings.HasPrefix(local, ".") || strings.HasSuffix(local, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".")
	for i := 0; i < len(a.Address) && !bad; i++ {
		c := a.Address[i]
		bad = c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),:;<>[\]`, c) >= 0
	}
	if bad {
		return "", fmt.Errorf("address %q: %w", s, ErrBadAddress)
	}
	return a.Address, nil
}

func foldList(l []string) string { return strings.Join(l, ",\n    ") }

// booted says the outcome comes from boots of the patched kernel: what
// the lab could not exercise of it is worth saying.
func booted(v *Verdict) bool {
	if v.In.Unchanged != nil {
		return false
	}
	o := v.Outcome
	return o == flow.Pass || o == flow.Regression || o == flow.Improvement || o == flow.Crash || o == flow.DataCorruption
}

// reviewsText links the other bots' reviews in the thread, which a reply
// does not repeat.
func reviewsText(reviews [][2]string) string {
	var b strings.Builder
	b.WriteString("Reviews by other bots in this thread (not repeated here):\n")
	for _, r := range reviews {
		fmt.Fprintf(&b, "  %s: %s\n", r[0], r[1])
	}
	return b.String()
}

// DecisionRule is the rule a verdict on the metrics was decided by, in
// one sentence with the configured figures: why a 3.4 % change can be a
// REGRESSION while a PASS promises no change of 5 % or more. "" when no
// metric decided (a transport fault, or nothing compared).
func DecisionRule(c *Config, v *Verdict) string {
	if len(v.Decision.Comparisons) == 0 || v.faultHealth() != nil {
		return ""
	}
	cmp := v.Decision.Comparisons[0]
	e := 100 * c.MinEffect
	return fmt.Sprintf("The rule: a metric is a regression (or an improvement) when the Mann-Whitney p is below %.2g, "+
		"its median moved %.1f%% or more, and its %.0f%% interval reaches a change of %.0f%%; "+
		"it passes when the interval rules out a loss of %.0f%% or more; else more runs are asked for, up to %d per kernel.",
		cmp.TestAlpha, e/2, 100*cmp.Level, e, e, c.MaxRuns)
}
