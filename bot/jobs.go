package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/rdmabot/rdmabot/bot/store"
)

// The job kinds. Each job does one stage and, in the transaction that
// completes it, inserts the next: ingest -> test -> build -> lab ->
// report (-> lab for more runs), with check between test and build for a
// series; mainline -> test ...; bisect -> bisect.
// Args carry ids only; the state is in our tables.

// pending are the states in which a second insert is a duplicate for
// jobs that may legitimately run again later (ticks).
var pending = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}

// IngestArgs polls the lists.
type IngestArgs struct{}

func (IngestArgs) Kind() string { return "ingest" }
func (IngestArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueIngest, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: pending}}
}

// BaseArgs starts a test: it chooses the base.
type BaseArgs struct {
	TestID int64 `json:"test_id"`
}

func (BaseArgs) Kind() string { return "base" }
func (BaseArgs) InsertOpts() river.InsertOpts {
	// In the check lane: choosing a base waits for no build.
	return river.InsertOpts{Queue: QueueCheck, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// BuildArgs applies and builds a test's kernels.
type BuildArgs struct {
	TestID int64 `json:"test_id"`
	// Based: the base lane built the test's base kernels (BaseKernelsArgs)
	// before this second build job.
	Based bool `json:"based,omitempty"`
}

func (BuildArgs) Kind() string { return "build" }
func (BuildArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBuild, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// LabArgs runs one round of a test on its lab pair.
type LabArgs struct {
	TestID int64 `json:"test_id"`
	Round  int   `json:"round"`
	Runs   int   `json:"runs"`
}

func (LabArgs) Kind() string { return "lab" }
func (LabArgs) InsertOpts() river.InsertOpts {
	// Unique while pending only: a retest after stale base results may
	// run round 1 of the same test again.
	return river.InsertOpts{Queue: QueueLab, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: pending}}
}

// ReportArgs decides and replies, for a test or a bisection.
type ReportArgs struct {
	TestID      int64 `json:"test_id,omitempty"`
	Round       int   `json:"round,omitempty"`
	BisectionID int64 `json:"bisection_id,omitempty"`
	// Bisected is the bisection over the test's own patches that its
	// reply waited for, now ended (unique: the test's first report job
	// had the same test and round).
	Bisected int64 `json:"bisected,omitempty"`
}

func (ReportArgs) Kind() string { return "report" }
func (ReportArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueIngest, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// MainlineArgs tests a branch head if it is new.
// CanaryArgs is one tick of the A/A canary; At (the tick's time) makes
// each tick its own comparison.
type CanaryArgs struct {
	At time.Time `json:"at"`
}

func (CanaryArgs) Kind() string { return "canary" }
func (CanaryArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBuild, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

type MainlineArgs struct {
	Tree   string `json:"tree"`
	Branch string `json:"branch"`
}

func (MainlineArgs) Kind() string { return "mainline" }
func (MainlineArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBuild, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: pending}}
}

// BisectArgs is one step of a bisection.
type BisectArgs struct {
	BisectionID int64 `json:"bisection_id"`
	Step        int   `json:"step"`
}

func (BisectArgs) Kind() string { return "bisect" }
func (BisectArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBuild, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// GitHubPollArgs polls issue comments.
type GitHubPollArgs struct{}

func (GitHubPollArgs) Kind() string { return "github_poll" }
func (GitHubPollArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueIngest, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: pending}}
}

// --- cancellation

// Cancel stops a test: its state says canceled (so queued jobs end at
// once) and its running jobs are cancelled through River.
func (b *Bot) Cancel(ctx context.Context, testID int64) error {
	t, err := b.st.Test(ctx, b.st.DB, testID)
	if err != nil {
		return err
	}
	if t.State == store.StateDone || t.State == store.StateCanceled {
		return fmt.Errorf("test %d is already %s", testID, t.State)
	}
	t.State = store.StateCanceled
	if err := b.st.UpdateTest(ctx, b.st.DB, t); err != nil {
		return err
	}
	res, err := b.river.JobList(ctx, river.NewJobListParams().Kinds("base", "check", "build", "base_kernels", "lab", "report").
		States(pending...).First(1000))
	if err != nil {
		return err
	}
	for _, j := range res.Jobs {
		var a struct {
			TestID int64 `json:"test_id"`
		}
		if json.Unmarshal(j.EncodedArgs, &a) == nil && a.TestID == testID {
			if _, err := b.river.JobCancel(ctx, j.ID); err != nil && !errors.Is(err, river.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

// JobsOfTest lists the River jobs that worked on a test, for its page.
func (b *Bot) JobsOfTest(ctx context.Context, testID int64) ([]*rivertype.JobRow, error) {
	res, err := b.river.JobList(ctx, river.NewJobListParams().Kinds("base", "check", "build", "base_kernels", "lab", "report").
		States(append(pending, rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded)...).First(10000))
	if err != nil {
		return nil, err
	}
	var out []*rivertype.JobRow
	for _, j := range res.Jobs {
		var a struct {
			TestID int64 `json:"test_id"`
		}
		if json.Unmarshal(j.EncodedArgs, &a) == nil && a.TestID == testID {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ActiveJobs are the jobs not finished, up to limit, oldest first:
// running, waiting to run, scheduled for later and waiting to be retried
// (River's own states), for the dashboard's account of what is happening.
func (b *Bot) ActiveJobs(ctx context.Context, limit int) ([]*rivertype.JobRow, error) {
	res, err := b.river.JobList(ctx, river.NewJobListParams().States(pending...).First(limit))
	if err != nil {
		return nil, err
	}
	return res.Jobs, nil
}
