package reports

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// boot is one fstests boot: "name=status" pairs, and the trusted
// server's op count.
func boot(ops int64, results ...string) FstestsBoot {
	b := FstestsBoot{ServerOps: ops}
	for _, r := range results {
		name, st, _ := strings.Cut(r, "=")
		t := flow.TestResult{Name: name, Status: st, Secs: 10}
		switch st {
		case flow.TestFail:
			t.Why = "--- tests/generic/075.out\n+++ results/generic/075.out.bad\n@@ -4 +4 @@\n-fsx -q -l 262144 -o 65536\n+READ BAD DATA: offset = 0x2a01, size = 0x1ff3"
		case flow.TestNotRun:
			t.Why = "O_DIRECT is not supported"
		}
		b.Tests = append(b.Tests, t)
	}
	return b
}

// confirming marks b as a boot that ran again only the tests failed
// before it.
func confirming(b FstestsBoot) FstestsBoot {
	b.Confirming = true
	return b
}

func judgeWith(t *testing.T, r *FstestsRuns) Verdict {
	t.Helper()
	c := testConfig()
	in := input()
	in.Fstests = r
	return Judge(Rand(in.Thread), c.Policy(), in)
}

// The rule: a test that passed on every base boot and did not pass on
// any patched boot decides; the base's own failures, flaky tests,
// intermittent failures and tests the base did not run never do.
func TestFstestsRule(t *testing.T) {
	pass2 := func(name string) []FstestsBoot {
		return []FstestsBoot{boot(900, name+"=pass", "generic/001=pass"), boot(910, name+"=pass", "generic/001=pass")}
	}
	for _, tc := range []struct {
		name       string
		runs       *FstestsRuns
		want       flow.Outcome
		class      string // generic/075's
		decidedSay string // in the sentence
	}{
		{"regressed", &FstestsRuns{Base: pass2("generic/075"), Cand: []FstestsBoot{boot(880, "generic/075=fail", "generic/001=pass")}},
			flow.Regression, Regressed, "generic/075 failed on the patched kernel and passed on all 2 boots of the base"},
		{"no result is a failure", &FstestsRuns{Base: pass2("generic/075"), Cand: []FstestsBoot{boot(880, "generic/001=pass")}},
			flow.Regression, Regressed, "generic/075 failed"},
		{"not run where the base ran it", &FstestsRuns{Base: pass2("generic/075"), Cand: []FstestsBoot{boot(880, "generic/075=notrun", "generic/001=pass")}},
			flow.Regression, Regressed, "generic/075 failed"},
		{"known failing on the base", &FstestsRuns{Base: []FstestsBoot{boot(900, "generic/075=fail", "generic/001=pass"), boot(900, "generic/075=pass", "generic/001=pass")},
			Cand: []FstestsBoot{boot(880, "generic/075=fail", "generic/001=pass")}}, flow.Pass, KnownFailing, ""},
		{"flaky is set aside", &FstestsRuns{Base: pass2("generic/075"), Cand: []FstestsBoot{boot(880, "generic/075=fail", "generic/001=pass")},
			Flaky: map[string]string{"generic/075": "failed 1 of 20 healthy boots"}}, flow.Pass, Flaky, ""},
		{"intermittent on the patched kernel", &FstestsRuns{Base: pass2("generic/075"),
			Cand: []FstestsBoot{boot(880, "generic/075=fail", "generic/001=pass"), boot(880, "generic/075=pass", "generic/001=pass")}}, flow.Pass, "", ""},
		{"not run on either", &FstestsRuns{Base: []FstestsBoot{boot(900, "generic/075=notrun")}, Cand: []FstestsBoot{boot(900, "generic/075=notrun")}}, flow.Pass, "", ""},
		{"both pass", &FstestsRuns{Base: pass2("generic/075"), Cand: []FstestsBoot{boot(905, "generic/075=pass", "generic/001=pass")}}, flow.Pass, "", ""},
		{"a client that never ran its tests", &FstestsRuns{Base: pass2("generic/075"), Cand: []FstestsBoot{boot(40, "generic/075=pass", "generic/001=pass")}},
			flow.Regression, "", "the trusted server counted 40 NFS operations during them, against a median of 910"},
		{"failed again when confirmed", &FstestsRuns{Base: append(pass2("generic/075"), confirming(boot(300, "generic/075=pass"))),
			Cand: []FstestsBoot{boot(880, "generic/075=fail", "generic/001=pass"), confirming(boot(300, "generic/075=fail"))}},
			flow.Regression, Regressed, "generic/075 failed on the patched kernel and passed on all 3 boots of the base"},
		{"passed when confirmed", &FstestsRuns{Base: append(pass2("generic/075"), confirming(boot(300, "generic/075=pass"))),
			Cand: []FstestsBoot{boot(880, "generic/075=fail", "generic/001=pass"), confirming(boot(300, "generic/075=pass"))}},
			flow.Pass, "", ""},
		{"failed on the base too when confirmed", &FstestsRuns{Base: append(pass2("generic/075"), confirming(boot(300, "generic/075=fail"))),
			Cand: []FstestsBoot{boot(880, "generic/075=fail", "generic/001=pass"), confirming(boot(300, "generic/075=fail"))}},
			flow.Pass, KnownFailing, ""},
		{"a confirming boot is held to the base's confirming boots", &FstestsRuns{Base: append(pass2("generic/075"), confirming(boot(300, "generic/001=pass"))),
			Cand: []FstestsBoot{boot(880, "generic/075=pass", "generic/001=fail"), confirming(boot(200, "generic/001=pass"))}},
			flow.Pass, "", ""},
		{"a client that claims a confirming pass it never ran", &FstestsRuns{Base: append(pass2("generic/075"), confirming(boot(300, "generic/001=pass"))),
			Cand: []FstestsBoot{boot(880, "generic/075=pass", "generic/001=fail"), confirming(boot(40, "generic/001=pass"))}},
			flow.Regression, "", "the trusted server counted 40 NFS operations during them, against a median of 300"},
		{"a patched server counts nothing", &FstestsRuns{Base: pass2("generic/075"), Cand: []FstestsBoot{boot(0, "generic/075=pass", "generic/001=pass")}},
			flow.Pass, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judgeWith(t, tc.runs)
			if v.Outcome != tc.want {
				t.Fatalf("verdict %v (%s), want %v", v.Outcome, v.Reason, tc.want)
			}
			var got string
			for _, ft := range v.Functional.Tests {
				if ft.Name == "generic/075" {
					got = ft.Class
				}
			}
			if got != tc.class {
				t.Errorf("generic/075 is %q, want %q", got, tc.class)
			}
			s := Sentence(&Config{}, &v)
			if tc.decidedSay != "" && !strings.Contains(s, tc.decidedSay) {
				t.Errorf("sentence %q lacks %q", s, tc.decidedSay)
			}
		})
	}
}

