package reports

import (
	"fmt"
	"strings"
)

// commentMarker tags a GitHub comment with the reply's Message-ID, so a
// resend after a crash can see that the comment already exists.
func commentMarker(msgID string) string { return "<!-- rdmabot:" + msgID + " -->" }

// RenderMarkdown writes the GitHub issue comment: the verdict and the
// table up front, everything else collapsed.
func RenderMarkdown(c *Config, v *Verdict, msgID string) (string, error) {
	if !v.Outcome.Mailed() {
		return "", fmt.Errorf("%v: %w", v.Outcome, ErrNotMailed)
	}
	var b strings.Builder
	in := v.In
	fmt.Fprintf(&b, "### %s: %s\n\n", botName(c), v.Outcome)
	b.WriteString(mdEscape(Sentence(c, v)) + "\n\n")
	if t := Title(v); t != "" {
		b.WriteString("    " + t + "\n\n")
	}
	b.WriteString("`" + provenance(in.Base) + "`\n\n")
	if len(v.Decision.Comparisons) > 0 && (v.Outcome == Pass || v.Outcome == Regression || v.Outcome == Improvement) {
		rows := metricRows(v.Decision)
		for i, r := range rows {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
			if i == 0 {
				b.WriteString("|:--" + strings.Repeat("|--:", len(r)-1) + "|\n")
			}
		}
		b.WriteString("\n")
	}
	details := func(summary, body string) {
		fmt.Fprintf(&b, "<details><summary>%s</summary>\n\n```\n%s\n```\n\n</details>\n\n", summary, strings.TrimRight(body, "\n"))
	}
	switch v.Outcome {
	case ApplyFailed:
		a := in.Apply
		details(fmt.Sprintf("patch %d does not apply: %s, hunk %s", a.Index, a.File, a.Hunk), a.Output)
	case BuildFailed:
		details(fmt.Sprintf("%d new build errors", len(in.BuildFail.New)), diagnostics(in.BuildFail.New, ""))
	case BootFailed:
		details("console", excerpt(in.Boot.Console, 40))
	case CrashFound:
		details("console", excerpt(v.Crash.Console, 50))
	case DataCorruption:
		details("cmp", in.Corruption.Detail)
	}
	details("how it was tested", infoBlock(v))
	if v.Outcome.OffersTags() {
		details("tags for a fix in a separate patch", fmt.Sprintf("Reported-by: %s\nCloses: %s", c.From, c.CloseURL(msgID)))
	}
	if in.Test.RunURL != "" {
		fmt.Fprintf(&b, "[Run page with charts and logs](%s)\n\n", in.Test.RunURL)
	}
	b.WriteString(commentMarker(msgID) + "\n")
	return b.String(), nil
}

// mdEscape keeps kernel identifiers like __be32 and *ptr literal.
func mdEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;")
	return r.Replace(s)
}
