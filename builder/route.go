package builder

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

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

// routedBase is the head of the branch the rule chose (why) on tree t,
// when the series applies there; else of the first other branch of t,
// in its order, that it applies to; else of the rule's branch again,
// saying it applies to none (its APPLY_FAILED then names each one).
// A trial apply leaves no ref.
func (s *Store) routedBase(ctx context.Context, patches []*flow.Message, t *TreeConfig, why routeChoice) (*Base, error) {
	order := []string{why.branch}
	for _, b := range t.Branches {
		if b != why.branch {
			order = append(order, b)
		}
	}
	var tried []string
	for _, branch := range order {
		ref, err := s.Repository().Reference(TreeRef(t.Name, branch), true)
		if err != nil {
			continue // not fetched: not tried
		}
		ok, err := s.applies(ctx, ref.Hash(), patches)
		if err != nil {
			return nil, err
		}
		if ok {
			b := &Base{Commit: ref.Hash(), Tree: t.Name, Branch: branch, Reason: BaseFromRoute, Why: why.rule + " goes on " + why.branch,
				Detail: fmt.Sprintf("the series' files are %s's: %s goes on the head of %s/%s", t.Name, why.rule, t.Name, why.branch)}
			if len(tried) > 0 {
				b.Tried = fmt.Sprintf("it does not apply to %s, so %s/%s", strings.Join(tried, ", "), t.Name, branch)
				b.Detail += "; " + b.Tried
			}
			return b, nil
		}
		tried = append(tried, t.Name+"/"+branch)
	}
	ref, err := s.Repository().Reference(TreeRef(t.Name, why.branch), true)
	if err != nil {
		return nil, err
	}
	b := &Base{Commit: ref.Hash(), Tree: t.Name, Branch: why.branch, Reason: BaseFromRoute, Why: why.rule + " goes on " + why.branch,
		Tried: "it applies to none of " + strings.Join(tried, ", ")}
	b.Detail = fmt.Sprintf("%s goes on %s/%s; %s", why.rule, t.Name, why.branch, b.Tried)
	return b, nil
}

// applies says whether patches apply on base (Apply's failure is the
// series'; any other error is returned).
func (s *Store) applies(ctx context.Context, base plumbing.Hash, patches []*flow.Message) (bool, error) {
	_, err := s.Apply(ctx, base, patches, ApplyOptions{Committer: Identity{Name: "rdmabot", Email: "rdmabot@localhost"}})
	var ae *ApplyError
	var ue *UnsafeError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ae), errors.As(err, &ue):
		return false, nil
	}
	return false, err
}
