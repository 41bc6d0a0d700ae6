// Package bisect finds the first bad commit between good and bad commits
// the way git bisect does, over go-git's commit graph: merges included,
// each step testing the commit that best halves the remaining candidates,
// commits that cannot be tested skipped. It is stateless between steps,
// so a durable job can persist the outcomes and resume after a crash.
package bisect

import (
	"container/heap"
	"context"
	"fmt"
	"math/bits"
	"sort"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Outcome is a tested commit's verdict.
type Outcome string

const (
	Good Outcome = "good"
	Bad  Outcome = "bad"
	Skip Outcome = "skip" // cannot be tested (does not build)
)

// State is what is known so far.
type State struct {
	Good []string // commits known good
	Bad  string   // the newest known bad commit
	Skip []string // commits that could not be tested
}

// Record adds a tested commit's outcome to the state.
func (s *State) Record(commit string, o Outcome) {
	switch o {
	case Good:
		s.Good = append(s.Good, commit)
	case Bad:
		s.Bad = commit
	case Skip:
		s.Skip = append(s.Skip, commit)
	}
}

// Step is the next thing to do.
type Step struct {
	// Commit is the next commit to test; empty when Done.
	Commit string
	// Done: Culprit is the first bad commit, or, when only skipped commits
	// are left, Culprit is empty and Candidates lists the possible ones.
	Done       bool
	Culprit    string
	Candidates []string
	// Remaining is the number of commits the culprit may still be, and
	// StepsLeft roughly how many tests remain.
	Remaining int
	StepsLeft int
}

// Next chooses the next commit to test. It walks history, which on a
// kernel tree can be long, so ctx stops the walk.
func Next(ctx context.Context, repo *git.Repository, st State) (Step, error) {
	if st.Bad == "" || len(st.Good) == 0 {
		return Step{}, fmt.Errorf("bisect: need a bad and at least one good commit")
	}
	g := &graph{repo: repo, commits: map[plumbing.Hash]*object.Commit{}}
	bad, err := g.resolve(st.Bad)
	if err != nil {
		return Step{}, err
	}
	var goods []plumbing.Hash
	for _, s := range st.Good {
		h, err := g.resolve(s)
		if err != nil {
			return Step{}, err
		}
		goods = append(goods, h)
	}
	skip := map[plumbing.Hash]bool{}
	for _, s := range st.Skip {
		h, err := g.resolve(s)
		if err != nil {
			return Step{}, err
		}
		skip[h] = true
	}
	cands, err := g.candidates(ctx, bad, goods)
	if err != nil {
		return Step{}, err
	}
	if len(cands) == 0 {
		return Step{}, fmt.Errorf("bisect: %s is an ancestor of a good commit: nothing to bisect", st.Bad)
	}
	n := len(cands)
	if n == 1 {
		return Step{Done: true, Culprit: bad.String(), Remaining: 1}, nil
	}
	weights := g.weights(cands)
	best, bestScore := -1, -1
	for i, c := range cands {
		if c == bad || skip[c] {
			continue
		}
		score := min(weights[i], n-weights[i])
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		// Only skipped commits are left: any of them, or bad, may be it.
		var list []string
		for _, c := range cands {
			list = append(list, c.String())
		}
		return Step{Done: true, Candidates: list, Remaining: n}, nil
	}
	return Step{Commit: cands[best].String(), Remaining: n, StepsLeft: bits.Len(uint(n - 1))}, nil
}

type graph struct {
	repo    *git.Repository
	commits map[plumbing.Hash]*object.Commit
}

func (g *graph) resolve(rev string) (plumbing.Hash, error) {
	h, err := g.repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("bisect: %s: %w", rev, err)
	}
	return *h, nil
}

func (g *graph) commit(h plumbing.Hash) (*object.Commit, error) {
	if c, ok := g.commits[h]; ok {
		return c, nil
	}
	c, err := g.repo.CommitObject(h)
	if err != nil {
		return nil, fmt.Errorf("bisect: commit %s: %w", h, err)
	}
	g.commits[h] = c
	return c, nil
}

const (
	interesting   = 1 // reachable from bad
	uninteresting = 2 // reachable from a good commit
)

// candidates are the commits reachable from bad but from no good commit,
// newest first. Like git's revision walk, it goes newest-first by
// committer date and stops once everything left to walk is reachable from
// a good commit, so it never walks the whole history of a kernel tree.
func (g *graph) candidates(ctx context.Context, bad plumbing.Hash, goods []plumbing.Hash) ([]plumbing.Hash, error) {
	flags := map[plumbing.Hash]uint8{}
	q := &byDate{}
	push := func(h plumbing.Hash, f uint8) error {
		if flags[h]&f == f {
			return nil
		}
		flags[h] |= f
		c, err := g.commit(h)
		if err != nil {
			return err
		}
		heap.Push(q, dated{h, c.Committer.When.Unix()})
		return nil
	}
	if err := push(bad, interesting); err != nil {
		return nil, err
	}
	for _, h := range goods {
		if err := push(h, uninteresting); err != nil {
			return nil, err
		}
	}
	// A few extra commits past the stopping point absorb clock skew, as
	// git's SLOP does.
	slop := 8
	for q.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("bisect: walking history: %w", err)
		}
		if q.allUninteresting(flags) {
			if slop == 0 {
				break
			}
			slop--
		}
		d := heap.Pop(q).(dated)
		c, _ := g.commit(d.h)
		f := flags[d.h]
		for _, p := range c.ParentHashes {
			if err := push(p, f); err != nil {
				return nil, err
			}
		}
	}
	var out []plumbing.Hash
	for h, f := range flags {
		if f == interesting {
			out = append(out, h)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		ti, tj := g.commits[out[i]].Committer.When, g.commits[out[j]].Committer.When
		if !ti.Equal(tj) {
			return ti.After(tj)
		}
		return out[i].String() < out[j].String()
	})
	return out, nil
}

// weights[i] is how many candidates are ancestors of cands[i], itself
// included: the candidates left if cands[i] turns out bad.
func (g *graph) weights(cands []plumbing.Hash) []int {
	idx := make(map[plumbing.Hash]int, len(cands))
	for i, h := range cands {
		idx[h] = i
	}
	words := (len(cands) + 63) / 64
	reach := make([][]uint64, len(cands))
	// Oldest first: a commit's parents are done before it (committer dates
	// can lie, so compute on demand instead of trusting the order).
	var visit func(i int) []uint64
	visit = func(i int) []uint64 {
		if reach[i] != nil {
			return reach[i]
		}
		r := make([]uint64, words)
		r[i/64] |= 1 << (i % 64)
		reach[i] = r
		for _, p := range g.commits[cands[i]].ParentHashes {
			if j, ok := idx[p]; ok {
				for w, v := range visit(j) {
					r[w] |= v
				}
			}
		}
		return r
	}
	out := make([]int, len(cands))
	for i := len(cands) - 1; i >= 0; i-- {
		n := 0
		for _, v := range visit(i) {
			n += bits.OnesCount64(v)
		}
		out[i] = n
	}
	return out
}

type dated struct {
	h plumbing.Hash
	t int64
}

type byDate []dated

func (q byDate) Len() int           { return len(q) }
func (q byDate) Less(i, j int) bool { return q[i].t > q[j].t }
func (q byDate) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *byDate) Push(x any)        { *q = append(*q, x.(dated)) }
func (q *byDate) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func (q byDate) allUninteresting(flags map[plumbing.Hash]uint8) bool {
	for _, d := range q {
		if flags[d.h]&uninteresting == 0 {
			return false
		}
	}
	return true
}
