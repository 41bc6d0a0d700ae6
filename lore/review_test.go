package lore

import (
	"testing"
	"time"
)

// Other bots' reviews in a thread are kept with their link: Sashiko's
// page from its signature (as its mails to the lists end, 2026), a
// syzbot or 0-day mail by its Message-ID; the same words from anyone
// else are a reply like any other, and a Sashiko link elsewhere in a
// body is not taken.
func TestAssembleReviews(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	core := "net/sunrpc/xprtrdma/svc_rdma_rw.c"
	sashiko := "Thank you for your contribution! Sashiko AI review found 1 potential issue(s) to consider:\n" +
		"- [High] The Write chunk's SQEs are counted twice.\n--\n\n> diff\n\nDoes this overflow the Send Queue?\n\n" +
		"-- \nSashiko AI review \u00b7 https://sashiko.dev/#/patchset/c%40example.org?part=1\n"
	mails := []tmail{
		{id: "c", subject: "[PATCH 0/1] W", body: "cover\n", date: t0},
		{id: "p1", subject: "[PATCH 1/1] a", irt: "c", refs: "<c>", body: diffBody(core), date: t0.Add(time.Minute)},
		{id: "s1", from: "sashiko-bot@kernel.org", subject: "Re: [PATCH 1/1] a", irt: "p1", refs: "<c> <p1>", body: sashiko, date: t0.Add(time.Hour)},
		{id: "z1", from: "syzbot <syzbot+0123abcd@syzkaller.appspotmail.com>", subject: "Re: [PATCH 0/1] W", irt: "c", refs: "<c>",
			body: "syzbot has tested the proposed patch and the reproducer did not trigger any issue\n", date: t0.Add(2 * time.Hour)},
		{id: "x1", from: "Someone <someone@example.org>", subject: "Re: [PATCH 1/1] a", irt: "p1", refs: "<c> <p1>",
			body: "-- \nSashiko AI review \u00b7 https://sashiko.dev/#/patchset/elsewhere\n", date: t0.Add(3 * time.Hour)},
	}
	asm := assemble(t, mails...)
	if len(asm.Series) != 1 {
		t.Fatalf("%d series", len(asm.Series))
	}
	got := asm.Series[0].Reviews
	if len(got) != 2 || got[0].By != "Sashiko AI review" || got[0].MessageID != "s1" || got[0].URL != "https://sashiko.dev/#/patchset/c%40example.org?part=1" ||
		got[1].By != "syzbot" || got[1].MessageID != "z1" || got[1].URL != "" {
		t.Errorf("reviews %+v", got)
	}
}
