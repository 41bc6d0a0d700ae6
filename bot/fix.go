package bot

import (
	"context"

	"github.com/rdmabot/rdmabot/bot/store"
)

// Fix follow-up: a series whose Closes: names one of the bot's replies
// that reported a failure reruns that test with the fix, on that test's
// base and lab, and its reply says whether the failure is gone.

// reportedTest finds the test a series' Closes: trailers name through
// the bot's reply (ok false: none names a failure the bot reported).
func (b *Bot) reportedTest(ctx context.Context, s Series, tr *Trace) (t store.Test, reply string, ok bool, err error) {
	idx, isIndex := b.stages.Report.(ReplyIndex)
	if !isIndex || len(s.Closes) == 0 {
		return t, "", false, nil
	}
	for _, id := range s.Closes {
		msgID, version, ok, err := idx.Answered(ctx, id)
		if err != nil {
			return t, "", false, Infra(err)
		}
		if !ok {
			tr.Logf("Closes: %s is not a reply of the bot's to a series", id)
			continue
		}
		t, ok, err := b.st.ReportedTest(ctx, b.st.DB, msgID, version)
		if err != nil {
			return t, "", false, Infra(err)
		}
		if !ok || t.Base == "" {
			tr.Logf("Closes: %s answered %s v%d, which has no reported failure to rerun", id, msgID, version)
			continue
		}
		return t, id, true, nil
	}
	return t, "", false, nil
}

// fixFollowUp is what a fix test's reply says of the test it reran.
func (b *Bot) fixFollowUp(ctx context.Context, t store.Test, s Series, tr *Trace) (*FixFollowUp, error) {
	orig, err := b.st.Test(ctx, b.st.DB, t.FixOf)
	if err != nil {
		return nil, Infra(err)
	}
	f := &FixFollowUp{Test: orig.ID, Verdict: orig.Verdict, URL: b.testURL(orig.ID), OnTop: t.ApplyOn != "" && t.ApplyOn == orig.Candidate,
		Confirmed: Fixed(t.Verdict)}
	// The reply it closes: the Closes: that names a reply to the
	// reported series version.
	row, err := b.st.Series(ctx, b.st.DB, orig.SeriesID)
	if err != nil {
		return nil, Infra(err)
	}
	if idx, ok := b.stages.Report.(ReplyIndex); ok {
		for _, id := range s.Closes {
			msgID, version, ok, err := idx.Answered(ctx, id)
			if err != nil {
				return nil, Infra(err)
			}
			if ok && msgID == row.MsgID && version == row.Version {
				f.Reply = id
				break
			}
		}
	}
	tr.Logf("fix follow-up of test %d (%s): %s, confirmed fixed: %v", orig.ID, orig.Verdict, t.Verdict, f.Confirmed)
	return f, nil
}

// applyFix applies a fix on top of the series of the test it reruns, as
// a separate fix goes in; it returns "" when the test is no fix, or the
// fix does not apply there (then it goes on the base alone, in place of
// the reported series, as a new version of it does).
func (b *Bot) applyFix(ctx context.Context, t *store.Test, s Series, tr *Trace) (string, error) {
	if t.FixOf == 0 {
		return "", nil
	}
	orig, err := b.st.Test(ctx, b.st.DB, t.FixOf)
	if err != nil {
		return "", Infra(err)
	}
	if orig.Candidate == "" {
		return "", nil
	}
	cand, err := b.stages.Build.Apply(ctx, Base{Tree: t.Tree, Commit: orig.Candidate}, s, tr)
	if err != nil {
		if infraOrInterrupted(ctx, err) {
			return "", err
		}
		tr.Logf("the fix does not apply on top of test %d's series (%v): applying it on the base, in place of that series", orig.ID, err)
		t.ApplyOn = ""
		return "", nil
	}
	t.ApplyOn = orig.Candidate
	tr.Logf("applied on top of test %d's series (%s)", orig.ID, short(orig.Candidate))
	return cand, nil
}
