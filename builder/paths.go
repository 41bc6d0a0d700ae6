package builder

import (
	"errors"
	"strconv"
	"strings"
)

// checkTreePath refuses a path that git would refuse or that could reach
// outside the tree: empty, absolute, with "." or ".." components, empty
// components, NUL bytes, or anything inside a .git directory (compared
// case-insensitively, as git does on case-folding file systems).
func checkTreePath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case strings.HasPrefix(p, "/"):
		return errors.New("absolute path")
	case strings.ContainsRune(p, 0):
		return errors.New("NUL in path")
	}
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "":
			return errors.New("empty path component")
		case c == "." || c == "..":
			return errors.New("path component " + c)
		case strings.EqualFold(c, ".git"):
			return errors.New("path inside .git")
		}
	}
	return nil
}

// checkRefComponent accepts a name usable as one ref component: tree
// and series names end up in ref names.
func checkRefComponent(s string) error {
	if s == "" || s == "@" || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "-") ||
		strings.HasSuffix(s, ".lock") || strings.Contains(s, "..") || strings.HasSuffix(s, ".") {
		return errors.New("bad name " + strconv.Quote(s))
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(`/\~^:?*[{`, r) {
			return errors.New("bad name " + strconv.Quote(s))
		}
	}
	return nil
}
