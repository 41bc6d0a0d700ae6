package aa

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/rdmabot/rdmabot/clients/dashboard"
)

// Dir is where `rdmabot lab aa` keeps its results by default:
// <cache_dir>/aa, A/A comparisons in aa.jsonl (aa-<profiles>.jsonl for
// the profiles' own), the power bench's in power.jsonl.
func Dir(cacheDir string) string { return filepath.Join(cacheDir, "aa") }

// Results serves the A/A comparisons `rdmabot lab aa` stored in Dir to
// the dashboard's /canary: every aa*.jsonl file, read with Read;
// a seeded slowdown's comparison (the power bench) is not A/A and is
// left out.
type Results struct{ Dir string }

func (a Results) Where() string { return filepath.Join(a.Dir, "aa*.jsonl") }

func (a Results) AAComparisons(ctx context.Context) ([]dashboard.AAComparison, error) {
	files, err := filepath.Glob(a.Where())
	if err != nil {
		return nil, err
	}
	var out []dashboard.AAComparison
	var errs []error
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		rs, err := Read(f)
		if err != nil {
			// The comparisons before a bad line are still shown.
			errs = append(errs, err)
		}
		for _, r := range rs {
			if r.Seeded != "" {
				continue
			}
			profiles := slices.Clone(r.Profiles)
			slices.Sort(profiles)
			out = append(out, dashboard.AAComparison{File: filepath.Base(f), Time: r.Time, Condition: r.Condition, Pair: r.Pair, Side: r.Side,
				Profiles: slices.Compact(profiles), Verdict: r.Verdict, Summary: r.Summary, Rounds: r.Rounds, Seconds: r.Seconds, Error: r.Error})
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("A/A results: %w", errors.Join(errs...))
	}
	return out, nil
}