// fsx reading back bad data is DATA_CORRUPTION, named by the test, and
// the reply shows the table and the patched kernel's evidence; a crash
// under the profile is the crash's, its table beside it.
func TestFstestsReplies(t *testing.T) {
	b := boot(880, "generic/075=fail", "generic/013=pass", "generic/091=notrun")
	b.Tests[0].Corrupt = true
	r := &FstestsRuns{Base: []FstestsBoot{boot(900, "generic/075=pass", "generic/013=pass", "generic/091=notrun")},
		Cand: []FstestsBoot{b}, Words: "the default group on rxe"}
	v := judgeWith(t, r)
	if v.Outcome != flow.DataCorruption {
		t.Fatalf("fsx bad data: %v, want DATA_CORRUPTION", v.Outcome)
	}
	c := testConfig()
	m, err := RenderEmail(&c, &v, "<x@rdmabot.example.org>", testNow)
	if err != nil {
		t.Fatal(err)
	}
	body := string(m.Body)
	for _, want := range []string{
		"fstests generic/075 read back data different from what it wrote, and passed on the base (the default group on rxe).",
		"generic/075  pass  fail     10s   regressed",
		"generic/091  notrun  notrun",
		"Not run on NFS: generic/091: O_DIRECT is not supported.",
		"generic/075 on the patched kernel:",
		"+READ BAD DATA: offset = 0x2a01, size = 0x1ff3",
		"Reported-by:",
	} {
		if !strings.Contains(strings.Join(strings.Fields(body), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("mail lacks %q:\n%s", want, body)
		}
	}
	md := RenderComment(&c, &v, "")
	if !strings.Contains(md, "| generic/075 | pass | fail |") || !strings.Contains(md, "```\n--- tests/generic/075.out") {
		t.Errorf("comment lacks the table or the evidence:\n%s", md)
	}
	// What is stored renders the same again.
	raw, err := json.Marshal(v.Judgement())
	if err != nil {
		t.Fatal(err)
	}
	var j Judgement
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	again, err := j.Verdict(v.In)
	if err != nil {
		t.Fatal(err)
	}
	if Sentence(&c, &again) != Sentence(&c, &v) {
		t.Errorf("stored judgement renders %q, judged %q", Sentence(&c, &again), Sentence(&c, &v))
	}
	// A crash under the profile is the verdict; the table goes with it.
	in := input()
	in.Fstests = r
	in.CandCrashes = []Crash{{Title: "BUG: unable to handle page fault in rpcrdma_convert_iovs", Link: "fstests on rxe"}}
	cv := Judge(Rand(in.Thread), c.Policy(), in)
	if cv.Outcome != flow.Crash || !strings.Contains(Measurements(&cv), "generic/075") {
		t.Errorf("crash under fstests: %v\n%s", cv.Outcome, Measurements(&cv))
	}
}

// A confirming boot shows only the tests it ran again, and the account
// says what it was.
func TestFstestsConfirmingBootShown(t *testing.T) {
	v := judgeWith(t, &FstestsRuns{Base: []FstestsBoot{boot(900, "generic/001=pass", "generic/075=pass"), confirming(boot(310, "generic/075=pass"))},
		Cand: []FstestsBoot{boot(880, "generic/001=pass", "generic/075=fail"), confirming(boot(300, "generic/075=fail"))}})
	if v.Outcome != flow.Regression {
		t.Fatalf("verdict %v, want REGRESSION", v.Outcome)
	}
	para, rows, _ := FstestsText(v.Functional)
	want := [][]string{{"fstests", "base", "patched", "time", ""}, {"generic/001", "pass", "pass", "10s", ""}, {"generic/075", "pass pass", "fail fail", "20s", Regressed}}
	if len(rows) != len(want) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d %q, want %q", i, rows[i], want[i])
		}
	}
	if !strings.Contains(para, "on 2 boots of the base and 2 boots of the patched kernel (1 of each running again only the tests the patched kernel had failed, to confirm them)") {
		t.Errorf("the account does not say what the second boot was: %s", para)
	}
}
