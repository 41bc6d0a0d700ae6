package wire

import (
	"context"
	"fmt"
	"io"
	"regexp"

	"github.com/rdmabot/rdmabot/flow"
)

// Debug is the lab's debug profile (bot.Stages.Debug, lab.debug): boots
// of each side's kernel built with KASAN, lockdep and line tables
// (Boot.Debug), running the configured test, where a use-after-free or a
// lock misuse on a teardown, drain or error path shows as a report the
// lab kernel cannot print. Only its crashes count.
type Debug struct {
	lab     *Lab
	touches *regexp.Regexp
}

// NewDebug is the profile of l's configuration; nil when lab.debug.boots
// is 0 (off).
func NewDebug(l *Lab) (*Debug, error) {
	if l.Cfg.Debug.Boots == 0 {
		return nil, nil
	}
	re, err := regexp.Compile(l.Cfg.Debug.Touches)
	if err != nil {
		return nil, fmt.Errorf("lab.debug.touches: %w", err)
	}
	return &Debug{lab: l, touches: re}, nil
}

// Name implements bot.Profile.
func (p *Debug) Name() string { return flow.ProfileDebug }

// Boots implements bot.Profile.
func (p *Debug) Boots() int { return p.lab.Cfg.Debug.Boots }

// Shapes implements bot.Profile: the debug kernel is the QEMU guests'
// (kbuild lab qemu-debug).
func (p *Debug) Shapes(pair string) bool { return pair == "qemu" }

// Why implements bot.Profile: the words of lab.debug.touches the series'
// changed lines and the functions of their hunks hold.
func (p *Debug) Why(s flow.Series) string { return touched(s, p.touches, false) }

// Run implements bot.Profile: the debug profile's test on k's debug
// kernel, beside k's trusted peer when it has one.
func (p *Debug) Run(ctx context.Context, pair string, k flow.Boot, _ int, trace io.Writer) ([]flow.Sample, error) {
	if k.Debug == "" {
		return nil, flow.MarkInfra(fmt.Errorf("the %s profile has no debug kernel to boot", p.Name()))
	}
	return p.lab.RunTest(ctx, pair, flow.Boot{Dir: k.Debug, Trusted: k.Trusted, Side: k.Side}, 1, p.lab.Cfg.DebugTest(), trace)
}
