package lore

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A Stream flushes once per FlushEvery of its clock, the series settled
// a window before it; the clock moves by what two consecutive messages
// say they were written, not by their arrival; an unreadable message is
// reported and changes nothing; a deletion forgets; Close gives what is
// left; a window of 0 holds everything until Close.
func TestStream(t *testing.T) {
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	core := "drivers/infiniband/core/cma.c"
	s := &Stream{A: newTestAssembler(t), Window: 30 * day}
	// Every message arrives a year late: arrival does not move the clock.
	late := 365 * day
	add := func(id string, d time.Duration) *Assembly {
		t.Helper()
		out, err := s.Add(tmail{id: id, subject: "[PATCH] " + id, body: diffBody(core), date: t0.Add(d)}.raw(), t0.Add(d+late), false)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := add("a", 0); out != nil {
		t.Fatalf("one message set the clock: %+v", out)
	}
	if out := add("b", FlushEvery-time.Hour); out == nil || len(out.Series) != 0 {
		t.Fatalf("the first clock flushes nothing: %+v", out)
	}
	if out := add("c", 20*day); out != nil {
		t.Fatalf("flushed before FlushEvery passed (the clock is b's): %+v", out)
	}
	if out, err := s.Add([]byte("not a mail"), t0.Add(40*day+late), false); out != nil || err == nil {
		t.Fatalf("an unreadable message: %+v, %v", out, err)
	}
	if out := add("d", 40*day); out == nil || len(out.Series) != 0 {
		t.Fatalf("day 20: nothing is 30 days old yet: %+v", out)
	}
	// The clock is at day 40: a and b are settled, c is not yet.
	out := add("e", 41*day)
	if out == nil || len(out.Series) != 2 || out.Series[0].RootMessageID != "a" || out.Series[1].RootMessageID != "b" {
		t.Fatalf("flush at day 40: %+v", out)
	}
	if out, err := s.Add(tmail{id: "d", subject: "[PATCH] d"}.raw(), t0.Add(42*day+late), true); out != nil || err != nil {
		t.Fatalf("deletion: %+v, %v", out, err)
	}
	if _, err := s.Add([]byte("not a mail"), t0, true); err == nil {
		t.Error("an unreadable deletion was not reported")
	}
	if out := s.Close(); len(out.Series) != 2 || out.Series[0].RootMessageID != "c" || out.Series[1].RootMessageID != "e" {
		t.Fatalf("close: %+v", out)
	}

	whole := &Stream{A: newTestAssembler(t)}
	for i, id := range []string{"x", "y", "z"} {
		d := time.Duration(i) * 100 * day
		if out, err := whole.Add(tmail{id: id, subject: "[PATCH] " + id, body: diffBody(core), date: t0.Add(d)}.raw(), t0.Add(d), false); out != nil || err != nil {
			t.Fatalf("window 0 flushed: %+v %v", out, err)
		}
	}
	if out := whole.Close(); len(out.Series) != 3 {
		t.Fatalf("close of the whole archive: %d series", len(out.Series))
	}
}

// TestStreamArchiveGapsGolden streams an archive whose mirror stopped
// committing for 64 days in the middle of a posting and caught up later
// (four such jumps in 2025-26 split series in two). Mail
// written on both sides of the gap is minutes apart: the streamed scan
// must find what the whole archive held at once finds, one complete
// series with the replies committed after the gap. Also in it: a Date
// far in the future (clamped to its post-gap arrival) that must not
// move the clock, and a posting whose sender's clock is a year behind,
// its second patch ten days late, that must wait a window like any
// other. It compares the streamed series with a golden file and with
// the whole-archive assembly.
func TestStreamArchiveGapsGolden(t *testing.T) {
	t0 := time.Date(2024, 1, 20, 14, 31, 0, 0, time.UTC)
	day := 24 * time.Hour
	gap := 64 * day
	svc := "net/sunrpc/xprtrdma/svc_rdma_sendto.c"
	chuck := "Chuck <cel@example.org>"
	type arrival struct {
		m      tmail
		commit time.Time
	}
	var mails []arrival
	commit := t0.Add(-40 * day)
	// add appends mail committed a minute after the previous one, or at
	// its Date when that is later (the mirror keeps up).
	add := func(m tmail) {
		commit = commit.Add(time.Minute)
		if m.date.After(commit) {
			commit = m.date.Add(time.Minute)
		}
		mails = append(mails, arrival{m, commit})
	}
	chatter := func(from, to time.Duration) {
		for d := from; d < to; d += day {
			add(tmail{id: "chat" + t0.Add(d).Format("0102"), from: "Chat <chat@example.org>", subject: "a question", body: "Why?\n", date: t0.Add(d)})
		}
	}
	chatter(-40*day, 0)
	add(tmail{id: "c0", from: chuck, subject: "[PATCH 0/4] svcrdma: gap", body: "Cover.\n", date: t0})
	for i, id := range []string{"p1", "p2"} {
		add(tmail{id: id, from: chuck, subject: "[PATCH " + string(rune('1'+i)) + "/4] svcrdma: step", irt: "c0", refs: "<c0>", body: diffBody(svc), date: t0.Add(time.Duration(i+1) * time.Minute)})
	}
	// The mirror stops here and catches up 64 days later.
	commit = commit.Add(gap)
	add(tmail{id: "skew", from: "Skew <skew@example.org>", subject: "clock in the future", body: "Hi.\n", date: t0.Add(300 * day)})
	add(tmail{id: "chat-gap", from: "Chat <chat@example.org>", subject: "a question", body: "Why?\n", date: t0.Add(30 * time.Minute)})
	for i, id := range []string{"p3", "p4"} {
		add(tmail{id: id, from: chuck, subject: "[PATCH " + string(rune('3'+i)) + "/4] svcrdma: step", irt: "c0", refs: "<c0>", body: diffBody(svc), date: t0.Add(time.Duration(i+3) * time.Minute)})
	}
	add(tmail{id: "r0", from: "Rev <rev@example.org>", subject: "Re: [PATCH 0/4] svcrdma: gap", irt: "c0", refs: "<c0>", body: "Reviewed-by: Rev <rev@example.org>\n", date: t0.Add(2 * day)})
	chatter(day, 10*day)
	add(tmail{id: "r3", from: "Tester <test@example.org>", subject: "Re: [PATCH 3/4] svcrdma: step", irt: "p3", refs: "<c0> <p3>", body: "Tested-by: Tester <test@example.org>\n", date: t0.Add(10 * day)})
	chatter(11*day, 50*day)
	yearAgo := t0.Add(-365 * day)
	add(tmail{id: "s1", from: "Slow <slow@example.org>", subject: "[PATCH 1/2] RDMA/core: slow clock", body: diffBody(svc), date: yearAgo})
	chatter(50*day, 60*day)
	add(tmail{id: "s2", from: "Slow <slow@example.org>", subject: "[PATCH 2/2] RDMA/core: slow clock", irt: "s1", refs: "<s1>", body: diffBody(svc), date: yearAgo.Add(time.Minute)})
	add(tmail{id: "s-r", from: "Rev <rev@example.org>", subject: "Re: [PATCH 1/2] RDMA/core: slow clock", irt: "s1", refs: "<s1>", body: "Acked-by: Rev <rev@example.org>\n", date: t0.Add(70 * day)})
	chatter(70*day, 140*day)

	scan := func(window time.Duration) []string {
		s := &Stream{A: newTestAssembler(t), Window: window}
		var out []string
		flushed := 0
		keep := func(asm *Assembly) {
			for _, sr := range asm.Series {
				var b strings.Builder
				writeSeries(&b, sr)
				out = append(out, b.String())
			}
		}
		for _, a := range mails {
			asm, err := s.Add(a.m.raw(), a.commit, false)
			if err != nil {
				t.Fatal(err)
			}
			if asm != nil {
				keep(asm)
			}
		}
		flushed = len(out)
		keep(s.Close())
		if window > 0 && flushed != len(out) {
			t.Errorf("%d of %d series were left for Close: the stream did not flush them", len(out)-flushed, len(out))
		}
		return out
	}
	streamed, whole := scan(30*day), scan(0)
	golden(t, "series/stream-gaps.txt", []byte(strings.Join(streamed, "")))
	slices.Sort(streamed)
	slices.Sort(whole)
	if !slices.Equal(streamed, whole) {
		t.Errorf("the streamed scan differs from the whole archive's:\n--- streamed\n%s\n--- whole\n%s", strings.Join(streamed, ""), strings.Join(whole, ""))
	}
}
