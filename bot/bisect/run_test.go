package bisect

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5"
)

// The bot drives a search one step per durable job (Next, then a test
// job, then Record); the tests drive it to the end in one call, to
// compare the search with git bisect run.

// Tester tests one commit; an error (infrastructure) stops the search.
type Tester interface {
	Test(ctx context.Context, commit string) (Outcome, error)
}

// Result is a finished search.
type Result struct {
	Culprit    string
	Candidates []string // set instead of Culprit when skips hide it
	Tested     []Tested
}

// Tested is one step of a search.
type Tested struct {
	Commit  string
	Outcome Outcome
}

// Run searches to the end, testing commits one after the other.
func Run(ctx context.Context, repo *git.Repository, st State, t Tester) (Result, error) {
	var res Result
	for {
		step, err := Next(ctx, repo, st)
		if err != nil {
			return res, err
		}
		if step.Done {
			res.Culprit, res.Candidates = step.Culprit, step.Candidates
			return res, nil
		}
		o, err := t.Test(ctx, step.Commit)
		if err != nil {
			return res, fmt.Errorf("bisect: testing %s: %w", step.Commit, err)
		}
		res.Tested = append(res.Tested, Tested{step.Commit, o})
		st.Record(step.Commit, o)
	}
}
