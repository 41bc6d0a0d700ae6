package wire

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/rdmabot/rdmabot/flow"
)

// Pressure is the lab's Send Queue pressure profile (bot.Profile,
// lab.pressure): its boots run lab.pressure's load on each provider in
// turn, and each sample names its provider ("pressure-rxe").
type Pressure struct {
	lab     *Lab
	touches *regexp.Regexp
}

// NewPressure is the profile of l's configuration; nil when
// lab.pressure.providers is empty (off).
func NewPressure(l *Lab) (*Pressure, error) {
	if len(l.Cfg.Pressure.Providers) == 0 {
		return nil, nil
	}
	re, err := regexp.Compile(l.Cfg.Pressure.Touches)
	if err != nil {
		return nil, fmt.Errorf("lab.pressure.touches: %w", err)
	}
	return &Pressure{lab: l, touches: re}, nil
}

// Name implements bot.Profile.
func (p *Pressure) Name() string { return flow.ProfilePressure }

// Shapes implements bot.Profile: the providers are the QEMU pair's soft
// devices; a real pair's HCA is not one of them.
func (p *Pressure) Shapes(pair string) bool { return pair == "qemu" }

// Boots implements bot.Profile: lab.pressure.boots on each provider.
func (p *Pressure) Boots() int {
	return p.lab.Cfg.Pressure.Boots * len(p.lab.Cfg.Pressure.Providers)
}

// Run implements bot.Profile: the boot-th boot goes to the providers in
// turn and to the NFS versions in turn, shifted by one each time round
// the providers, so that one boot per provider already covers two
// versions and more boots give each provider each version.
func (p *Pressure) Run(ctx context.Context, pair string, k flow.Boot, boot int, trace io.Writer) ([]flow.Sample, error) {
	provs := p.lab.Cfg.Pressure.Providers
	prov := provs[boot%len(provs)]
	smp, err := p.lab.RunTest(ctx, pair, k, 1, p.lab.Cfg.PressureTest(prov, boot+boot/len(provs)), trace)
	for i := range smp {
		smp[i].Profile = flow.ProfilePressure + "-" + prov
	}
	return smp, err
}

// Why implements bot.Profile: the files, words and functions of
// lab.pressure.touches the series changes.
func (p *Pressure) Why(s flow.Series) string {
	return touched(s, p.touches, true)
}

// isPressure says a sample is a boot of the pressure profile.
func isPressure(s flow.Sample) bool {
	return s.Profile == flow.ProfilePressure || strings.HasPrefix(s.Profile, flow.ProfilePressure+"-")
}
