package reports

import (
	"errors"
	"mime"
	"net/mail"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rdmabot/rdmabot/flow"
)

func TestWrap(t *testing.T) {
	got := wrap("aaa bbb ccc https://a.very.long.url/that/does/not/fit ddd", 10)
	want := "aaa bbb\nccc\nhttps://a.very.long.url/that/does/not/fit\nddd"
	if got != want {
		t.Errorf("wrap:\n%s\nwant\n%s", got, want)
	}
}

func TestFirstName(t *testing.T) {
	for in, want := range map[Address]string{
		{Name: "Chuck Lever"}:            "Chuck",
		{Name: "Lever, Chuck"}:           "Chuck",
		{Name: ""}:                       "",
		{Name: "cel@kernel.org"}:         "",
		{Name: `"Jason Gunthorpe"`}:      "Jason",
		{Name: "Zhu Yanjun", Email: "x"}: "Zhu",
	} {
		if got := firstName(in); got != want {
			t.Errorf("%q: %q, want %q", in.Name, got, want)
		}
	}
}

func TestSignature(t *testing.T) {
	a := Signature("INFO: task dd:174 blocked for more than 122 seconds.")
	b := Signature("INFO: task dd:180 blocked for more than 10 seconds.")
	if a != b {
		t.Errorf("%q != %q", a, b)
	}
	if Signature("BUG: KASAN: slab-use-after-free in svc_rdma_send") == Signature("BUG: KASAN: slab-use-after-free in svc_rdma_sendto") {
		t.Error("different functions must differ")
	}
}

// Judge is reproducible: the same series and runs give the same verdict
// and interval, and a budget spent without an answer is Inconclusive.
func TestJudgeReproducibleAndAdaptive(t *testing.T) {
	c := testConfig()
	in := input()
	in.Metrics = metrics(2, 0.92, 1, 1.07)
	a := Judge(Rand(in.Thread), c.Policy(), in)
	b := Judge(Rand(in.Thread), c.Policy(), in)
	if a.Outcome != flow.Regression || a.Decision.Comparisons[0].CI != b.Decision.Comparisons[0].CI {
		t.Errorf("not reproducible: %v %v vs %v", a.Outcome, a.Decision.Comparisons[0].CI, b.Decision.Comparisons[0].CI)
	}
	in.Metrics = metrics(5, 1, 1, 1)
	for i := range in.Metrics {
		in.Metrics[i].Base = in.Metrics[i].Base[:4]
		in.Metrics[i].Cand = in.Metrics[i].Cand[:4]
	}
	v := Judge(Rand(in.Thread), c.Policy(), in)
	if v.Outcome != flow.Inconclusive || v.NeedMore() != 6 || Mailed(v.Outcome) {
		t.Errorf("4 runs: want Inconclusive asking 6 more, got %v more=%d", v.Outcome, v.NeedMore())
	}
	// A base that crashes too is not the series' fault.
	in = input()
	in.BaseCrashes = []Crash{{Title: "INFO: task dd:174 blocked for more than 122 seconds."}}
	in.CandCrashes = []Crash{{Title: "INFO: task dd:190 blocked for more than 122 seconds."}}
	if v := Judge(Rand(in.Thread), c.Policy(), in); v.Outcome != flow.Infra {
		t.Errorf("shared crash: %v, want INFRA", v.Outcome)
	}
}

