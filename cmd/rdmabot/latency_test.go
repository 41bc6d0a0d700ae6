package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/reports/outbox"
)

// The benchmark's figures from recorded times: posting -> verdict and
// -> reply per series, a PASS answered by its verdict (not mailed), a
// series not answered yet, and the nearest-rank p50/p95 per verdict
// over what was answered. Golden file (-update).
func TestLatencyReport(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 22, 32, 0, time.UTC)
	at := func(d string) time.Time {
		x, err := time.ParseDuration(d)
		if err != nil {
			t.Fatal(err)
		}
		return t0.Add(x)
	}
	series := []latencySeries{
		{Name: "build-break", Posted: at("0s"), Verdict: "BUILD_FAILED", Decided: at("50s"), Replied: at("52s")},
		{Name: "benign", Posted: at("10s"), Verdict: "PASS", Decided: at("4m40s")},
		{Name: "slowdown", Posted: at("20s"), Verdict: "REGRESSION", Decided: at("12m"), Replied: at("12m3s")},
		{Name: "crash", Posted: at("30s"), Verdict: "CRASH", Decided: at("7m"), Replied: at("7m2s")},
		{Name: "sq-accounting", Posted: at("40s"), Verdict: "REGRESSION", Decided: at("9m"), Replied: at("9m1s")},
		// Decided, but its mailed verdict's reply is not in the outbox yet.
		{Name: "waiting-reply", Posted: at("45s"), Verdict: "CRASH", Decided: at("6m")},
		{Name: "unanswered", Posted: at("50s")},
	}
	var out bytes.Buffer
	if writeLatency(&out, series, []string{"REGRESSION", "CRASH", "BUILD_FAILED"}) {
		t.Error("two series were not answered, yet all are said to be")
	}
	testenv.Golden(t, filepath.Join("testdata", "latency.golden"), out.Bytes(), *updateGolden)
	// The figures by hand: REGRESSION's answers took 11m43s and 8m21s,
	// so its p50 is the first (nearest rank 1 of 2) and its p95 the
	// second; PASS's only answer is its verdict, 4m30s after posting.
	for _, line := range []string{"REGRESSION    2       8m21s  11m43s", "PASS          1       4m30s  4m30s", "BUILD_FAILED  1       52s    52s"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("report lacks %q", line)
		}
	}
	if !writeLatency(io.Discard, series[:5], []string{"REGRESSION", "CRASH", "BUILD_FAILED"}) {
		t.Error("every series answered, yet not all are said to be")
	}
}

func TestNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 20; i++ {
		d = append(d, time.Duration(i)*time.Second)
	}
	if p50, p95 := nearestRank(d, 50), nearestRank(d, 95); p50 != 10*time.Second || p95 != 19*time.Second {
		t.Errorf("1..20 s: p50 %v p95 %v, want 10s 19s", p50, p95)
	}
	if p := nearestRank(d[:1], 50); p != time.Second {
		t.Errorf("one value: p50 %v", p)
	}
}

// A series is matched to its first test (a retest comes later) by the
// Message-ID it is stored under, or its root; a test still running
// decides nothing; its reply is the earliest outbox entry answering one
// of its mails.
func TestMatchAnswers(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	series := []latencySeries{
		{Name: "two-patches", IDs: []string{"cover@x", "p1@x", "p2@x"}},
		{Name: "running", IDs: []string{"run@x"}},
		{Name: "gave-up", IDs: []string{"infra@x"}},
	}
	tests := []latencyTest{
		{Test: store.Test{ID: 9, State: store.StateDone, Verdict: flow.Pass, UpdatedAt: t0.Add(time.Hour)}, MsgID: "p1@x", RootID: "cover@x"},
		{Test: store.Test{ID: 4, State: store.StateDone, Verdict: flow.Regression, UpdatedAt: t0}, MsgID: "p1@x", RootID: "cover@x"},
		{Test: store.Test{ID: 5, State: store.StateTesting, UpdatedAt: t0}, MsgID: "run@x"},
		{Test: store.Test{ID: 6, State: store.StateFailed, UpdatedAt: t0}, MsgID: "other@x", RootID: "infra@x"},
	}
	replies := []*outbox.Entry{
		{Created: t0.Add(2 * time.Minute), Raw: []byte("In-Reply-To: <p2@x>\nSubject: Re\n\nlater\n")},
		{Created: t0.Add(time.Minute), Raw: []byte("In-Reply-To: <p2@x>\nSubject: Re\n\nfirst\n")},
		{Created: t0, Raw: []byte("In-Reply-To: <elsewhere@x>\n\nnot ours\n")},
		{Created: t0, Raw: []byte("not a mail")},
	}
	matchAnswers(series, tests, replies)
	if s := series[0]; s.Verdict != "REGRESSION" || !s.Decided.Equal(t0) || !s.Replied.Equal(t0.Add(time.Minute)) {
		t.Errorf("two-patches: %s decided %v replied %v; want test 4's REGRESSION and the first reply", s.Verdict, s.Decided, s.Replied)
	}
	if s := series[1]; s.Verdict != "" || !s.Decided.IsZero() || !s.Replied.IsZero() {
		t.Errorf("running: %+v, want nothing yet", s)
	}
	if s := series[2]; s.Verdict != "FAILED" || !s.Decided.Equal(t0) {
		t.Errorf("gave-up: %+v, want FAILED", s)
	}
}

