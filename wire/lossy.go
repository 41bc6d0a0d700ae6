package wire

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
)

// Lossy is the lab's lossy link profile (bot.Profile, lab.lossy).
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

// Name implements bot.Profile.
func (p *Lossy) Name() string { return flow.ProfileLossy }

// Boots implements bot.Profile.
func (p *Lossy) Boots() int { return p.lab.Cfg.Lossy.Boots }

// Run implements bot.Profile: the configured test over the shaped link.
func (p *Lossy) Run(ctx context.Context, pair string, k flow.Boot, _ int, trace io.Writer) ([]flow.Sample, error) {
	return p.lab.RunTest(ctx, pair, k, 1, p.lab.Cfg.LossyTest(), trace)
}

// Shapes implements bot.Profile. Only the QEMU pair's soft RDMA runs over
// the shaped link: on a real pair's HCA the RDMA traffic never passes the
// netdev's qdisc.
func (p *Lossy) Shapes(pair string) bool { return pair == "qemu" }

// Why implements bot.Profile: the words of lab.lossy.touches the series'
// changed lines and the functions of their hunks hold, with their files.
func (p *Lossy) Why(s flow.Series) string {
	return touched(s, p.touches, false)
}

// touched names what of a series re matches: the words of its changed
// lines and of the functions their hunks are in (and, withFiles, the
// changed files' paths), with the files they are in; "" when nothing.
func touched(s flow.Series, re *regexp.Regexp, withFiles bool) string {
	words, files := map[string]bool{}, map[string]bool{}
	for _, raw := range s.Patches {
		m, err := lore.ParseMessage(raw)
		if err != nil {
			continue
		}
		for _, c := range lore.DiffChanges(m.Body) {
			// A changed comment changes no code in the file.
			if withFiles && !c.Context && !isComment(c.Text) && re.MatchString(c.File) {
				words[path.Base(c.File)] = true
				files[c.File] = true
			}
			// A hunk's context is the function it changes, or only the
			// last line git took for one (a label, a struct) when the
			// change is between functions.
			if c.Context && !strings.Contains(c.Text, "(") {
				continue
			}
			for _, w := range re.FindAllString(c.Text, -1) {
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

// isComment says a changed C line is only comment or blank: a line of a
// block comment ("/*", " *", "*/") or a line comment.
func isComment(line string) bool {
	t := strings.TrimSpace(line)
	return t == "" || strings.HasPrefix(t, "*") || strings.HasPrefix(t, "/*") || strings.HasPrefix(t, "//")
}