// An author address that is not one plain mailbox (`From: Evil
// <a@x,b@y,c@z>` leaves lore's lenient parser as one address with
// commas) gives no envelope: never three recipients behind one To.
func TestRecipientsOneStrictAuthor(t *testing.T) {
	c := testConfig()
	v := verdicts(t)[flow.Regression]
	for _, bad := range []string{"a@x,b@y,c@z", `"a,b"@x.example`, "a@[127.0.0.1]", "a\r\nBcc: b@y@z", "a b@x.example", "nobody"} {
		in := *v.In
		in.Thread.Author = Address{Name: "Evil", Email: bad}
		w := v
		w.In = &in
		m, err := RenderEmail(&c, &w, "x@rdmabot.example.org", testNow)
		if err != nil {
			t.Fatal(err)
		}
		if env, err := m.Recipients(); !errors.Is(err, ErrBadAddress) {
			t.Errorf("author %q: envelope %q, %v; want ErrBadAddress", bad, env, err)
		}
	}
	m, err := RenderEmail(&c, &v, "x@rdmabot.example.org", testNow)
	if err != nil {
		t.Fatal(err)
	}
	env, err := m.Recipients()
	if err != nil || len(env) != 4 || env[0] != "cel@kernel.org" {
		t.Errorf("a plain author: %q %v", env, err)
	}
	for in, want := range map[string]string{"Chuck Lever <cel@kernel.org>": "cel@kernel.org", "cel@kernel.org": "cel@kernel.org",
		`"Lever, Chuck" <chuck.lever+nfs@oracle.com>`: "chuck.lever+nfs@oracle.com"} {
		if got, err := Mailbox(in); got != want || err != nil {
			t.Errorf("Mailbox(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// A subject is quoted on one line and capped: neither a line break nor
// a thousand characters get into the reply's header or body.
func TestSubjectCapped(t *testing.T) {
	c := testConfig()
	v := verdicts(t)[flow.Regression]
	in := *v.In
	in.Thread.Subject = "[PATCH] x\r\nBcc: victim@example.org\x00\x1b[2J " + strings.Repeat("é", 1000)
	v.In = &in
	m, err := RenderEmail(&c, &v, "x@rdmabot.example.org", testNow)
	if err != nil {
		t.Fatal(err)
	}
	raw := m.Bytes()
	head, _, _ := strings.Cut(string(raw), "\n\n")
	for _, l := range strings.Split(head, "\n") {
		if len(l) > 998 {
			t.Errorf("header line of %d octets: %.60q...", len(l), l)
		}
	}
	msg, err := mail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get("Bcc") != "" {
		t.Error("the subject added a header")
	}
	subj, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil || !strings.HasPrefix(subj, "Re: [PATCH] x Bcc: victim@example.org[2J éé") || !strings.HasSuffix(subj, "é...") ||
		utf8.RuneCountInString(subj) != len("Re: ")+MaxSubject {
		t.Errorf("Subject %q (%d characters) %v", subj, utf8.RuneCountInString(subj), err)
	}
	for _, l := range strings.Split(m.Body, "\n") {
		if strings.HasPrefix(l, "patch subject:") && (utf8.RuneCountInString(l) > 250 || strings.ContainsAny(l, "\r\x00\x1b")) {
			t.Errorf("body line %.80q...", l)
		}
		if strings.HasPrefix(l, "Bcc:") {
			t.Errorf("the subject broke the body: %q", l)
		}
	}
}

// Every reply that decides on the metrics says by which rule, with the
// configured figures; one decided by a transport fault, or with nothing
// compared, does not.
func TestDecisionRule(t *testing.T) {
	c := testConfig()
	in := input()
	v := Judge(Rand(in.Thread), c.Policy(), in)
	if v.Outcome != flow.Pass {
		t.Fatalf("%s: %s", v.Outcome, v.Reason)
	}
	want := "The rule: a metric is a regression (or an improvement) when the Mann-Whitney p is below 0.0011, its median moved 2.5% or more, and its 99% interval reaches a change of 5%; it passes when the interval rules out a loss of 5% or more; else more runs are asked for, up to 30 per kernel."
	if got := DecisionRule(&c, &v); got != want {
		t.Errorf("rule %q\nwant %q", got, want)
	}
	if got := DecisionRule(&c, &Verdict{Outcome: flow.Crash}); got != "" {
		t.Errorf("a crash has a rule: %q", got)
	}
}
