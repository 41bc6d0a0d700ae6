package bot

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

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
// aside: what dailyBound adds to their postings. The sender is the
// command's authenticated From, as stored in the test's origin, and the
// author the series row's: nothing is read out of the test's key.
func ownCommandsSince(ctx context.Context, tx *sql.Tx, t time.Time) (map[string]int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT s.author, t.origin FROM tests t JOIN series s ON s.id = t.series_id
		WHERE t.created_at >= $1 AND t.state <> 'canceled' AND t.key NOT LIKE 'refused:%' AND t.origin LIKE '%"request"%'`, t.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("own commands: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var author, origin string
		if err := rows.Scan(&author, &origin); err != nil {
			return nil, fmt.Errorf("own commands: %w", err)
		}
		var o flow.Origin
		if json.Unmarshal([]byte(origin), &o) != nil || o.Kind != "mail" || o.Command == nil {
			continue // not a mail command's test
		}
		if ownTestCommand(*o.Command, flow.Series{Author: author}) {
			out[senderOf(author)]++
		}
	}
	return out, rows.Err()
}
