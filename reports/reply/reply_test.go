package reply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/reports"
)

// words is a lab that names itself plainly.
type words struct{}

func (words) TestWords() (string, string)             { return "transfer", "a copy" }
func (words) PairWords(pair string) string            { return "pair " + pair }
func (words) DefaultPair() string                     { return "qemu" }
func (words) LinkWords(profile string) string         { return profile }
func (words) PressureWords(providers []string) string { return "pressure" }
func (words) DebugIterations() int                    { return 1 }

// maintainers records the commit it was asked about.
type maintainers struct{ asked []string }

func (m *maintainers) MaintainersAt(_ context.Context, commit string, _ []string) ([]string, error) {
	m.asked = append(m.asked, commit)
	return []string{"m@example.org"}, nil
}

// Decide judges nothing once its context ended; a report with nowhere to
// go (a tree ref tested from the CLI) is delivered by nobody, and the
// pending checks wait for a patchwork URL: no outbox is touched (it is
// nil here). The Cc names MAINTAINERS' people at the tested base only,
// and nobody without one.
func TestReplierEarlyReturns(t *testing.T) {
	ctx := context.Background()
	m := &maintainers{}
	r := &Replier{Cfg: reports.DefaultConfig(), Lab: words{}, Maintainers: m}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	s := []flow.Sample{{Metrics: map[string]float64{"copy_MBps": 8}}}
	if _, err := r.Decide(cancelled, "series:<x@x>:v1:", s, s); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled decision: %v", err)
	}
	if err := r.Deliver(ctx, flow.Report{Key: "ref:x", Kind: "ref", Verdict: flow.Pass}); err != nil {
		t.Errorf("a CLI ref's report: %v", err)
	}
	if err := r.Started(ctx, flow.Report{Series: &flow.Series{}}); err != nil {
		t.Errorf("started without patchwork: %v", err)
	}
	r.Cfg.CCMaintainers = true
	changed := &flow.Series{Files: []string{"net/sunrpc/xprtrdma/verbs.c"}}
	if cc := r.maintainersCc(ctx, changed, ""); cc != nil || len(m.asked) != 0 {
		t.Errorf("no base: Cc %v, asked %v", cc, m.asked)
	}
	if cc := r.maintainersCc(ctx, changed, "abc"); len(cc) != 1 || len(m.asked) != 1 || m.asked[0] != "abc" {
		t.Errorf("at the tested base: Cc %v, asked %v", cc, m.asked)
	}
}

// A reply answers the series' root (the cover letter, else the first
// patch), names each patch and counts against the configured lists the
// root was sent to, each once; it copies everyone the series' mails were
// sent to (lists and people, the cover's first), but the author, the bot
// and what is not one mailbox; a series with no mail is an error, not a
// reply to nobody.
func TestThread(t *testing.T) {
	cfg := reports.DefaultConfig()
	cfg.From = "rdmabot <bot@rdmabot.example>"
	r := &Replier{Cfg: cfg, Lists: []string{"linux-rdma@vger.kernel.org", "linux-nfs@vger.kernel.org"}}
	patch := &flow.Message{MessageID: "p1@x", Subject: "[PATCH 1/1] svcrdma: x", From: flow.Address{Email: "dev@x"},
		To: []flow.Address{{Email: "Linux-RDMA@vger.kernel.org"}}, Cc: []flow.Address{{Name: "Rev Iewer", Email: "rev@x"},
			{Email: "DEV@x"}, {Email: "bot@rdmabot.example"}, {Email: "a@x,b@y"}}}
	cover := &flow.Message{MessageID: "c@x", Subject: "[PATCH 0/1] svcrdma", References: []string{"old@x"},
		From: flow.Address{Name: "Dev", Email: "dev@x"}, To: []flow.Address{{Email: "linux-nfs@vger.kernel.org"}},
		Cc: []flow.Address{{Email: "linux-rdma@vger.kernel.org"}, {Email: "linux-nfs@vger.kernel.org"}, {Email: "someone@x"}}}
	th, err := r.thread(&flow.Series{MsgID: "c@x", Cover: cover, Patches: []*flow.Message{patch}})
	if err != nil {
		t.Fatal(err)
	}
	if th.MessageID != "c@x" || th.Subject != cover.Subject || th.Version != 1 || th.Author.Name != "Dev" ||
		len(th.References) != 1 || len(th.Patches) != 1 || th.Patches[0].MessageID != "p1@x" ||
		strings.Join(th.Lists, ",") != "linux-nfs@vger.kernel.org,linux-rdma@vger.kernel.org" {
		t.Errorf("with a cover letter: %+v", th)
	}
	if got, want := strings.Join(th.Addressed, ","), `<linux-nfs@vger.kernel.org>,<linux-rdma@vger.kernel.org>,<someone@x>,"Rev Iewer" <rev@x>`; got != want {
		t.Errorf("addressed %s, want %s", got, want)
	}
	th, err = r.thread(&flow.Series{MsgID: "p1@x", Version: 3, Patches: []*flow.Message{patch}})
	if err != nil || th.MessageID != "p1@x" || th.Version != 3 || strings.Join(th.Lists, ",") != "linux-rdma@vger.kernel.org" {
		t.Errorf("without one: %+v %v", th, err)
	}
	if _, err := r.thread(&flow.Series{MsgID: "none@x"}); err == nil {
		t.Error("a series without mail gave a thread")
	}
}