// rdmabot latency against a store as serve leaves it: the series posted
// (here by a command that does nothing: the tests and the reply are
// already there) are matched and printed, a series never decided makes
// it wait until its timeout and exit 1, a posting that fails and bad
// arguments stop it.
func TestLatencyCommand(t *testing.T) {
	cfgPath, cfg, st := shippedStore(t)
	ctx := context.Background()
	brk, benign := filepath.Join("..", "..", "examples", "seeded", "build-break.mbox"), filepath.Join("..", "..", "examples", "sample-series.mbox")
	for _, c := range []struct {
		msgID   string
		verdict flow.Outcome
		state   store.State
	}{
		{"20261206050000.1005-1-seed@rdmabot.invalid", flow.BuildFailed, store.StateDone},
		{"20261201100000.4242-1-ada@example.org", flow.Pass, store.StateDone},
		{"never@x", 0, store.StateTesting},
	} {
		id, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: c.msgID, Version: 1, Tree: "local", Subject: c.msgID, Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		tst := store.Test{Key: c.msgID, Kind: store.KindSeries, SeriesID: id, Tree: "local", State: c.state, Verdict: c.verdict}
		if tst.ID, _, err = st.AddTest(ctx, st.DB, tst); err != nil {
			t.Fatal(err)
		}
		if err := st.UpdateTest(ctx, st.DB, tst); err != nil {
			t.Fatal(err)
		}
	}
	ob, err := outbox.Open(ctx, st.DB, &cfg.Reports, cfg.DataDir, nil, time.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Enqueue(ctx, outbox.Reply{MessageID: "r1@rdmabot.invalid", Key: outbox.Key("email", "s@x", 1), Channel: "email",
		Outcome: "BUILD_FAILED", Recipient: "seed@rdmabot.invalid", Envelope: []string{"seed@rdmabot.invalid"},
		Raw: []byte("In-Reply-To: <20261206050000.1005-1-seed@rdmabot.invalid>\nSubject: Re: x\n\nbroken\n")}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	never := filepath.Join(t.TempDir(), "never.mbox")
	os.WriteFile(never, []byte("From x Mon Sep 17 00:00:00 2001\nMessage-Id: <never@x>\nSubject: [PATCH] n\n\nbody\n"), 0o644)
	noID := filepath.Join(t.TempDir(), "noid.mbox")
	os.WriteFile(noID, []byte("From x Mon Sep 17 00:00:00 2001\nSubject: [PATCH] n\n\nbody\n"), 0o644)

	latency := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"latency", "--config", cfgPath, "--post", "true", "--poll", "10ms"}, args...), &out, &errb)
		return out.String(), errb.String(), code
	}
	out, errs, code := latency("build-break="+brk, "benign="+benign)
	if code != 0 || !strings.Contains(out, "build-break") || !strings.Contains(out, "BUILD_FAILED") || !strings.Contains(out, "not mailed") {
		t.Errorf("answered series: exit %d\n%s%s", code, out, errs)
	}
	start := time.Now()
	out, _, code = latency("--timeout", "200ms", "never="+never, "benign="+benign)
	if code != exitAttention || !strings.Contains(out, "never") || !strings.Contains(out, "(none yet)") || time.Since(start) < 200*time.Millisecond {
		t.Errorf("a series never decided: exit %d after %v\n%s", code, time.Since(start), out)
	}
	for name, c := range map[string]struct {
		args []string
		code int
		says string
	}{
		"no series":       {nil, exitUsage, "NAME=MBOX"},
		"not NAME=MBOX":   {[]string{brk}, exitUsage, "is not NAME=MBOX"},
		"no Message-ID":   {[]string{"n=" + noID}, exitFailure, "no mail with a Message-ID"},
		"posting fails":   {[]string{"--post", "false", "b=" + brk}, exitFailure, "posting " + brk},
		"mbox is missing": {[]string{"b=" + never + ".gone"}, exitFailure, "no such file"},
	} {
		_, errs, code := latency(c.args...)
		if code != c.code || !strings.Contains(errs, c.says) {
			t.Errorf("%s: exit %d, %q; want %d saying %q", name, code, errs, c.code, c.says)
		}
	}
}
