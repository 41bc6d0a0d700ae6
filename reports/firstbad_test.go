package reports

import "testing"

// What testing a series' prefixes found is said in one sentence, with
// its cost; when no patch was singled out, why.
func TestFirstBadSentence(t *testing.T) {
	for _, c := range []struct {
		f    FirstBad
		want string
	}{
		{FirstBad{Patch: 3, Of: 4, Subject: "[PATCH 3/4] svcrdma: pace Sends", Steps: 2, Boots: 14, Minutes: 7.4},
			`Testing the series' prefixes on the same base (2 prefixes tested, 14 lab boots, 7 min) found the first bad patch: patch 3/4, "[PATCH 3/4] svcrdma: pace Sends". This reply answers that patch.`},
		{FirstBad{Patch: 1, Of: 2, Subject: "[PATCH 1/2] x", Steps: 1, Minutes: 0.4},
			`Testing the series' prefixes on the same base (1 prefix tested, 0 min) found the first bad patch: patch 1/2, "[PATCH 1/2] x". This reply answers that patch.`},
		{FirstBad{Of: 2, Note: "only untestable commits are left; the first bad commit is one of:\nabc\ndef.", Steps: 1, Boots: 0, Minutes: 1},
			`Testing the series' prefixes on the same base (1 prefix tested, 1 min) did not single out one patch: only untestable commits are left; the first bad commit is one of:
abc
def.`},
	} {
		if got := c.f.Sentence(); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}
