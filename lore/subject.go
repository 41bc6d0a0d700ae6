package lore

import (
	"strconv"
	"strings"

	"github.com/rdmabot/rdmabot/internal/gitmail"
)

// Subject is the parsed form of a patch mail subject such as
// "Re: [PATCH rdma-next v2 03/12] RDMA/core: Fix x".
type Subject struct {
	// IsReply is set by a leading Re:/RE:/Aw: and IsForward by Fw:/Fwd:,
	// in any order or number.
	IsReply, IsForward bool
	// Prefixes are the leading bracket groups' contents as written
	// ("PATCH rdma-next v2 03/12").
	Prefixes []string
	// Patch is set when a group says PATCH (or PATCHv2, PATCHES,
	// PATCHSET).
	Patch bool
	// Pull is set for a pull request ("[GIT PULL]", "[PULL]", "[GIT,
	// PULL]"): it carries a diffstat or a diff but is not a patch.
	Pull bool
	// RFC and Resend mark "RFC" and "RESEND" tokens.
	RFC, Resend bool
	// Version is N of "vN" (also "PATCHvN", "V2"); 1 when absent.
	Version int
	// Index and Total are n and m of "n/m" (zero padding allowed); both
	// 0 when absent. Index 0 is a cover letter.
	Index, Total int
	// Tags are the other tokens of the groups: tree tags such as
	// rdma-next, rdma-rc, for-next, net-next, nfsd, in any position.
	Tags []string
	// Title is what git am keeps as the commit subject: leading "re:",
	// ':', blanks and every leading [...] group removed, blanks squeezed
	// (git mailinfo's cleanup_subject without -k).
	Title string
}

// ParseSubject parses a decoded, unfolded subject. It never fails:
// tokens it does not know become Tags.
func ParseSubject(s string) Subject {
	out := Subject{Version: 1, Title: gitmail.Title(s)}
	rest := strings.TrimSpace(s)
	seenVersion := false
	for rest != "" {
		if n, reply, ok := replyMarker(rest); ok {
			if reply {
				out.IsReply = true
			} else {
				out.IsForward = true
			}
			rest = strings.TrimSpace(rest[n:])
			continue
		}
		if rest[0] != '[' {
			break
		}
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			break
		}
		group := rest[1:end]
		rest = strings.TrimSpace(rest[end+1:])
		out.Prefixes = append(out.Prefixes, group)
		for _, tok := range strings.FieldsFunc(group, func(r rune) bool {
			return r == ' ' || r == '\t' || r == ','
		}) {
			out.token(tok, &seenVersion)
		}
	}
	return out
}

// token classifies one word of a bracket group.
func (s *Subject) token(tok string, seenVersion *bool) {
	up := strings.ToUpper(tok)
	switch {
	case up == "PATCH" || up == "PATCHES" || up == "PATCHSET":
		s.Patch = true
		return
	case up == "RFC":
		s.RFC = true
		return
	case up == "PULL":
		s.Pull = true
		s.Tags = append(s.Tags, tok)
		return
	case up == "RESEND":
		s.Resend = true
		return
	}
	for _, p := range []string{"PATCHSET", "PATCHES", "PATCH", "RFC"} {
		// PATCHv2, PATCH-v2, PATCHSETv2, RFCv3
		if rest, ok := strings.CutPrefix(up, p); ok {
			rest = strings.TrimPrefix(rest, "-")
			if v, ok := parseVersion(rest); ok {
				if p != "RFC" {
					s.Patch = true
				} else {
					s.RFC = true
				}
				if !*seenVersion {
					s.Version, *seenVersion = v, true
				}
				return
			}
		}
	}
	if v, ok := parseVersion(up); ok {
		if !*seenVersion {
			s.Version, *seenVersion = v, true
		}
		return
	}
	if n, m, ok := parseIndex(tok); ok {
		if s.Total == 0 {
			s.Index, s.Total = n, m
		}
		return
	}
	s.Tags = append(s.Tags, tok)
}

// parseVersion reads "V<digits>" (upper-cased already).
func parseVersion(up string) (int, bool) {
	if len(up) < 2 || up[0] != 'V' {
		return 0, false
	}
	v, err := strconv.Atoi(up[1:])
	if err != nil || v < 0 || v > 1000 || up[1] == '+' || up[1] == '-' {
		return 0, false
	}
	return v, true
}

// maxSeriesLength bounds m in "n/m"; the longest real series are a few
// hundred patches.
const maxSeriesLength = 999

// parseIndex reads "n/m", zero padded or not.
func parseIndex(tok string) (int, int, bool) {
	a, b, ok := strings.Cut(tok, "/")
	if !ok || !allDigits(a) || !allDigits(b) || len(a) > 5 || len(b) > 5 {
		return 0, 0, false
	}
	n, _ := strconv.Atoi(a)
	m, _ := strconv.Atoi(b)
	if m > maxSeriesLength {
		return 0, 0, false // a date or a ratio, not a patch count
	}
	return n, m, true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// replyMarker recognises a leading reply or forward marker and returns
// its length.
func replyMarker(s string) (n int, reply, ok bool) {
	colon := strings.IndexByte(s, ':')
	if colon < 2 || colon > 5 {
		return 0, false, false
	}
	switch strings.ToLower(s[:colon]) {
	case "re", "aw", "sv", "antw":
		return colon + 1, true, true
	case "fw", "fwd":
		return colon + 1, false, true
	}
	return 0, false, false
}
