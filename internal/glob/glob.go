// Package glob matches repository paths against the patterns of
// lore.paths and a tree's paths: '/'-separated segments where "**"
// matches any number of segments.
package glob

import (
	"path"
	"strings"
)

// Glob is a compiled path pattern: '/'-separated segments where "**"
// matches any number of segments (also none) and other segments use
// path.Match syntax (*, ?, [...]) within one segment.
type Glob struct {
	segs []string
}

// Compile checks a pattern once so matching cannot fail later.
func Compile(pattern string) (Glob, error) {
	segs := strings.Split(strings.Trim(pattern, "/"), "/")
	for _, s := range segs {
		if s == "**" {
			continue
		}
		if _, err := path.Match(s, ""); err != nil {
			return Glob{}, &Error{Pattern: pattern, Err: err}
		}
	}
	return Glob{segs: segs}, nil
}

// Error is a bad pattern.
type Error struct {
	Pattern string
	Err     error
}

func (e *Error) Error() string { return "bad path glob " + e.Pattern + ": " + e.Err.Error() }

// Match reports whether the '/'-separated path p matches.
func (g Glob) Match(p string) bool {
	return matchSegs(g.segs, strings.Split(p, "/"))
}

func matchSegs(pat, p []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(p); i++ {
				if matchSegs(rest, p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], p[0]); !ok {
			return false
		}
		pat, p = pat[1:], p[1:]
	}
	return len(p) == 0
}
