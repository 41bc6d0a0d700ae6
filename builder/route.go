package builder

import (
	"slices"
	"strings"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/glob"
)

// routeChoice is the branch of a routed tree a series goes on and the
// rule that chose it, in words for the reply.
type routeChoice struct {
	branch, rule string
}

// routeOf returns the first tree whose paths cover every file the series
// changes, and which of its branches the series goes on: the branch a
// subject tag of that tree names, else, for a fix, its fixes_branch, else
// its first branch (its testing branch). A series with no diff, or whose
// files span trees, has no route (nil).
func routeOf(series flow.Series, trees []TreeConfig) (*TreeConfig, routeChoice) {
	files := series.Files
	if len(files) == 0 {
		return nil, routeChoice{}
	}
	for i := range trees {
		t := &trees[i]
		if len(t.Paths) == 0 || len(t.Branches) == 0 || !coversAll(t.Paths, files) {
			continue
		}
		tags := series.Tags
		for _, tag := range tags {
			if b, ok := t.Tags[strings.ToLower(tag)]; ok {
				return t, routeChoice{b, "a series tagged [" + tag + "]"}
			}
		}
		if t.FixesBranch != "" {
			if tag := fixTag(tags); tag != "" {
				return t, routeChoice{t.FixesBranch, "a fix ([" + tag + "])"}
			}
			if len(series.Fixes) > 0 {
				return t, routeChoice{t.FixesBranch, "a fix (Fixes: trailer)"}
			}
		}
		return t, routeChoice{t.Branches[0], "a series for its files"}
	}
	return nil, routeChoice{}
}

// fixTag is the first subject tag that marks a posting for the current
// release's fixes ("fixes", "for-rc", "nfsd-fixes", "rdma-rc").
func fixTag(tags []string) string {
	for _, tag := range tags {
		l := strings.ToLower(tag)
		if l == "fixes" || l == "for-rc" || l == "rc" || strings.HasSuffix(l, "-fixes") || strings.HasSuffix(l, "-rc") {
			return tag
		}
	}
	return ""
}

// coversAll reports whether every file matches one of the globs (checked
// by Config.Validate, so a bad one matches nothing here).
func coversAll(globs []string, files []string) bool {
	for _, f := range files {
		if !slices.ContainsFunc(globs, func(p string) bool {
			g, err := glob.Compile(p)
			return err == nil && g.Match(f)
		}) {
			return false
		}
	}
	return true
}
