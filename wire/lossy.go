package wire

import (
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/lore"
)

// Lossy is the lab's lossy link profile (bot.Lossy, lab.lossy).
type Lossy struct {
	lab     *Lab
	touches *regexp.Regexp
}

// NewLossy is the profile of l's configuration; nil when lab.lossy.netem
// is empty (off).
func NewLossy(l *Lab) (*Lossy, error) {
	if l.Cfg.Lossy.Netem == "" {
		return nil, nil
	}
	re, err := regexp.Compile(l.Cfg.Lossy.Touches)
	if err != nil {
		return nil, fmt.Errorf("lab.lossy.touches: %w", err)
	}
	return &Lossy{lab: l, touches: re}, nil
}

// Boots implements bot.Lossy.
func (p *Lossy) Boots() int { return p.lab.Cfg.Lossy.Boots }

// Run implements bot.Lossy: the configured test over the shaped link.
func (p *Lossy) Run(ctx context.Context, pair, dir string, n int, trace io.Writer) ([]store.Sample, error) {
	return p.lab.RunTest(ctx, pair, dir, n, p.lab.Cfg.LossyTest(), trace)
}

// Shapes implements bot.Lossy. Only the QEMU pair's soft RDMA runs over
// the shaped link: on a real pair's HCA the RDMA traffic never passes the
// netdev's qdisc.
func (p *Lossy) Shapes(pair string) bool { return pair == "qemu" }

// Why implements bot.Lossy: the words of lab.lossy.touches the series'
// changed lines and the functions of their hunks hold, with their files.
func (p *Lossy) Why(s bot.Series) string {
	words, files := map[string]bool{}, map[string]bool{}
	for _, raw := range s.Patches {
		m, err := lore.ParseMessage(raw)
		if err != nil {
			continue
		}
		for _, c := range lore.DiffChanges(m.Body) {
			// A hunk's context is the function it changes, or only the
			// last line git took for one (a label, a struct) when the
			// change is between functions.
			if c.Context && !strings.Contains(c.Text, "(") {
				continue
			}
			for _, w := range p.touches.FindAllString(c.Text, -1) {
				words[strings.ToLower(w)] = true
				files[c.File] = true
			}
		}
	}
	if len(words) == 0 {
		return ""
	}
	return fmt.Sprintf("%s code (%s)", strings.Join(slices.Sorted(maps.Keys(words)), "/"), strings.Join(slices.Sorted(maps.Keys(files)), ", "))
}
