package reply

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakepatchwork"
	"github.com/rdmabot/rdmabot/reports"
)

// Testing that starts posts one pending check per patch, once however
// often the test job retries, with the test's page and a one-line
// description; a delivered verdict then posts one final check per patch,
// once, after the pending one: while a pending check waits for a retry
// (patchwork answered 502), its final check waits too.
func TestDeliverPostsPatchworkChecks(t *testing.T) {
	ctx := context.Background()
	pw := fakepatchwork.New(t, "tok")
	token := filepath.Join(t.TempDir(), "pw-token")
	if err := os.WriteFile(token, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newReplyRig(t, func(c *reports.Config) { c.Patchwork.URL, c.Patchwork.TokenFile = pw.URL, token })
	r, s := g.r, g.s
	for i, p := range s.Patches {
		pw.AddPatch(p.MessageID, i+1)
	}
	base, cand := samples(2*r.Cfg.Runs, 100, 2), samples(2*r.Cfg.Runs, 52, 2)
	d := decide(t, r, base, cand)
	rep := flow.Report{Key: "series:x", Kind: "series", Verdict: d.Verdict, Summary: d.Summary, Detail: d.Detail, Series: &s, Tree: "nfsd",
		Base: "0123456789abcdef0123456789abcdef01234567", URL: "http://127.0.0.1:8480/tests/1", BaseSamples: base, CandSamples: cand}
	start := rep
	start.Verdict, start.Summary, start.Detail, start.BaseSamples, start.CandSamples = flow.None, "", nil, nil, nil
	start.BaseBranch, start.BaseReason = "for-next", "base-commit trailer"
	pw.FailPosts(4) // the first checks fail until the Flush
	for range 2 {   // the test job retried
		if err := r.Started(ctx, start); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := r.Deliver(ctx, rep); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	posted := 0
	for i := range s.Patches {
		var states []string
		for _, c := range pw.Checks(i + 1) {
			posted++
			states = append(states, fmt.Sprint(c["state"]))
			if c["context"] != "rdmabot" || c["target_url"] != rep.URL {
				t.Errorf("check %v", c)
			}
			switch d := fmt.Sprint(c["description"]); c["state"] {
			case "pending":
				if d != "Testing on nfsd/for-next at 0123456789ab (base chosen by base-commit trailer)" {
					t.Errorf("pending description %q", d)
				}
			case "fail":
				if !strings.HasPrefix(d, "REGRESSION: ") || strings.Contains(d, "\n") {
					t.Errorf("final description %q", d)
				}
			default:
				t.Errorf("check state %v", c["state"])
			}
		}
		if fmt.Sprint(states) != "[pending fail]" {
			t.Errorf("patch %d: checks %v, want pending then fail", i+1, states)
		}
	}
	if posted != 2*len(s.Patches) || posted == 0 {
		t.Fatalf("%d checks for %d patches, want a pending and a final each", posted, len(s.Patches))
	}
}
