// Package gitmail holds git mailinfo's two rules about a patch mail's
// text: where its commit title is in the subject and where the patch
// starts in the body. lore reads series with them and the builder
// commits patches as git am does with them: one implementation, so the
// title a series is known by is the one its commit gets.
package gitmail

import (
	"bytes"
	"strings"
)

// Title is git mailinfo's cleanup_space + cleanup_subject (without -k):
// leading "re:", ':', blanks and every leading [...] group removed,
// blanks squeezed.
func Title(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	at := 0
	for at < len(s) {
		switch c := s[at]; c {
		case 'r', 'R':
			if len(s) > at+3 && (s[at+1] == 'e' || s[at+1] == 'E') && s[at+2] == ':' {
				s = s[:at] + s[at+3:]
				continue
			}
		case ' ', '\t', ':':
			s = s[:at] + s[at+1:]
			continue
		case '[':
			end := strings.IndexByte(s[at:], ']')
			if end < 0 {
				break
			}
			s = s[:at] + s[at+end+1:]
			continue
		}
		break
	}
	return strings.TrimSpace(s)
}

// PatchBreak returns where git mailinfo starts the patch in b (its
// patchbreak(): a "diff -" or "Index: " line, "--- name", or a "---"
// line of only blanks), or -1. It is the one place that decides where a
// commit message ends.
func PatchBreak(b []byte) int {
	for off := 0; off < len(b); {
		line := b[off:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		if bytes.HasPrefix(line, []byte("diff -")) || bytes.HasPrefix(line, []byte("Index: ")) {
			return off
		}
		if len(line) >= 4 && bytes.HasPrefix(line, []byte("---")) {
			// git reads the byte after "--- " from a NUL-terminated
			// buffer: at the end of the body it is NUL, not blank.
			if line[3] == ' ' && (len(line) == 4 || !isBlank(line[4])) {
				return off
			}
			rest := bytes.TrimLeft(line[3:], " \t\v\f\r")
			if len(rest) > 0 && rest[0] == '\n' {
				return off
			}
		}
		off += len(line)
	}
	return -1
}

func isBlank(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}
