package lore

import (
	"testing"
	"time"
)

// A Stream flushes once per FlushEvery of archive time, the series
// settled a window before the newest mail; an unreadable message is
// reported after the flush it triggered, and the stream goes on; Close
// gives what is left; a window of 0 holds everything until Close.
func TestStream(t *testing.T) {
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	core := "drivers/infiniband/core/cma.c"
	s := &Stream{A: newTestAssembler(t), Window: 30 * day}
	add := func(m tmail) *Assembly {
		t.Helper()
		out, err := s.Add(m.raw(), m.date, false)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := add(tmail{id: "a", subject: "[PATCH] a", body: diffBody(core), date: t0}); out == nil || len(out.Series) != 0 {
		t.Fatalf("first mail: %+v", out)
	}
	if out := add(tmail{id: "b", subject: "[PATCH] b", body: diffBody(core), date: t0.Add(FlushEvery - time.Hour)}); out != nil {
		t.Fatalf("flushed before FlushEvery passed: %+v", out)
	}
	if out := add(tmail{id: "c", subject: "[PATCH] c", body: diffBody(core), date: t0.Add(20 * day)}); out == nil || len(out.Series) != 0 {
		t.Fatalf("day 20: nothing is 30 days old yet: %+v", out)
	}
	// 40 days on: a and b are settled (30 days before the newest), c is not yet.
	out, err := s.Add([]byte("not a mail"), t0.Add(40*day), false)
	if out == nil || len(out.Series) != 2 || out.Series[0].RootMessageID != "a" || out.Series[1].RootMessageID != "b" {
		t.Fatalf("flush at day 40: %+v", out)
	}
	if err == nil {
		t.Error("an unreadable message was not reported")
	}
	if out := s.Close(); len(out.Series) != 1 || out.Series[0].RootMessageID != "c" {
		t.Fatalf("close: %+v", out)
	}

	whole := &Stream{A: newTestAssembler(t)}
	for i, id := range []string{"x", "y"} {
		if out, err := whole.Add(tmail{id: id, subject: "[PATCH] " + id, body: diffBody(core), date: t0.Add(time.Duration(i) * 100 * day)}.raw(), t0.Add(time.Duration(i)*100*day), false); out != nil || err != nil {
			t.Fatalf("window 0 flushed: %+v %v", out, err)
		}
	}
	if out := whole.Close(); len(out.Series) != 2 {
		t.Fatalf("close of the whole archive: %d series", len(out.Series))
	}
}
