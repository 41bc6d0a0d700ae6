package reports

import (
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// A fix follow-up's sentence names the report it closes, how the fix was
// applied, and whether the failure is gone.
func TestFixSentence(t *testing.T) {
	const head = "This series closes rdmabot's report https://lore.kernel.org/r/1.a-rdmabot@example.org/ (REGRESSION in test 7). It was tested as that test was, on the same base, "
	for _, c := range []struct {
		f    FixFollowUp
		want string
	}{
		{FixFollowUp{Test: 7, Verdict: flow.Regression, Now: flow.Pass, URL: "https://bot.example.org/tests/7", ReplyURL: "https://lore.kernel.org/r/1.a-rdmabot@example.org/", OnTop: true, Confirmed: true},
			head + "applied on top of the reported series. Confirmed fixed: the regression is gone. The reported test: https://bot.example.org/tests/7"},
		{FixFollowUp{Test: 7, Verdict: flow.Regression, Now: flow.Regression, URL: "https://bot.example.org/tests/7", ReplyURL: "https://lore.kernel.org/r/1.a-rdmabot@example.org/"},
			head + "applied in place of the reported series (it does not apply on top of it). Not fixed: the verdict is still REGRESSION. The reported test: https://bot.example.org/tests/7"},
		{FixFollowUp{Test: 7, Verdict: flow.Regression, Now: flow.Crash, URL: "https://bot.example.org/tests/7", ReplyURL: "https://lore.kernel.org/r/1.a-rdmabot@example.org/", OnTop: true},
			head + "applied on top of the reported series. Not confirmed fixed: the verdict is now CRASH. The reported test: https://bot.example.org/tests/7"},
		{FixFollowUp{Test: 3, Verdict: flow.Crash, Now: flow.Pass, URL: "u", OnTop: true, Confirmed: true},
			"This series closes rdmabot's report of test 3 (CRASH). It was tested as that test was, on the same base, applied on top of the reported series. Confirmed fixed: the kernel no longer crashes. The reported test: u"},
		{FixFollowUp{Test: 3, Verdict: flow.BuildFailed, Now: flow.Improvement, URL: "u", Confirmed: true},
			"This series closes rdmabot's report of test 3 (BUILD_FAILED). It was tested as that test was, on the same base, applied in place of the reported series (it does not apply on top of it). Confirmed fixed: the kernel builds and the test passes. The reported test: u"},
		{FixFollowUp{Test: 4, Verdict: flow.Regression, Now: flow.Pass, URL: "u", Culprit: "0123456789ab", Head: "mainline 89abcdef0123", OnTop: true, Confirmed: true},
			"This series fixes 0123456789ab, which rdmabot's bisection blamed for a REGRESSION (test 4). It was tested as that test was, on the same base, applied on mainline 89abcdef0123, the head the regression was found in. Confirmed fixed: the regression is gone. The reported test: u"},
		{FixFollowUp{Test: 4, Verdict: flow.Regression, Now: flow.Regression, URL: "u", Culprit: "0123456789ab", Head: "mainline 89abcdef0123"},
			"This series fixes 0123456789ab, which rdmabot's bisection blamed for a REGRESSION (test 4). It was tested as that test was, on the same base, applied on the base (it does not apply on mainline 89abcdef0123, the head the regression was found in). Not fixed: the verdict is still REGRESSION. The reported test: u"},
	} {
		if got := c.f.Sentence(); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}
