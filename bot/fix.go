package bot

import (
	"context"
	"fmt"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// Fix follow-up: a series that names a failure the bot reported (its
// Closes: names the bot's reply, or its Fixes: names the commit a
// mainline bisection blamed) reruns that test with the fix, on that
// test's base, and its reply says whether the failure is gone.

// reportedTest finds the reported test a series names, and how it names
// it (ok false: it names none).
func (b *Bot) reportedTest(ctx context.Context, s flow.Series, tr *Trace) (t store.Test, how string, ok bool, err error) {
	if idx, isIndex := b.stages.Report.(ReplyIndex); isIndex {
		for _, id := range s.Closes {
			t, ok, err := b.testOfReply(ctx, idx, id)
			if err != nil {
				return t, "", false, err
			}
			if ok {
				return t, "Closes: " + id, true, nil
			}
			tr.Logf("Closes: %s names no failure the bot reported", id)
		}
	}
	for _, c := range s.Fixes {
		t, ok, err := b.st.CulpritTest(ctx, b.st.DB, c)
		if err != nil {
			return t, "", false, flow.MarkInfra(err)
		}
		if ok && t.Base != "" {
			return t, "Fixes: " + c, true, nil
		}
	}
	return t, "", false, nil
}

// testOfReply is the reported series test one of the bot's replies
// answered, when it reported a failure.
func (b *Bot) testOfReply(ctx context.Context, idx ReplyIndex, replyID string) (store.Test, bool, error) {
	msgID, version, ok, err := idx.Answered(ctx, replyID)
	if err != nil || !ok {
		return store.Test{}, false, flow.MarkInfra(err)
	}
	t, ok, err := b.st.ReportedTest(ctx, b.st.DB, msgID, version)
	if err != nil {
		return t, false, flow.MarkInfra(err)
	}
	return t, ok && t.Base != "", nil
}

// fixFollowUp is what a fix test's reply says of the test it reran.
func (b *Bot) fixFollowUp(ctx context.Context, t store.Test, s flow.Series, tr *Trace) (*flow.FixFollowUp, error) {
	orig, err := b.st.Test(ctx, b.st.DB, t.FixOf)
	if err != nil {
		return nil, flow.MarkInfra(err)
	}
	f := &flow.FixFollowUp{Test: orig.ID, Verdict: orig.Verdict, URL: b.testURL(orig.ID), OnTop: t.ApplyOn != "" && t.ApplyOn == orig.Candidate,
		Confirmed: flow.Fixed(t.Verdict)}
	if orig.Kind == store.KindMainline {
		f.Head = fmt.Sprintf("%s %s", orig.Tree, short(orig.Candidate))
	}
	// How the series named it, found again as reportedTest found it.
	if idx, ok := b.stages.Report.(ReplyIndex); ok {
		for _, id := range s.Closes {
			r, ok, err := b.testOfReply(ctx, idx, id)
			if err != nil {
				return nil, err
			}
			if ok && r.ID == orig.ID {
				f.Reply = id
				break
			}
		}
	}
	for _, c := range s.Fixes {
		if f.Reply != "" {
			break
		}
		r, ok, err := b.st.CulpritTest(ctx, b.st.DB, c)
		if err != nil {
			return nil, flow.MarkInfra(err)
		}
		if ok && r.ID == orig.ID {
			f.Culprit = c
			break
		}
	}
	tr.Logf("fix follow-up of test %d (%s): %s, confirmed fixed: %v", orig.ID, orig.Verdict, t.Verdict, f.Confirmed)
	return f, nil
}

// applyFix applies a fix on top of what the test it reruns measured (the
// reported series, or mainline head), as a separate fix goes in; it
// returns "" when the test is no fix, or the fix does not apply there
// (then it goes on the base alone, in place of the reported series, as a
// new version of it does).
func (b *Bot) applyFix(ctx context.Context, t *store.Test, s flow.Series, tr *Trace) (string, error) {
	if t.FixOf == 0 {
		return "", nil
	}
	orig, err := b.st.Test(ctx, b.st.DB, t.FixOf)
	if err != nil {
		return "", flow.MarkInfra(err)
	}
	if orig.Candidate == "" {
		return "", nil
	}
	cand, err := b.stages.Build.Apply(ctx, flow.Base{Tree: t.Tree, Commit: orig.Candidate}, s, tr)
	if err != nil {
		if infraOrInterrupted(ctx, err) {
			return "", err
		}
		tr.Logf("the fix does not apply on top of test %d's candidate (%v): applying it on the base, in its place", orig.ID, err)
		t.ApplyOn = ""
		return "", nil
	}
	t.ApplyOn = orig.Candidate
	tr.Logf("applied on top of test %d's candidate (%s)", orig.ID, short(orig.Candidate))
	return cand, nil
}
