package lore

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

var fixedNow = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestAssembler(t testing.TB) *Assembler {
	t.Helper()
	cfg := DefaultConfig()
	a, err := NewAssembler(AssemblerConfig{
		Paths: cfg.Paths, Lists: cfg.Lists, GracePeriod: cfg.GracePeriod.Duration,
		BotAddresses: []string{"rdmabot@example.org"},
		Now:          func() time.Time { return fixedNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// loadThreads parses every real thread message.
func loadThreads(t testing.TB) []*flow.Message {
	var msgs []*flow.Message
	for _, f := range threadFiles(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseMessage(raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func TestAssembleGolden(t *testing.T) {
	msgs := loadThreads(t)
	a := newTestAssembler(t)
	for _, m := range msgs {
		a.Add(m, m.ReceivedAt)
	}
	asm := a.Assemble()
	out, err := json.MarshalIndent(asm, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "series/threads.json", append(out, '\n'))

	// Whatever the order of arrival, the same series come out.
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 3; round++ {
		rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
		b := newTestAssembler(t)
		for _, m := range msgs {
			b.Add(m, m.ReceivedAt)
		}
		again, _ := json.MarshalIndent(b.Assemble(), "", "  ")
		if string(again) != string(out) {
			t.Fatalf("round %d: assembly depends on arrival order", round)
		}
	}
}

// mail builds a small message for the scenario tests.
type tmail struct {
	id, from, subject, irt, refs, body string
	date                               time.Time
}

func (m tmail) parse(t testing.TB) *flow.Message {
	t.Helper()
	msg, err := ParseMessage(m.raw())
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func (m tmail) raw() []byte {
	var b strings.Builder
	from := m.from
	if from == "" {
		from = "Dev One <dev@example.org>"
	}
	fmt.Fprintf(&b, "From: %s\nTo: linux-rdma@vger.kernel.org\nSubject: %s\nMessage-ID: <%s>\n", from, m.subject, m.id)
	d := m.date
	if d.IsZero() {
		d = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	}
	fmt.Fprintf(&b, "Date: %s\n", d.Format(time.RFC1123Z))
	if m.irt != "" {
		fmt.Fprintf(&b, "In-Reply-To: <%s>\n", m.irt)
	}
	if m.refs != "" {
		fmt.Fprintf(&b, "References: %s\n", m.refs)
	}
	b.WriteString("\n" + m.body)
	return []byte(b.String())
}

func diffBody(file string) string {
	return "Change.\n\nSigned-off-by: Dev One <dev@example.org>\n---\n" +
		"diff --git a/" + file + " b/" + file + "\nindex 1..2 100644\n--- a/" + file + "\n+++ b/" + file + "\n@@ -1 +1 @@\n-a\n+b\n"
}

func assemble(t *testing.T, mails ...tmail) *Assembly {
	t.Helper()
	a := newTestAssembler(t)
	for _, m := range mails {
		msg := m.parse(t)
		a.Add(msg, msg.Date.Add(time.Minute))
	}
	return a.Assemble()
}

func summary(s *Series) string {
	var idx []string
	for _, p := range s.Patches {
		idx = append(idx, fmt.Sprint(p.Index))
	}
	cover := "-"
	if s.Cover != nil {
		cover = s.Cover.MessageID
	}
	return fmt.Sprintf("v%d %q cover=%s patches=[%s] missing=%v complete=%v", s.Version, s.Subject, cover, strings.Join(idx, " "), s.Missing, s.Complete)
}

func TestAssembleScenarios(t *testing.T) {
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	core := "drivers/infiniband/core/cma.c"
	tests := []struct {
		name  string
		mails []tmail
		want  []string
	}{
		{"cover and patches replying to it", []tmail{
			{id: "c", subject: "[PATCH v2 0/2] Fix it", body: "cover\n 2 files changed, 2 insertions(+)\n", date: at(0)},
			{id: "p1", subject: "[PATCH v2 1/2] a: one", irt: "c", refs: "<c>", body: diffBody(core), date: at(1)},
			{id: "p2", subject: "[PATCH v2 2/2] a: two", irt: "c", refs: "<c>", body: diffBody("x.c"), date: at(2)},
		}, []string{`v2 "Fix it" cover=c patches=[1 2] missing=[] complete=true`}},
		{"chained without cover, patch 2 missing", []tmail{
			{id: "p1", subject: "[PATCH rdma-next 1/3] a", body: diffBody(core), date: at(0)},
			{id: "p3", subject: "[PATCH rdma-next 3/3] c", irt: "p2", refs: "<p1> <p2>", body: diffBody(core), date: at(2)},
		}, []string{`v1 "a" cover=- patches=[1 3] missing=[2] complete=false`}},
		{"new version posted as a reply to the old thread", []tmail{
			{id: "c1", subject: "[PATCH 0/1] Work", body: "v1\n", date: at(0)},
			{id: "p1", subject: "[PATCH 1/1] a", irt: "c1", refs: "<c1>", body: diffBody(core), date: at(1)},
			{id: "c2", subject: "[PATCH v2 0/1] Work", irt: "c1", refs: "<c1>", body: "v2\n", date: at(10)},
			{id: "q1", subject: "[PATCH v2 1/1] a", irt: "c2", refs: "<c1> <c2>", body: diffBody(core), date: at(11)},
		}, []string{
			`v1 "Work" cover=c1 patches=[1] missing=[] complete=true`,
			`v2 "Work" cover=c2 patches=[1] missing=[] complete=true`}},
		{"cover-less v2 chain inside the v1 thread", []tmail{
			{id: "a1", subject: "[PATCH 1/2] a", body: diffBody(core), date: at(0)},
			{id: "a2", subject: "[PATCH 2/2] b", irt: "a1", refs: "<a1>", body: diffBody(core), date: at(1)},
			{id: "b1", subject: "[PATCH v2 1/2] a", irt: "a1", refs: "<a1>", body: diffBody(core), date: at(5)},
			{id: "b2", subject: "[PATCH v2 2/2] b", irt: "a1", refs: "<a1>", body: diffBody(core), date: at(6)},
		}, []string{
			`v1 "a" cover=- patches=[1 2] missing=[] complete=true`,
			`v2 "a" cover=- patches=[1 2] missing=[] complete=true`}},
		{"RESEND is its own series, a duplicate is listed once", []tmail{
			{id: "p1", subject: "[PATCH] x", body: diffBody(core), date: at(0)},
			{id: "r1", subject: "[PATCH RESEND] x", body: diffBody(core), date: at(60 * 24)},
			{id: "d1", subject: "[PATCH 1/2] y", body: diffBody(core), date: at(1)},
			{id: "d2", subject: "[PATCH 2/2] y2", irt: "d1", refs: "<d1>", body: diffBody(core), date: at(2)},
			{id: "d2bis", subject: "[PATCH 2/2] y2", irt: "d1", refs: "<d1>", body: diffBody(core), date: at(3)},
		}, []string{
			`v1 "x" cover=- patches=[1] missing=[] complete=true`,
			`v1 "y" cover=- patches=[1 2] missing=[] complete=true`,
			`v1 "x" cover=- patches=[1] missing=[] complete=true`}},
		{"unthreaded patches sent together", []tmail{
			{id: "u1", subject: "[PATCH net-next 1/2] a", body: diffBody(core), date: at(0)},
			{id: "u2", subject: "[PATCH net-next 2/2] b", body: diffBody(core), date: at(1)},
			{id: "w2", subject: "[PATCH net-next 2/2] b", from: "Other <o@example.org>", body: diffBody(core), date: at(1)},
		}, []string{
			`v1 "a" cover=- patches=[1 2] missing=[] complete=true`,
			`v1 "b" cover=- patches=[2] missing=[1] complete=false`}},
		{"unthreaded cover and patches, one patch re-sent alone", []tmail{
			{id: "x0", subject: "[PATCH 0/3] Driver", body: "cover\n", date: at(0)},
			{id: "x1", subject: "[PATCH 1/3] d: one", body: diffBody(core), date: at(1)},
			{id: "x3", subject: "[PATCH 3/3] d: three", body: diffBody(core), date: at(2)},
			{id: "t0", subject: "[PATCH 0/3] Other", body: "cover\n", date: at(3)},
			{id: "t1", subject: "[PATCH 1/3] o: one", irt: "t0", refs: "<t0>", body: diffBody(core), date: at(4)},
			{id: "t3", subject: "[PATCH 3/3] o: three", irt: "t0", refs: "<t0>", body: diffBody(core), date: at(5)},
			{id: "x2", subject: "[PATCH 2/3] d: two", body: diffBody(core), date: at(30)},
		}, []string{
			`v1 "Driver" cover=x0 patches=[1 2 3] missing=[] complete=true`,
			`v1 "Other" cover=t0 patches=[1 3] missing=[2] complete=false`}},
		{"loop in References", []tmail{
			{id: "l1", subject: "[PATCH 1/2] a", irt: "l2", refs: "<l2>", body: diffBody(core), date: at(0)},
			{id: "l2", subject: "[PATCH 2/2] b", irt: "l1", refs: "<l1>", body: diffBody(core), date: at(1)},
			{id: "r", subject: "Re: [PATCH 2/2] b", irt: "r", refs: "<l1> <r>", body: "ok\n", date: at(2)},
		}, []string{`v1 "a" cover=- patches=[1 2] missing=[] complete=true`}},
		{"the bot's own mail is ignored", []tmail{
			{id: "b", from: "rdmabot <RDMABOT@example.org>", subject: "[PATCH] bot", body: diffBody(core), date: at(0)},
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			asm := assemble(t, tc.mails...)
			var got []string
			for _, s := range asm.Series {
				got = append(got, summary(s))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestAssembleStableIDAndGrace(t *testing.T) {
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	core := "include/rdma/ib_verbs.h"
	c := tmail{id: "c", subject: "[PATCH 0/2] W", body: "base-commit: 0123456789abcdef0123456789abcdef01234567\nchange-id: 20240601-w-1\n", date: t0}
	p1 := tmail{id: "p1", subject: "[PATCH 1/2] a", irt: "c", refs: "<c>", body: diffBody(core), date: t0.Add(time.Minute)}
	p2 := tmail{id: "p2", subject: "[PATCH 2/2] b", irt: "c", refs: "<c>", body: diffBody("x/y.c"), date: t0.Add(2 * time.Minute)}

	early := assemble(t, p1, p2).Series
	full := assemble(t, p1, p2, c).Series
	if len(early) != 1 || len(full) != 1 || early[0].ID != full[0].ID {
		t.Fatalf("the series ID changed when the cover arrived: %v / %v", early, full)
	}
	s := full[0]
	if s.BaseCommit != "0123456789abcdef0123456789abcdef01234567" || s.ChangeID != "20240601-w-1" {
		t.Errorf("base %q change-id %q", s.BaseCommit, s.ChangeID)
	}
	if strings.Join(s.MatchedPaths, ",") != core || !s.Relevant() {
		t.Errorf("matched %v", s.MatchedPaths)
	}
	if s.Lists[0] != "linux-rdma" {
		t.Errorf("lists %v", s.Lists)
	}

	partial := assemble(t, c, p1).Series[0]
	if partial.Complete || partial.Incomplete == "" || !strings.Contains(partial.Incomplete, "patch 2 of 2 missing") {
		t.Errorf("after the grace period: complete=%v incomplete=%q", partial.Complete, partial.Incomplete)
	}
	a := newTestAssembler(t)
	a.cfg.Now = func() time.Time { return t0.Add(time.Hour) }
	for _, m := range []tmail{c, p1} {
		msg := m.parse(t)
		a.Add(msg, msg.Date)
	}
	if s := a.Assemble().Series[0]; s.Incomplete != "" {
		t.Errorf("within the grace period it says %q", s.Incomplete)
	}
	// Mail dated long ago that the reader saw only now is within its
	// grace: the period runs from when it was seen, not from the archive.
	grace := DefaultConfig().GracePeriod.Duration
	for _, seen := range []time.Duration{grace / 2, grace} {
		b := newTestAssembler(t)
		for _, m := range []tmail{c, p1} {
			msg := m.parse(t)
			b.AddSeen(msg, msg.Date, fixedNow.Add(-seen))
		}
		s := b.Assemble().Series[0]
		if late := seen >= grace; (s.Incomplete != "") != late || !s.LastSeen.Equal(fixedNow.Add(-seen)) {
			t.Errorf("dated %v ago, seen %v ago: incomplete %q, last seen %v", fixedNow.Sub(t0), seen, s.Incomplete, s.LastSeen)
		}
	}
}

func TestAssembleRepliesTrailersCommands(t *testing.T) {
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	core := "net/sunrpc/xprtrdma/svc_rdma_rw.c"
	mails := []tmail{
		{id: "c", subject: "[PATCH 0/2] W", body: "cover\n", date: t0},
		{id: "p1", subject: "[PATCH 1/2] a", irt: "c", refs: "<c>", body: diffBody(core), date: t0.Add(time.Minute)},
		{id: "p2", subject: "[PATCH 2/2] b", irt: "c", refs: "<c>", body: diffBody(core), date: t0.Add(2 * time.Minute)},
		{id: "r1", from: "Rev Iewer <rev@example.org>", subject: "Re: [PATCH 1/2] a", irt: "p1", refs: "<c> <p1>",
			body: "> Signed-off-by: Dev One <dev@example.org>\n\nReviewed-by: Rev Iewer <rev@example.org>\nAcked-by: Someone Else <else@example.org>\n", date: t0.Add(time.Hour)},
		{id: "r2", from: "Maint <m@example.org>", subject: "Re: [PATCH 0/2] W", irt: "c", refs: "<c>",
			body: "Acked-by: Maint <m@example.org>\n\n#rdmabot test rdma for-next\n> #rdmabot retest\n#rdmabot frobnicate\n", date: t0.Add(2 * time.Hour)},
		{id: "ty", from: "Leon <leon@example.org>", subject: "Re: [PATCH 0/2] W", irt: "c", refs: "<c>",
			body: "\nOn Sat, 01 Jun 2024, Dev One wrote:\n> cover\n\nApplied, thanks!\n\n[1/2] a\n      https://git.kernel.org/rdma/rdma/c/0123456789ab\n", date: t0.Add(3 * time.Hour)},
		{id: "bot", from: "rdmabot <rdmabot@example.org>", subject: "Re: [PATCH 0/2] W", irt: "c", refs: "<c>",
			body: "#rdmabot test\n", date: t0.Add(4 * time.Hour)},
	}
	asm := assemble(t, mails...)
	if len(asm.Series) != 1 {
		t.Fatalf("%d series", len(asm.Series))
	}
	s := asm.Series[0]
	if got := trailerLines(s.Patches[0].Trailers); got != "Reviewed-by: Rev Iewer <rev@example.org>" {
		t.Errorf("patch 1 trailers %q (the Acked-by names someone else: b4 drops it)", got)
	}
	if got := trailerLines(s.Trailers); got != "Acked-by: Maint <m@example.org>" {
		t.Errorf("series trailers %q", got)
	}
	if len(s.Applied) != 1 || s.Applied[0].MessageID != "ty" || len(s.Applied[0].Commits) != 1 {
		t.Errorf("applied %+v", s.Applied)
	}
	// Only a maintainer's note means the series was taken.
	if len(s.AppliedBy(nil)) != 0 || len(s.AppliedBy([]string{"rev@example.org", "m@example.org"})) != 0 ||
		len(s.AppliedBy([]string{"m@example.org", "LEON@example.org"})) != 1 || s.Applied[0].Mail == nil || s.Applied[0].Mail.MessageID != "ty" {
		t.Errorf("AppliedBy: a note by %s counts only when they are a maintainer", s.Applied[0].By.Email)
	}
	if s.Replies != 3 {
		t.Errorf("replies %d, want 3 (the bot's own is not input)", s.Replies)
	}
	var cmds []string
	for _, c := range asm.Commands {
		cmds = append(cmds, fmt.Sprintf("%s %s/%s/%s err=%q series=%v", c.MessageID, c.Verb, c.Tree, c.Branch, c.Err, c.SeriesID == s.ID))
	}
	want := []string{
		`r2 test/rdma/for-next err="" series=true`,
		`r2 // err="unknown command \"frobnicate\" (known: test, retest, invalid, dup)" series=true`,
	}
	if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands\n%s\nwant\n%s", strings.Join(cmds, "\n"), strings.Join(want, "\n"))
	}
}

func trailerLines(ts []Trailer) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.String())
	}
	return strings.Join(out, "\n")
}

func TestTreeTag(t *testing.T) {
	for in, want := range map[string]string{
		"[PATCH FYI 1/1] x":           "",
		"[PATCH AUTOSEL 6.9 02/88] x": "6.9",
		"[PATCH RFC net-next v2] x":   "net-next",
		"[PATCH v2 rdma-rc] x":        "rdma-rc",
		"[GIT PULL] x":                "",
		"[PATCH vhost 1/7] x":         "vhost",
	} {
		if got := treeTag(ParseSubject(in).Tags); got != want {
			t.Errorf("treeTag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAssembleSecondMessageID(t *testing.T) {
	a := newTestAssembler(t)
	patch := "From: Dev One <dev@example.org>\nSubject: [PATCH] x\nMessage-ID: <first@example.org>\nMessage-ID: <second@example.org>\n" +
		"Date: Sat, 1 Jun 2024 12:00:00 +0000\n\n" + diffBody("include/rdma/ib_verbs.h")
	reply := "From: Rev <rev@example.org>\nSubject: Re: [PATCH] x\nMessage-ID: <r@example.org>\nIn-Reply-To: <second@example.org>\n" +
		"Date: Sat, 1 Jun 2024 13:00:00 +0000\n\nReviewed-by: Rev <rev@example.org>\n"
	for _, raw := range []string{reply, patch} {
		if err := a.AddRaw([]byte(raw), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	s := a.Assemble().Series
	if len(s) != 1 || trailerLines(s[0].Patches[0].Trailers) != "Reviewed-by: Rev <rev@example.org>" {
		t.Fatalf("the reply to the second Message-ID was not attached: %+v", s)
	}
	if !a.Remove("second@example.org") || a.Len() != 1 {
		t.Errorf("Remove by the second id: %d left", a.Len())
	}
}

func TestAssemblyContaining(t *testing.T) {
	asm := assemble(t,
		tmail{id: "c", subject: "[PATCH 0/1] W", body: "cover\n"},
		tmail{id: "p", subject: "[PATCH 1/1] a", irt: "c", refs: "<c>", body: diffBody("x.c")})
	for _, id := range []string{"c", "p"} {
		if s := asm.Containing(id); s == nil || s.CoverMessageID != "c" {
			t.Errorf("Containing(%q) = %v", id, s)
		}
	}
	if asm.Containing("nope") != nil {
		t.Error("found a series for an unknown id")
	}
}

func TestAssembleTrailersLikeB4(t *testing.T) {
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	core := "drivers/infiniband/core/cma.c"
	asm := assemble(t,
		tmail{id: "v1", subject: "[PATCH] cma: fix", body: diffBody(core), date: t0},
		tmail{id: "ack", from: "Rev <rev@example.org>", subject: "Re: [PATCH] cma: fix", irt: "v1", refs: "<v1>",
			body: "Acked-by: Rev <rev@example.org>\n", date: t0.Add(time.Hour)},
		// v2 posted in the v1 thread with the same diff: the ack carries.
		tmail{id: "v2", subject: "[PATCH v2] cma: fix it", irt: "v1", refs: "<v1>", body: "Reworded.\n\n" + diffBody(core)[len("Change.\n\n"):], date: t0.Add(2 * time.Hour)},
		// A review answering a message that is not in the archive: b4
		// drops it, even though an older reference is held.
		tmail{id: "lost", from: "Other <o@example.org>", subject: "Re: [PATCH v2] cma: fix it", irt: "offlist", refs: "<v1> <v2> <offlist>",
			body: "Reviewed-by: Other <o@example.org>\n", date: t0.Add(3 * time.Hour)},
	)
	if len(asm.Series) != 2 {
		t.Fatalf("%d series", len(asm.Series))
	}
	for _, s := range asm.Series {
		if got := trailerLines(s.Patches[0].Trailers); got != "Acked-by: Rev <rev@example.org>" {
			t.Errorf("v%d trailers %q", s.Version, got)
		}
	}
	if asm.Series[1].Replies != 1 {
		t.Errorf("the off-list reply still belongs to v2's thread: replies %d", asm.Series[1].Replies)
	}
}

// TestAssemblerFlush streams mail through an Assembler as lore scan
// does: a settled series comes out once and is forgotten, an open one
// keeps its patches and the replies under it until it settles.
func TestAssemblerFlush(t *testing.T) {
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	core := "drivers/infiniband/core/cma.c"
	a := newTestAssembler(t)
	add := func(m tmail) {
		t.Helper()
		msg := m.parse(t)
		a.Add(msg, m.date)
	}
	add(tmail{id: "old", subject: "[PATCH] old", body: diffBody(core), date: t0})
	add(tmail{id: "old-r", from: "Rev <rev@example.org>", subject: "Re: [PATCH] old", irt: "old", body: "Reviewed-by: Rev <rev@example.org>\n#rdmabot test\n", date: t0.Add(time.Hour)})
	add(tmail{id: "c", subject: "[PATCH 0/2] new", body: "cover\n", date: t0.Add(40 * day)})
	add(tmail{id: "p1", subject: "[PATCH 1/2] a", irt: "c", refs: "<c>", body: diffBody(core), date: t0.Add(40 * day)})
	add(tmail{id: "r", from: "Rev <rev@example.org>", subject: "Re: [PATCH 0/2] new", irt: "c", refs: "<c>", body: "Acked-by: Rev <rev@example.org>\n", date: t0.Add(41 * day)})

	out := a.Flush(t0.Add(41*day - 30*day))
	if len(out.Series) != 1 || out.Series[0].RootMessageID != "old" || trailerLines(out.Series[0].Patches[0].Trailers) != "Reviewed-by: Rev <rev@example.org>" {
		t.Fatalf("first flush: %+v", out.Series)
	}
	if len(out.Commands) != 1 || out.Commands[0].MessageID != "old-r" {
		t.Fatalf("first flush commands: %+v", out.Commands)
	}
	if a.Len() != 3 {
		t.Fatalf("%d messages held after the flush, want the open series' 3", a.Len())
	}
	// The last patch comes late; the series is still open and whole.
	add(tmail{id: "p2", subject: "[PATCH 2/2] b", irt: "c", refs: "<c>", body: diffBody(core), date: t0.Add(60 * day)})
	if out := a.Flush(t0.Add(60*day - 30*day)); len(out.Series) != 0 {
		t.Fatalf("an open series was flushed: %+v", out.Series)
	}
	out = a.Flush(t0.Add(1000 * day))
	if len(out.Series) != 1 || !out.Series[0].Complete || trailerLines(out.Series[0].Trailers) != "Acked-by: Rev <rev@example.org>" {
		t.Fatalf("last flush: %+v", out.Series)
	}
	if a.Len() != 0 {
		t.Fatalf("%d messages left", a.Len())
	}
}

// Only the tests ask how much an Assembler holds, or which series holds
// a message.

// Len is the number of messages held.
func (a *Assembler) Len() int { return len(a.byID) }

// Containing returns the series whose cover, root or patch has the
// Message-ID, or nil.
func (asm *Assembly) Containing(messageID string) *Series {
	for _, s := range asm.Series {
		if s.RootMessageID == messageID || s.CoverMessageID == messageID {
			return s
		}
		for _, p := range s.Patches {
			if p.MessageID == messageID {
				return s
			}
		}
	}
	return nil
}
