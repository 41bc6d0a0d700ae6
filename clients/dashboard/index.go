package dashboard

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// Filter is the index's and /api/tests' query: each field set must
// match (verdict, list name or address, kind, state exactly; Q anywhere
// in the subject, any case).
type Filter struct {
	Verdict, List, Kind, State, Q string
}

func filterOf(q url.Values) Filter {
	f := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	return Filter{Verdict: f("verdict"), List: f("list"), Kind: f("kind"), State: f("state"), Q: f("q")}
}

// Set says whether anything is filtered.
func (f Filter) Set() bool { return f != Filter{} }

// match says whether t passes; lists maps the watched lists' names to
// their addresses.
func (f Filter) match(t TestView, lists map[string]string) bool {
	if f.Verdict != "" && !strings.EqualFold(t.Verdict.String(), f.Verdict) {
		return false
	}
	if f.Kind != "" && t.Kind != f.Kind {
		return false
	}
	if f.State != "" && string(t.State) != f.State {
		return false
	}
	if f.List != "" {
		addr, ok := lists[f.List]
		if !ok {
			addr = f.List
		}
		if t.List == "" || !strings.EqualFold(t.List, addr) {
			return false
		}
	}
	return f.Q == "" || strings.Contains(strings.ToLower(t.Subject), strings.ToLower(f.Q))
}

func (s *Server) filtered(ts []TestView, f Filter) []TestView {
	if !f.Set() {
		return ts
	}
	var out []TestView
	for _, t := range ts {
		if f.match(t, s.Lists) {
			out = append(out, t)
		}
	}
	return out
}

// TestGroup is one row group of the index: the versions of one series
// (same author, same subject once its [PATCH vN m/n] is taken off),
// newest first, or a test of no series alone.
type TestGroup struct {
	Title, Author string
	Tests         []TestView
}

// Versions are the group's series versions, oldest first ("v2, v3").
func (g TestGroup) Versions() []int {
	seen := map[int]bool{}
	var out []int
	for _, t := range g.Tests {
		if !seen[t.Version] {
			seen[t.Version] = true
			out = append(out, t.Version)
		}
	}
	sort.Ints(out)
	return out
}

// groups puts a series' versions together, in the order of each
// group's newest test (ts is newest first).
func groups(ts []TestView) []TestGroup {
	var out []TestGroup
	at := map[string]int{}
	for _, t := range ts {
		if t.SeriesID == 0 {
			out = append(out, TestGroup{Tests: []TestView{t}})
			continue
		}
		// A series' subject is its title as lore read it (flow.Series).
		title := t.Subject
		key := strings.ToLower(t.Author) + "\x00" + strings.ToLower(title)
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, TestGroup{Title: title, Author: t.Author})
		}
		out[i].Tests = append(out[i].Tests, t)
	}
	for _, g := range out {
		sort.SliceStable(g.Tests, func(i, j int) bool { return g.Tests[i].Version > g.Tests[j].Version })
	}
	return out
}

// IndexView is the index: the filter, its choices, and the tests it
// passes grouped by series.
type IndexView struct {
	Filter Filter
	// Verdicts, Lists, Kinds and States are the filter's choices: what
	// the tests have, and the watched lists by name.
	Verdicts, Lists, Kinds, States []string
	Shown, Of                      int
	Groups                         []TestGroup
}

// choices are the distinct values of the tests' field, sorted, with the
// one asked for kept even when no test has it.
func choices(ts []TestView, field func(TestView) string, asked string) []string {
	seen := map[string]bool{"": true}
	var out []string
	add := func(v string) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	add(asked)
	for _, t := range ts {
		add(field(t))
	}
	sort.Strings(out)
	return out
}

func (s *Server) indexView(r *http.Request, ts []TestView) IndexView {
	f := filterOf(r.URL.Query())
	shown := s.filtered(ts, f)
	v := IndexView{Filter: f, Shown: len(shown), Of: len(ts), Groups: groups(shown),
		Verdicts: choices(ts, func(t TestView) string { return t.Verdict.String() }, f.Verdict),
		Kinds:    choices(ts, func(t TestView) string { return t.Kind }, f.Kind),
		States:   choices(ts, func(t TestView) string { return string(t.State) }, f.State)}
	for n := range s.Lists {
		v.Lists = append(v.Lists, n)
	}
	if _, ok := s.Lists[f.List]; f.List != "" && !ok {
		v.Lists = append(v.Lists, f.List)
	}
	sort.Strings(v.Lists)
	return v
}
