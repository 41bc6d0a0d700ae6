package bot_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// A command by mail is acted on where GitHub's and the command line's
// are (bot.Act): a test on the tree and branch it names, a retest, and,
// for a tree or branch the bot does not have or a command its transport
// refused, an answer to the sender saying why. Each mail acts once.
func TestMailCommandsActedOnOnce(t *testing.T) {
	h := newHarness(t, testConfig(), "")
	asked := func(cmd string, c flow.Command) flow.Series {
		s := series("<s@x>", "[PATCH] svcrdma: harmless")
		c.MsgID, c.From, c.Line = cmd, "dev@example.org", "#rdmabot "+c.Verb
		s.Command = &c
		return s
	}
	h.ingest.Add(asked("<tree@x>", flow.Command{Verb: flow.CommandTest, Tree: "mainline", Branch: "master"}))
	h.ingest.Add(asked("<again@x>", flow.Command{Verb: flow.CommandRetest}))
	h.ingest.Add(asked("<notree@x>", flow.Command{Verb: flow.CommandTest, Tree: "nosuchtree"}))
	h.ingest.Add(asked("<nobranch@x>", flow.Command{Verb: flow.CommandTest, Tree: "mainline", Branch: "nosuchbranch"}))
	h.ingest.Add(asked("<stranger@x>", flow.Command{Verb: flow.CommandTest, Refused: "You are a stranger."}))
	// The same mails read again (a restart re-reads the window).
	h.ingest.Add(asked("<tree@x>", flow.Command{Verb: flow.CommandTest, Tree: "mainline", Branch: "master"}))
	h.ingest.Add(asked("<notree@x>", flow.Command{Verb: flow.CommandTest, Tree: "nosuchtree"}))
	h.wait("the answers", 60*time.Second, func() bool { return h.report.Count() == 5 })

	// Its key names the series' tree and branch as the command set them.
	if tt := h.testDone("series:<s@x>:v1:mainline/master:cmd:<tree@x>"); tt.Tree != "mainline" {
		t.Errorf("the test on mainline/master ran on %s", tt.Tree)
	}
	h.testDone("series:<s@x>:v1::cmd:<again@x>")
	for key, want := range map[string]string{
		"refused:<notree@x>":   `I know no tree "nosuchtree" (known: mainline).`,
		"refused:<nobranch@x>": `Tree mainline has no branch "nosuchbranch" here (known: master).`,
		"refused:<stranger@x>": "You are a stranger.",
	} {
		r, ok := h.report.Get(key)
		if !ok || r.Verdict != flow.Refused || r.Summary != want || r.Origin.Command == nil || r.Origin.Command.MsgID != strings.TrimPrefix(key, "refused:") {
			t.Errorf("%s: %v %s %q (origin %+v), want REFUSED %q to the command", key, ok, r.Verdict, r.Summary, r.Origin.Command, want)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := h.report.Count(); n != 5 {
		t.Errorf("%d answers, want 5: a command mail read twice acts once", n)
	}

	// The same words from GitHub, where there is no thread of the
	// bot's: the asker is told at once, nothing is recorded.
	var ce *flow.CommandError
	_, err := h.bot.Act(context.Background(), flow.Command{Verb: flow.CommandRetest}, nil, flow.Origin{Kind: "github", Repo: "o/r", Issue: 404})
	if !errors.As(err, &ce) || ce.Why != "there is no test here to run again" {
		t.Errorf("retest with no test: %v", err)
	}
	_, err = h.bot.Act(context.Background(), flow.Command{Verb: flow.CommandCancel}, nil, flow.Origin{Kind: "github", Repo: "o/r", Issue: 404})
	if !errors.As(err, &ce) || ce.Why != "there is no test here to cancel" {
		t.Errorf("cancel with no test: %v", err)
	}
	_, err = h.bot.Act(context.Background(), flow.Command{Verb: flow.CommandBisect, Tree: "nosuchtree", Good: "a", Bad: "b"}, nil, flow.Origin{Kind: "cli"})
	if !errors.As(err, &ce) {
		t.Errorf("bisect of an unknown tree: %v", err)
	}
}

// An author's own "#rdmabot test" and "retest" count against
// bot.author_daily_tests with their postings: past it the command is
// answered, to its sender alone, that it was not tested. A maintainer's
// command on the same series is not the author's and still runs.
func TestAuthorOwnCommandsCount(t *testing.T) {
	cfg := testConfig()
	cfg.AuthorDailyTests = 2
	h := newHarness(t, cfg, "")
	asked := func(cmd, from string) flow.Series {
		s := series("<own@x>", "[PATCH] svcrdma: harmless")
		s.Command = &flow.Command{Verb: flow.CommandTest, MsgID: cmd, From: from, Line: "#rdmabot test"}
		return s
	}
	h.ingest.Add(series("<own@x>", "[PATCH] svcrdma: harmless"))
	h.wait("the posting's reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	for _, id := range []string{"<c1@x>", "<c2@x>", "<c3@x>"} {
		h.ingest.Add(asked(id, "DEV@example.org"))
	}
	h.ingest.Add(asked("<m1@x>", "maintainer@example.org"))
	h.wait("the answers", 60*time.Second, func() bool { return h.report.Count() == 5 })
	h.testDone("series:<own@x>:v1::cmd:<c1@x>")
	h.testDone("series:<own@x>:v1::cmd:<m1@x>")
	for _, key := range []string{"refused:<c2@x>", "refused:<c3@x>"} {
		r, ok := h.report.Get(key)
		if !ok || r.Verdict != flow.Refused || !strings.Contains(r.Summary, "Not tested: its sender's postings and own commands started 2 tests in 24 hours") {
			t.Errorf("%s: %v %s %q, want REFUSED past the author's bound", key, ok, r.Verdict, r.Summary)
		}
	}
	// Read back from the store in a later ingest: the posting and the
	// author's one test, not the maintainer's.
	h.ingest.Add(asked("<c4@x>", "dev@example.org"))
	h.wait("the next answer", 60*time.Second, func() bool { return h.report.Count() == 6 })
	if r, _ := h.report.Get("refused:<c4@x>"); !strings.Contains(r.Summary, "started 2 tests in 24 hours") {
		t.Errorf("a later command: %s %q", r.Verdict, r.Summary)
	}
	time.Sleep(300 * time.Millisecond)
	if n := h.report.Count(); n != 6 {
		t.Errorf("%d answers, want 6", n)
	}
}
