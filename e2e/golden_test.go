package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden replies in testdata/replies from this run")

// goldenHeaders are the headers of a reply that say whom it answers and
// how: each is compared whole.
var goldenHeaders = []string{"Subject", "To", "Cc", "In-Reply-To", "References", "X-Rdmabot-Outcome"}

// vary is what differs between two runs of the scenario without being
// the bot's decision: each Message-ID the author's git made (the commits
// are dated now), the imported tree's commit, the ports of the test's
// servers. Old is replaced by New wherever it occurs, longest first.
type vary struct {
	Exact [][2]string `json:"exact"`
}

// newVary names the scenario's run-dependent strings: mail K of series S
// is <S.K>, the base is <base> (and <base12> shortened), the bot's URL
// <bot> and the list's public-inbox <inbox>.
func newVary(t testing.TB, b *bot, base string, all map[string]series) vary {
	var v vary
	for name, s := range all {
		for i, m := range s.mails {
			v.Exact = append(v.Exact, [2]string{strings.Trim(messageID(t, m), "<>"), fmt.Sprintf("%s.%d", name, i+1)})
		}
	}
	v.Exact = append(v.Exact, [2]string{base, "<base>"}, [2]string{base[:12], "<base12>"},
		[2]string{b.cfg.Bot.URL, "<bot>"}, [2]string{b.pi.InboxURL(list), "<inbox>"})
	return v
}

