package builder

import (
	"errors"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
)

// image is a file being patched, line by line, as git apply holds it.
// patched marks lines a previous hunk wrote: git never matches a later
// hunk's pre-image over them.
type image struct {
	lines   []string
	patched []bool
}

// splitLines cuts content after every newline; a last line without one
// stays as it is.
func splitLines(b []byte) *image {
	s := string(b)
	img := &image{}
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			img.lines = append(img.lines, s)
			break
		}
		img.lines = append(img.lines, s[:i+1])
		s = s[i+1:]
	}
	img.patched = make([]bool, len(img.lines))
	return img
}

func (img *image) bytes() []byte {
	n := 0
	for _, l := range img.lines {
		n += len(l)
	}
	b := make([]byte, 0, n)
	for _, l := range img.lines {
		b = append(b, l...)
	}
	return b
}

var errHunkNotFound = errors.New("the hunk's lines are not in the file")

// applyFragment finds the fragment's pre-image in img and replaces it
// with the post-image, with git apply's rules (apply.c,
// apply_one_fragment and find_pos, default options): exact lines, no
// fuzz; the search starts at the hunk's new position (earlier hunks have
// shifted the image already) and tries nearest first, one line down,
// then one up, and so on over the whole file; a hunk that starts at line
// 0 or 1 must match at the start of the file and one without trailing
// context at its end.
func (img *image) applyFragment(frag *gitdiff.TextFragment) error {
	var pre, post []string
	for _, l := range frag.Lines {
		if l.Old() {
			pre = append(pre, l.Line)
		}
		if l.New() {
			post = append(post, l.Line)
		}
	}
	matchBeginning := frag.OldPosition <= 1
	matchEnd := frag.TrailingContext == 0
	line := 0
	if frag.NewPosition > 0 {
		line = int(frag.NewPosition - 1)
	}
	at := img.find(pre, line, matchBeginning, matchEnd)
	if at < 0 {
		return errHunkNotFound
	}
	img.replace(at, len(pre), post)
	return nil
}

func (img *image) find(pre []string, line int, matchBeginning, matchEnd bool) int {
	n := len(img.lines)
	if matchBeginning {
		line = 0
	} else if matchEnd {
		line = n - len(pre)
	}
	if line > n || line < 0 {
		// git compares unsigned: a negative start becomes the end.
		line = n
	}
	back, fwd := line, line
	cur := line
	for i := 0; ; i++ {
		if img.matchAt(pre, cur, matchBeginning, matchEnd) {
			return cur
		}
		for {
			if back == 0 && fwd == n {
				return -1
			}
			if i&1 == 1 {
				if back == 0 {
					i++
					continue
				}
				back--
				cur = back
			} else {
				if fwd == n {
					i++
					continue
				}
				fwd++
				cur = fwd
			}
			break
		}
	}
}

func (img *image) matchAt(pre []string, at int, matchBeginning, matchEnd bool) bool {
	if matchBeginning && at != 0 {
		return false
	}
	if matchEnd && at+len(pre) != len(img.lines) {
		return false
	}
	if at+len(pre) > len(img.lines) {
		return false
	}
	for i, l := range pre {
		if img.patched[at+i] || img.lines[at+i] != l {
			return false
		}
	}
	return true
}

func (img *image) replace(at, n int, post []string) {
	lines := make([]string, 0, len(img.lines)-n+len(post))
	lines = append(lines, img.lines[:at]...)
	lines = append(lines, post...)
	lines = append(lines, img.lines[at+n:]...)
	patched := make([]bool, 0, len(lines))
	patched = append(patched, img.patched[:at]...)
	for range post {
		patched = append(patched, true)
	}
	patched = append(patched, img.patched[at+n:]...)
	img.lines, img.patched = lines, patched
}
