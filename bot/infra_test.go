package bot

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// A stage's failure is the bot's side when it is infrastructure (typed,
// however wrapped) or when the job's context ended; any other failure is
// the code under test's and becomes a verdict.
func TestInfraOrInterrupted(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(live)
	cancel()
	plain := errors.New("does not build")
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"author's failure", live, plain, false},
		{"infrastructure", live, flow.MarkInfra(plain), true},
		{"wrapped infrastructure", live, fmt.Errorf("build: %w", flow.MarkInfra(plain)), true},
		{"interrupted", done, plain, true},
	} {
		if got := infraOrInterrupted(c.ctx, c.err); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// A bisection's title names a measured change with its size, and a
// crash or a build failure by what it is: "crash +0%" said nothing.
func TestRegressedWords(t *testing.T) {
	for _, c := range []struct {
		metric string
		change float64
		want   string
	}{
		{"write_MBps", -0.48, "write_MBps -48%"},
		{metricCrash, 0, "crash"},
		{MetricBuild, 0, "build"},
	} {
		if got := regressed(c.metric, c.change); got != c.want {
			t.Errorf("regressed(%q, %v) = %q, want %q", c.metric, c.change, got, c.want)
		}
	}
}
