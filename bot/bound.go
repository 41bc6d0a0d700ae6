package bot

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// ownTestCommand says c is a "#rdmabot test" or "retest" by mail that the
// series' own author sent, not refused by its transport: a test the
// author started, which bot.author_daily_tests bounds as it bounds their
// postings (a throwaway mailbox retesting its own series all day would
// otherwise run, and answer, without end). A maintainer's or reviewer's
// command on someone else's series is not the author's.
func ownTestCommand(c flow.Command, s flow.Series) bool {
	if c.Refused != "" || (c.Verb != flow.CommandTest && c.Verb != flow.CommandRetest && c.Verb != "") {
		return false
	}
	return c.From != "" && senderOf(c.From) == senderOf(s.Author)
}

// ownCommandsSince counts, by sender, the tests that authors' own mail
// commands (ownTestCommand) started since t, held or canceled ones
// aside: what dailyBound adds to their postings. The tests are found by
// their cause, the sender is the command's authenticated From, as stored
// in the test's origin, and the author the series row's: nothing is read
// out of the test's key.
func ownCommandsSince(ctx context.Context, st *store.Store, q store.Querier, t time.Time) (map[string]int, error) {
	tests, err := st.CommandTestsSince(ctx, q, t)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, ct := range tests {
		var o flow.Origin
		if json.Unmarshal(ct.Origin, &o) != nil || o.Kind != "mail" || o.Command == nil {
			continue // not a mail command's test
		}
		if ownTestCommand(*o.Command, flow.Series{Author: ct.Author}) {
			out[senderOf(ct.Author)]++
		}
	}
	return out, nil
}