func (v vary) replace(s string, own string) string {
	var pairs [][2]string
	if own != "" {
		// The reply's own Message-ID: Closes: must link to it. First, so
		// that it wins over a name the same ID has in another reply.
		pairs = append(pairs, [2]string{own, "this-reply"})
	}
	pairs = append(pairs, v.Exact...)
	slices.SortStableFunc(pairs, func(a, b [2]string) int { return len(b[0]) - len(a[0]) })
	for _, p := range pairs {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	return s
}

// Figures of a measured reply: every one varies from run to run. What
// stays is what the bot decided and wrote around them: the outcome, the
// metric it names, the effect floor and confidence level (whole
// percentages), the per-look alpha, each metric's verdict, the sections.
var (
	reFigures = []struct {
		re  *regexp.Regexp
		new string
	}{
		{regexp.MustCompile(`<bot>/tests/\d+`), "<bot>/tests/<id>"},
		{regexp.MustCompile(`\b\d+ boots of the patched kernel and \d+ of the base`), "<n> boots of the patched kernel and <n> of the base"},
		{regexp.MustCompile(`none of the \d+ base runs`), "none of the <n> base runs"},
		{regexp.MustCompile(`in any of the \d+ boots of either kernel`), "in any of the <n> boots of either kernel"},
		// Whether the first iteration was a warm-up is the data's say:
		// a fresh machine's run showed one where the golden run did not.
		{regexp.MustCompile(` The first iteration of each run was dropped as a warm-up\.`), ""},
		{regexp.MustCompile(`median \d+\.\d+ to \d+\.\d+`), "median <x> to <y>"},
		// What testing a series' prefixes cost.
		{regexp.MustCompile(`tested, \d+ lab boots, \d+ min\)`), "tested, <n> lab boots, <n> min)"},
		{regexp.MustCompile(`\d+\.\d+ ± \d+\.\d+`), "<mean ± sd>"},
		{regexp.MustCompile(`[+-]?\d+\.\d%`), "<pct>"},
		{regexp.MustCompile(`\bp[=<][01]\.\d{4}\b`), "p<p>"},
		// A pass names the metric whose interval came nearest a loss:
		// either, as the noise has it.
		{regexp.MustCompile(`the closest was (copy \(MB/s\)|loop \(s\)),`), "the closest was <copy (MB/s) or loop (s)>,"},
		// The reported test a fix follow-up names, by its id.
		{regexp.MustCompile(`\b(in test|the reported test) \d+\b`), "$1 <id>"},
		// The SQ and RQ drains share the broken completion; the watchdog
		// names whichever task it finds first.
		{regexp.MustCompile(`__ib_drain_[rs]q\b`), "__ib_drain_<rq|sq>"},
	}
	reCell      = regexp.MustCompile(`\s{2,}`)
	reRuns      = regexp.MustCompile(`^\d+/\d+$`)
	reP         = regexp.MustCompile(`^<?[01]\.\d{4}$`)
	reStamp     = regexp.MustCompile(`^\[\s*\d+\.\d+\] `)
	reHungFirst = regexp.MustCompile(`INFO: task \S+ blocked for more than \d+ seconds\.`)
)

// normalise is a reply as its golden file holds it: the headers that
// matter and the whole body, with what varies between runs named
// instead. Prose is unwrapped (a figure one digit wider moves the line
// breaks), table cells are joined by two spaces (their padding follows
// the widest figure), and a crash's console keeps its first line: which
// task the hung-task watchdog finds first, and so the trace under it,
// differs from run to run.
func normalise(raw []byte, v vary) (string, error) {
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	own := strings.Trim(m.Header.Get("Message-ID"), "<>")
	if own == "" {
		return "", fmt.Errorf("the reply has no Message-ID")
	}
	var out strings.Builder
	for _, k := range goldenHeaders {
		fmt.Fprintf(&out, "%s: %s\n", k, v.replace(m.Header.Get(k), own))
	}
	out.WriteString("\n")
	body := new(bytes.Buffer)
	body.ReadFrom(m.Body)
	paras := strings.Split(v.replace(strings.TrimRight(body.String(), "\n"), own), "\n\n")
	console := false // in the console excerpt's further paragraphs
	for i, p := range paras {
		lines := strings.Split(p, "\n")
		if console && strings.HasPrefix(p, "  ") {
			// Each side's last kernel lines and blocked tasks, the
			// lab's stall dump: which tasks, and when, differ from run
			// to run as the watchdog's do.
			paras[i] = ""
			continue
		}
		console = false
		switch {
		case strings.HasPrefix(p, "metric "):
			for j, l := range lines {
				cells := reCell.Split(l, -1)
				for k, c := range cells {
					if reRuns.MatchString(c) {
						cells[k] = "<n>/<n>"
					} else if k > 0 && reP.MatchString(c) {
						cells[k] = "<p>"
					}
				}
				lines[j] = strings.Join(cells, "  ")
			}
			paras[i] = strings.Join(lines, "\n")
		case i > 0 && paras[i-1] == "Console:":
			if !reStamp.MatchString(strings.TrimSpace(lines[0])) {
				return "", fmt.Errorf("the console excerpt does not start with a console line: %q", lines[0])
			}
			first := reStamp.ReplaceAllString(strings.TrimSpace(lines[0]), "[<t>] ")
			first = reHungFirst.ReplaceAllString(first, "INFO: task <task> blocked for more than <n> seconds.")
			paras[i] = "  " + first + "\n  <the console's further lines>"
			console = true
		case isProse(lines):
			paras[i] = strings.Join(lines, " ")
		}
	}
	paras = slices.DeleteFunc(paras, func(p string) bool { return p == "" })
	text := strings.Join(paras, "\n\n") + "\n"
	for _, f := range reFigures {
		text = f.re.ReplaceAllString(text, f.new)
	}
	out.WriteString(text)
	return out.String(), nil
}

// isProse tells a wrapped paragraph from the blocks the bot lays out
// itself (key: value lines, tables, quoted tags, compiler output,
// consoles, the signature), whose line breaks are fixed.
func isProse(lines []string) bool {
	for _, l := range lines {
		if l == "" || l[0] == ' ' || l[0] == '|' || strings.HasPrefix(l, ">>") || strings.HasPrefix(l, "-- ") || strings.Contains(l, "  ") {
			return false
		}
	}
	return true
}

// golden compares a reply, normalised, with testdata/replies/NAME.txt,
// or rewrites that file (and the reply as sent, NAME.eml, which
// TestNormaliseStrict reads) under -update.
func golden(t *testing.T, name string, raw []byte, v vary) {
	t.Helper()
	got, err := normalise(raw, v)
	if err != nil {
		t.Errorf("%s: %v\n%s", name, err, raw)
		return
	}
	dir := filepath.Join("testdata", "replies")
	path := filepath.Join(dir, name+".txt")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".eml"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v (run with -update to write it)", name, err)
		return
	}
	if d := firstDiff(string(want), got); d != "" {
		t.Errorf("%s: the reply differs from %s (run with -update if intended): %s\n--- got\n%s", name, path, d, got)
	}
}

// writeVary saves v beside the golden replies under -update, so that
// TestNormaliseStrict normalises the saved replies as the run did.
func writeVary(t *testing.T, v vary) {
	t.Helper()
	if !*update {
		return
	}
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "replies", "vary.json"), append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// firstDiff names the first line where got leaves want; "" if equal.
func firstDiff(want, got string) string {
	if want == got {
		return ""
	}
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  got:  %q\n  want: %q", i+1, gl, wl)
		}
	}
	return "they differ"
}