// The statistics' resampling is seeded from the test's identity: the
// same test's samples give the same intervals every time, another
// test's the same samples its own.
func TestJudgeSeededFromTheTest(t *testing.T) {
	r := &Replier{Cfg: reports.DefaultConfig(), Lab: words{}}
	boots := func(n int, speed float64) []flow.Sample {
		out := make([]flow.Sample, n)
		for i := range out {
			out[i].Metrics = map[string]float64{"copy_MBps": speed * (1 + 0.03*float64((i*7)%5-2))}
		}
		return out
	}
	base, cand := boots(10, 100), boots(10, 90)
	intervals := func(id string) []string {
		v := r.judge(id, base, cand)
		var out []string
		for _, c := range v.Decision.Comparisons {
			out = append(out, fmt.Sprintf("%s %.6f..%.6f", c.Name, c.CI.Lo, c.CI.Hi))
		}
		if len(out) == 0 {
			t.Fatalf("%s: no comparison (%s)", id, v.Outcome)
		}
		return out
	}
	a := intervals("series:<a@x>:v1:")
	if again := intervals("series:<a@x>:v1:"); !slices.Equal(a, again) {
		t.Errorf("the same test judged twice: %v, then %v", a, again)
	}
	if b := intervals("series:<b@x>:v1:"); slices.Equal(a, b) {
		t.Errorf("two tests judged with one seed: %v", a)
	}
}

// A default base stays a guess when the phrase goes on to name the tree
// the store lacked: an APPLY_FAILED on it reaches no one but an asker.
func TestGuessedBase(t *testing.T) {
	for reason, want := range map[string]bool{
		flow.BaseByDefault: true,
		flow.BaseByDefault + "; nfsd/nfsd-testing, where the nfsd tree takes a series for its files, is not in the store": true,
		flow.BaseByBlobs: false,
		"the nfsd tree's rule: a series for its files goes on nfsd-testing": false,
	} {
		if got := guessedBase(reason); got != want {
			t.Errorf("guessedBase(%q) = %v, want %v", reason, got, want)
		}
	}
}

// A stall the lab saw in one boot of the patched kernel (the kernel
// reported nothing), or a crash the kernel reported in one boot, is a
// CRASH kept on the dashboard, its summary saying so; a stall seen in
// two boots, or a crash with a second crashed boot of any signature, is
// evidence, and only evidence reaches the thread. The summary keeps the
// title either way.
func TestStallNeedsASecondBoot(t *testing.T) {
	r := &Replier{Cfg: reports.DefaultConfig(), Lab: words{}}
	title := "transfer stalled: 0 of 4 iterations in 97 s on siw, NFS 4.1"
	stall := func(secs int) flow.Sample {
		return flow.Sample{Crash: strings.Replace(title, "97", fmt.Sprint(secs), 1), Stall: true, Log: "client, blocked tasks (SysRq w):"}
	}
	ok := flow.Sample{Metrics: map[string]float64{"copy_MBps": 8}}
	hang := flow.Sample{Crash: "INFO: task hung in __ib_drain_sq"}
	lossy := func(s flow.Sample) flow.Sample { s.Profile = "lossy"; return s }
	base := []flow.Sample{ok, ok}
	for name, c := range map[string]struct {
		cand      []flow.Sample
		confirmed bool
	}{
		"one stall":                  {[]flow.Sample{stall(97), ok}, false},
		"two stalls":                 {[]flow.Sample{stall(97), stall(103)}, true},
		"a stall beside a crash":     {[]flow.Sample{stall(97), hang}, false},
		"a reported hang, once":      {[]flow.Sample{hang, ok}, false},
		"a reported hang, twice":     {[]flow.Sample{hang, hang}, true},
		"a hang, then an oops":       {[]flow.Sample{hang, {Crash: "BUG: unable to handle page fault in svc_rdma_recvfrom"}}, true},
		"a hang, then a stall":       {[]flow.Sample{hang, stall(97)}, true},
		"a hang, twice, under lossy": {[]flow.Sample{lossy(hang), lossy(hang)}, true},
	} {
		v := r.judge("series:<s@x>:v1:", base, c.cand)
		if v.Outcome != flow.Crash || v.Crash.Confirmed() != c.confirmed || (v.Unconfirmed() == nil) != c.confirmed {
			t.Errorf("%s: %v, crash %+v, confirmed %v", name, v.Outcome, v.Crash, v.Crash.Confirmed())
		}
		want := reports.InThread
		if !c.confirmed {
			want = reports.Nobody
		}
		if aud := r.Cfg.Audience(v.Outcome, reports.Occasion{Unconfirmed: v.Unconfirmed() != nil}); aud != want {
			t.Errorf("%s: mailed to %s, want %s", name, aud, want)
		}
		d, err := r.Decide(context.Background(), "series:<s@x>:v1:", base, c.cand)
		if err != nil {
			t.Fatal(err)
		}
		kind := "crash"
		if v.Crash.Stall {
			kind = "stall"
		}
		if !strings.Contains(d.Summary, "with this series") || !strings.HasSuffix(strings.TrimSuffix(d.Summary, " (a "+kind+" in one boot of the patched kernel, not confirmed by another: not mailed)"), ": "+v.Crash.Title) || strings.Contains(d.Summary, "not mailed") == c.confirmed {
			t.Errorf("%s: summary %q", name, d.Summary)
		}
	}
}
