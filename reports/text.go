package reports

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/reports/stats"
)

// wrap fills prose to width columns; words longer than width (URLs)
// stand alone on their line rather than being broken.
func wrap(text string, width int) string {
	var b strings.Builder
	for pi, para := range strings.Split(text, "\n") {
		if pi > 0 {
			b.WriteByte('\n')
		}
		col := 0
		for _, w := range strings.Fields(para) {
			n := utf8.RuneCountInString(w)
			switch {
			case col == 0:
			case col+1+n > width:
				b.WriteByte('\n')
				col = 0
			default:
				b.WriteByte(' ')
				col++
			}
			b.WriteString(w)
			col += n
		}
	}
	return b.String()
}

// keyValues renders an aligned "key: value" block, skipping empty values.
func keyValues(kv [][2]string) string {
	width := 0
	for _, p := range kv {
		if p[1] != "" {
			width = max(width, len(p[0])+1)
		}
	}
	var b strings.Builder
	for _, p := range kv {
		if p[1] == "" {
			continue
		}
		fmt.Fprintf(&b, "%-*s %s\n", width, p[0]+":", p[1])
	}
	return b.String()
}

// table renders rows with columns padded to their widest cell; the
// first column is left-aligned, the others right-aligned.
func table(rows [][]string, indent string) string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		line := indent
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				line += c + pad
			} else {
				line += "  " + pad + c
			}
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return b.String()
}

// metricLabel is "write MB/s".
func metricLabel(c stats.Comparison) string {
	if c.Unit == "" {
		return c.Name
	}
	return c.Name + " " + c.Unit
}

// sentenceLabel is "write (MB/s)" for prose.
func sentenceLabel(c stats.Comparison) string {
	if c.Unit == "" {
		return c.Name
	}
	return c.Name + " (" + c.Unit + ")"
}

// pRelation is "=0.0012" or "<0.0001", written without spaces so that
// wrapping never separates the relation from the number.
func pRelation(p float64) string {
	if p < 0.0001 {
		return "<0.0001"
	}
	return "=" + fmtP(p)
}

func pct(r float64) string {
	if math.IsNaN(r) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*(r-1))
}

func fmtP(p float64) string {
	if p < 0.0001 {
		return "<0.0001"
	}
	return fmt.Sprintf("%.4f", p)
}

func meanStd(v []float64) string {
	m, s := stats.MeanStd(v)
	return fmt.Sprintf("%.2f ± %.2f", m, s)
}

// MetricRows is the metrics table shared by every rendering (the mail,
// the comment, the dashboard's test page): a header row, then one row per
// metric: label, base mean ± sd, change, interval, patched mean ± sd, p,
// runs, verdict.
func MetricRows(d stats.Decision) [][]string {
	level := 0.99
	if len(d.Comparisons) > 0 {
		level = d.Comparisons[0].Level
	}
	rows := [][]string{{"metric", "base mean ± sd", "change", fmt.Sprintf("%.0f%% interval", 100*level), "patched mean ± sd", "p", "runs", "verdict"}}
	for _, c := range d.Comparisons {
		rows = append(rows, []string{
			metricLabel(c), meanStd(c.Base), pct(c.CI.Ratio),
			pct(c.CI.Lo) + ".." + pct(c.CI.Hi), meanStd(c.Cand), fmtP(c.Test.P),
			fmt.Sprintf("%d/%d", len(c.Base), len(c.Cand)), c.Change.String(),
		})
	}
	return rows
}

// intervalNote says how MetricRows' change, interval and p were
// computed, in the sentence every table of them is followed by.
func intervalNote(d stats.Decision) string {
	return fmt.Sprintf("Change and interval are of the median (bootstrap), the columns beside them the mean ± sd of the boots; p is from a two-sided Mann-Whitney test held to %.2g per metric and look.",
		d.Comparisons[0].TestAlpha)
}

// Headline picks the comparison that decided a regression or an
// improvement: the first metric, in the order the bot decides on them
// (throughput, the one users feel, before the loop time), whose change is
// in the verdict's direction; nil for other verdicts.
func Headline(v *Verdict) *stats.Comparison {
	if v.Outcome != flow.Regression && v.Outcome != flow.Improvement {
		return nil
	}
	want := stats.Worse
	if v.Outcome == flow.Improvement {
		want = stats.Better
	}
	for i := range v.Decision.Comparisons {
		if c := &v.Decision.Comparisons[i]; c.Change == want {
			return c
		}
	}
	return nil
}

// firstName greets the author the way people on the lists do.
func firstName(a Address) string {
	name := strings.TrimSpace(strings.Trim(a.Name, `"`))
	if name == "" || strings.Contains(name, "@") {
		return ""
	}
	if i := strings.Index(name, ","); i > 0 { // "Lever, Chuck"
		if f := strings.Fields(name[i+1:]); len(f) > 0 {
			return f[0]
		}
	}
	return strings.Fields(name)[0]
}

