package reports

import (
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// A confirmed bisection says how often the confirmation ran, as the steps
// record it (confirm_runs), never a fixed count, in the mail and the
// comment alike.
func TestBisectionConfirmCounts(t *testing.T) {
	c := &Config{From: "rdmabot <rdmabot@rdmabot.invalid>", DocsURL: "https://example.org/docs"}
	b := &Bisection{Title: "copy regressed", Good: "aaaa", Bad: "bbbb", Culprit: "cccc", Confirmed: true, To: []string{"linux-rdma@vger.kernel.org"},
		Steps: []BisectStep{{N: 1, Phase: "bisect"}, {N: 2, Phase: "confirm-culprit"}, {N: 3, Phase: "confirm-parent"}, {N: 4, Phase: "confirm-revert"}}}
	if body := RenderBisectionComment(c, b, "chuck"); !strings.Contains(body, "fails again once, its parent passes again once") || strings.Contains(body, "times") {
		t.Errorf("comment:\n%s", body)
	}
	b.Steps = append(b.Steps, BisectStep{N: 5, Phase: "confirm-culprit"}, BisectStep{N: 6, Phase: "confirm-parent"})
	if body := RenderBisectionComment(c, b, ""); !strings.Contains(body, "fails again 2 times, its parent passes again 2 times") || strings.Contains(body, "@") {
		t.Errorf("comment:\n%s", body)
	}
	m, err := RenderBisection(c, b, "x-rdmabot@rdmabot.invalid", time.Unix(0, 0))
	if err != nil || !strings.Contains(m.Body, "it fails again (2 times), its parent passes again (2 times)") {
		t.Errorf("mail %v:\n%v", err, m)
	}
	b.To = nil
	if _, err := RenderBisection(c, b, "x-rdmabot@rdmabot.invalid", time.Unix(0, 0)); err == nil {
		t.Error("a bisection report without a list to go to")
	}
}

// A console holding a fence cannot end the comment's code block early.
func TestFencedOutlastsBackticks(t *testing.T) {
	got := fenced("a\n```\nb ````` c")
	if !strings.HasPrefix(got, "``````\n") || !strings.HasSuffix(got, "\n``````\n\n") {
		t.Errorf("fenced:\n%s", got)
	}
	if got := fenced("plain"); got != "```\nplain\n```\n\n" {
		t.Errorf("fenced: %q", got)
	}
}

// hostile is kernel-printed text as a patch can make the kernel print
// it: Markdown, HTML, a link, a mention and backticks.
const hostile = "BUG: **svc_rdma_send** [rpcrdma] <img src=x onerror=alert(1)> @torvalds see [this](https://evil.example) `x` ``y"

// hostileMarks are what would take effect outside code.
var hostileMarks = []string{"**svc", "<img", "@torvalds", "](https://evil", "`x`"}

// outsideCode is md without its fenced blocks and code spans, by
// CommonMark's rules for the forms the renderers write.
func outsideCode(md string) string {
	var prose []string
	fence := ""
	for _, l := range strings.Split(md, "\n") {
		switch t := strings.TrimSpace(l); {
		case fence != "":
			if t == fence {
				fence = ""
			}
		case strings.HasPrefix(t, "```"):
			fence = t[:len(t)-len(strings.TrimLeft(t, "`"))]
		default:
			prose = append(prose, l)
		}
	}
	s := strings.Join(prose, "\n")
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '`' {
			b.WriteByte(s[i])
			i++
			continue
		}
		open := i
		for i < len(s) && s[i] == '`' {
			i++
		}
		n, end := i-open, -1
		for k := i; k < len(s); {
			if s[k] != '`' {
				k++
				continue
			}
			m := k
			for m < len(s) && s[m] == '`' {
				m++
			}
			if m-k == n {
				end = m
				break
			}
			k = m
		}
		if end < 0 {
			b.WriteString(s[open:i]) // no closing run: literal backticks
			continue
		}
		b.WriteString("CODE")
		i = end
	}
	return b.String()
}

func TestOutsideCode(t *testing.T) {
	if got := outsideCode("a `b` c ``d`e`` f\n```\ng\n```\nh `i"); got != "a CODE c CODE f\nh `i" {
		t.Errorf("%q", got)
	}
}

// Whatever the kernel printed reaches a GitHub comment as code: crash
// titles in a reason or a bisection's steps, a patch's subject, a file
// or hunk could inject Markdown, HTML, links and mentions.
func TestCommentsQuoteKernelText(t *testing.T) {
	c := testConfig()
	check := func(name, md string) {
		t.Helper()
		golden(t, name, []byte(md))
		if !strings.Contains(md, "onerror=alert(1)") {
			t.Errorf("%s does not show the text at all:\n%s", name, md)
		}
		out := outsideCode(md)
		for _, m := range hostileMarks {
			if strings.Contains(out, m) {
				t.Errorf("%s has %q outside code:\n%s", name, m, md)
			}
		}
	}
	vs := verdicts(t)
	infra := vs[flow.Infra]
	infra.Reason = "base kernel crashes: " + hostile
	check("github/comment_infra_crash.md", RenderComment(&c, &infra, "chuck"))

	crash := vs[flow.Crash]
	crash.Crash = &Crash{Title: hostile, Console: hostile + "\n```\n" + hostile}
	crash.In.FirstBad = &FirstBad{Of: 3, Note: "every prefix crashed: " + hostile, Steps: 3, Boots: 6, Minutes: 42}
	check("github/comment_crash.md", RenderComment(&c, &crash, "chuck"))

	apply := vs[flow.ApplyFailed]
	a := *apply.In.Apply
	a.Patch, a.File, a.Hunk = hostile, "net/`sunrpc`/x.c", "@@ -1 +1 @@ "+hostile
	apply.In.Apply = &a
	check("github/comment_apply.md", RenderComment(&c, &apply, "chuck"))

	b := &Bisection{Title: "[mainline] 0f1e2d3c4b5a: nfs-rdma crash", Good: "555555555555", Bad: "0f1e2d3c4b5a",
		Summary: "the good commit 555555555555 could not be measured: CRASH: " + hostile, URL: "http://127.0.0.1:8480/bisect/3",
		Steps: []BisectStep{{N: 1, Phase: "bisect", Commit: "a1b2c3d4e5f6", Outcome: "bad", Detail: "CRASH: " + hostile}}}
	check("github/bisection_crash.md", RenderBisectionComment(&c, b, "chuck"))
}
