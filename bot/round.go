package bot

import (
	"context"
	"fmt"
	"io"

	"github.com/rdmabot/rdmabot/flow"
)

// RunRound is the one round of default-test boots: n boots each of base
// and candidate, alternating base first (no base boots when base.Dir is
// empty), so that a drift of the machine during the round hits both
// sides alike, until a boot crashes: a crash is the answer already, and
// more boots would only crash again. The lab job, mainline heads, `lab
// aa`, the canary and the power bench all measure through it. An error
// is the lab's (Infra), or a *RoundError naming the side whose kernel did
// not come up; the samples are those booted before it.
func RunRound(ctx context.Context, l Lab, pair string, base, cand flow.Boot, n int, trace io.Writer) (bs, cs []flow.Sample, err error) {
	for i := range n {
		for _, side := range []struct {
			name string
			boot flow.Boot
			out  *[]flow.Sample
		}{{"base", base, &bs}, {"candidate", cand, &cs}} {
			if side.boot.Dir == "" {
				continue
			}
			fmt.Fprintf(trace, "%s %d/%d\n", side.name, i+1, n)
			s, err := l.Run(ctx, pair, side.boot, 1, trace)
			if err != nil {
				if flow.IsInfra(err) {
					return bs, cs, err
				}
				return bs, cs, &RoundError{Side: side.name, Err: err}
			}
			*side.out = append(*side.out, s...)
		}
		if crashed(bs) || crashed(cs) {
			break
		}
	}
	return bs, cs, nil
}

// RoundError is a kernel of a round that did not come up: the base's is
// the test's failure, the candidate's its BOOT_FAILED.
type RoundError struct {
	Side string // "base" or "candidate"
	Err  error
}

func (e *RoundError) Error() string { return e.Err.Error() }
func (e *RoundError) Unwrap() error { return e.Err }