// reliableFrames drops the frames the unwinder marks unreliable ("? "),
// with the inlined calls decoded for them: stale return addresses left
// on the stack, which syzbot does not show either. A reply's console is an excerpt; the whole report is kept.
func reliableFrames(report string) string {
	lines := strings.Split(report, "\n")
	out := lines[:0]
	for _, l := range lines {
		if unreliableFrame.MatchString(l) {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// printkPrefix is a console line's printk time stamp and caller id.
const printkPrefix = `\[\s*\d+\.\d+\]\s?(\[\s*[CT]\d+\]\s?)?`

var unreliableFrame = regexp.MustCompile(`^(` + printkPrefix + `)?\s+\? [A-Za-z_.$]`)

// crashExcerpt is a crash's console as a reply shows it: the kernel's
// report first, then, after a stall, each section of the stall's dump
// (a side's last kernel lines, its blocked tasks, its RPC tasks in
// flight: each opened by a heading of the lab's, a line ending in ":"
// that is no kernel line), bounded together. A long part never hides
// the others: the report gets up to three fifths of the lines, the
// sections share the rest evenly, and what one needs less of goes to
// the others. A console of one part keeps crashLines, one with a dump
// crashStallLines. A KASAN, KMSAN, KFENCE, lockdep or UBSAN report is
// quoted whole, as syzbot does, up to wholeReportLines: its allocation
// and free stacks, or its lock chain, are what a reader needs of it.
func crashExcerpt(console string) string {
	console = reliableFrames(console)
	parts := consoleParts(console)
	reportMax := crashStallLines * 3 / 5
	if quotedWhole(parts[0]) {
		reportMax = wholeReportLines
	} else if len(parts) == 1 {
		reportMax = crashLines
	}
	alloc := make([]int, len(parts))
	alloc[0] = min(len(parts[0]), reportMax)
	budget := 0
	if len(parts) > 1 {
		budget = crashStallLines - min(alloc[0], crashStallLines*3/5)
	}
	rest := make([]int, 0, len(parts)-1)
	for i := 1; i < len(parts); i++ {
		rest = append(rest, i)
	}
	slices.SortStableFunc(rest, func(a, b int) int { return len(parts[a]) - len(parts[b]) })
	for k, i := range rest {
		alloc[i] = min(len(parts[i]), budget/(len(rest)-k))
		budget -= alloc[i]
	}
	alloc[0] = min(len(parts[0]), alloc[0]+budget)
	for i, p := range parts {
		if alloc[i] < len(p) {
			parts[i] = append(p[:alloc[i]:alloc[i]], moreLines(len(p)-alloc[i]))
		}
	}
	return strings.Join(joinLines(parts), "\n")
}

// crashLines and crashStallLines bound a crash's console in a reply
// (crashExcerpt); wholeReportLines bounds a report quoted whole.
const crashLines, crashStallLines, wholeReportLines = 50, 70, 250

// quotedWhole says the report is of a kind a reply quotes whole: its
// first line is a KASAN, KMSAN, KFENCE, lockdep or UBSAN header.
func quotedWhole(report []string) bool {
	for _, l := range report {
		if t := strings.TrimSpace(timeStamp.ReplaceAllString(l, "")); t != "" {
			return wholeHeader.MatchString(t)
		}
	}
	return false
}

var (
	timeStamp   = regexp.MustCompile(`^` + printkPrefix)
	wholeHeader = regexp.MustCompile(`^(BUG: (KASAN|KMSAN|KFENCE): |UBSAN: |WARNING: (possible circular locking dependency|possible recursive locking|inconsistent lock state|bad unlock balance|held lock freed|suspicious RCU usage|lock held when returning to user space))`)
)

// consoleParts splits a crash console into the report and the stall
// dump's sections after it (crashExcerpt), each without its trailing
// blank lines.
func consoleParts(console string) [][]string {
	var parts [][]string
	var cur []string
	for _, l := range strings.Split(strings.TrimRight(console, "\n"), "\n") {
		if dumpHeading.MatchString(l) && len(cur) > 0 {
			parts, cur = append(parts, cur), nil
		}
		cur = append(cur, l)
	}
	parts = append(parts, cur)
	for i, p := range parts {
		for len(p) > 1 && strings.TrimSpace(p[len(p)-1]) == "" {
			p = p[:len(p)-1]
		}
		parts[i] = p
	}
	return parts
}

// joinLines is parts' lines in order, a blank line before each side's
// first section (its "last kernel lines") as the lab's dump has it.
func joinLines(parts [][]string) []string {
	var out []string
	for i, p := range parts {
		if i > 0 && strings.HasSuffix(p[0], "last kernel lines:") {
			out = append(out, "")
		}
		out = append(out, p...)
	}
	return out
}

// dumpHeading opens a section of the lab's stall dump (lab.Result.StallLog).
var dumpHeading = regexp.MustCompile(`^(server|client)\b[^\[]*, (last kernel lines|blocked tasks \(SysRq w\)|RPC tasks in flight \(rpc_debug\)):$`)

// moreLines says how many lines an excerpt left out.
func moreLines(n int) string {
	if n == 1 {
		return "[... 1 more line]"
	}
	return fmt.Sprintf("[... %d more lines]", n)
}

func excerpt(s string, maxLines int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > maxLines {
		lines = append(lines[:maxLines], moreLines(len(lines)-maxLines))
	}
	return strings.Join(lines, "\n")
}

// Short abbreviates a commit as the replies do (12 hex digits).
func Short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
