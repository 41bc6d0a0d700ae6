package lore

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// This file reads what a mail body says: the files a diff touches,
// trailers, base-commit/change-id hints, "applied" notes and commands.

// bodyLines calls fn for each line of s without its line end.
func bodyLines(s string, fn func(line string) bool) {
	for s != "" {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if !fn(strings.TrimSuffix(line, "\r")) {
			return
		}
	}
}

// DiffFiles returns the paths a patch body touches, as the assembler
// reads them (old and new names of renames, quilt-style prefixes).
func DiffFiles(body string) []string { return diffFiles(body) }

// diffFiles returns the paths a patch body touches (old and new names
// of renames included), in order of appearance, without duplicates.
// A body with no diff returns nil.
func diffFiles(body string) []string {
	var files []string
	add := func(p string) {
		if i := strings.IndexByte(p, '\t'); i >= 0 {
			p = p[:i] // "+++ b/x\t2024-01-01 ..." from non-git diff
		}
		p = strings.TrimSpace(p)
		if p == "" || p == "/dev/null" || contains(files, p) {
			return
		}
		files = append(files, p)
	}
	var minus, plus string // the last two lines, for a traditional header
	bodyLines(body, func(line string) bool {
		if strings.HasPrefix(line, "@@ -") && strings.HasPrefix(minus, "--- ") && strings.HasPrefix(plus, "+++ ") {
			// A traditional (quilt, diff -u) header: git apply -p1
			// drops the first component of both names, whatever it
			// is (a/, linux-next-orig/, linux-6.9/).
			add(stripFirstComponent(minus[4:]))
			add(stripFirstComponent(plus[4:]))
		}
		minus, plus = plus, line
		switch {
		case strings.HasPrefix(line, "diff --git "):
			a, b := splitGitDiffLine(line[len("diff --git "):])
			add(a)
			add(b)
		case strings.HasPrefix(line, "--- a/"):
			add(line[len("--- a/"):])
		case strings.HasPrefix(line, "+++ b/"):
			add(line[len("+++ b/"):])
		case strings.HasPrefix(line, "rename from "), strings.HasPrefix(line, "copy from "):
			add(line[strings.Index(line, "from ")+5:])
		case strings.HasPrefix(line, "rename to "), strings.HasPrefix(line, "copy to "):
			add(line[strings.Index(line, "to ")+3:])
		}
		return true
	})
	return files
}

// stripFirstComponent is git apply's -p1 on a traditional header's
// name: the timestamp after a tab goes, then everything up to the first
// '/'. A name with no '/' has nothing to strip and gives "".
func stripFirstComponent(name string) string {
	if i := strings.IndexByte(name, '\t'); i >= 0 {
		name = name[:i]
	}
	name = strings.TrimSpace(name)
	if name == "/dev/null" {
		return ""
	}
	_, rest, ok := strings.Cut(name, "/")
	if !ok {
		return ""
	}
	return strings.TrimLeft(rest, "/")
}

// splitGitDiffLine splits "a/X b/Y"; with spaces in names the two
// halves are equal for anything but a rename, which also has rename
// lines, so the equal split is tried first.
func splitGitDiffLine(s string) (string, string) {
	if len(s) > 5 && (len(s)-1)%2 == 0 {
		h := (len(s) - 1) / 2
		if s[:2] == "a/" && s[h+1:h+3] == "b/" && s[2:h] == s[h+3:] {
			return s[2:h], s[h+3:]
		}
	}
	i := strings.Index(s, " b/")
	if i < 0 || !strings.HasPrefix(s, "a/") {
		return "", ""
	}
	return s[2:i], s[i+3:]
}

var (
	pwHunkRe     = regexp.MustCompile(`^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@`)
	pwFilenameRe = regexp.MustCompile(`^(---|\+\+\+) (\S+)`)
)

// patchworkHash is b4's get_patchwork_hash over a patch body (patchwork's
// hash_diff): file names without their first directory, hunk headers
// without line numbers, and every line starting with '-', '+' or ' '.
func patchworkHash(body string) string {
	h := sha1.New()
	for _, line := range strings.Split(body, "\n") {
		if line == "" {
			continue
		}
		switch c := line[0]; {
		case c == '@':
			m := pwHunkRe.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n := [2]string{"1", "1"}
			for i := range n {
				if m[i+1] != "" {
					v, _ := strconv.Atoi(m[i+1])
					n[i] = strconv.Itoa(v)
				}
			}
			line = "@@ -" + n[0] + " +" + n[1] + " @@"
		case strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "+++ "):
			if m := pwFilenameRe.FindStringSubmatch(line); m != nil {
				name := "b/"
				if m[1] == "---" {
					name = "a/"
				}
				if _, rest, ok := strings.Cut(m[2], "/"); ok {
					name += rest
				}
				line = m[1] + " " + name
			}
		case c != '-' && c != '+' && c != ' ':
			continue
		}
		h.Write([]byte(line + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hasDiff is b4's DIFF_RE, (?mi)^(---.*\n\+\+\+|GIT binary patch|
// diff --git \w/\S+ \w/\S+), as one pass over the lines (the regexp
// was a third of the assembly time).
func hasDiff(body string) bool {
	prevDashes := false
	found := false
	bodyLines(body, func(line string) bool {
		switch {
		case prevDashes && strings.HasPrefix(line, "+++"):
			found = true
		case len(line) >= 16 && strings.EqualFold(line[:16], "GIT binary patch"):
			found = true
		case len(line) > 11 && strings.EqualFold(line[:11], "diff --git "):
			found = gitDiffOperands(line[11:])
		}
		prevDashes = strings.HasPrefix(line, "---")
		return !found
	})
	return found
}

// gitDiffOperands matches "\w/\S+ \w/\S+" at the start of s.
func gitDiffOperands(s string) bool {
	for range 2 {
		if len(s) < 3 || !isWordByte(s[0]) || s[1] != '/' || s[2] == ' ' || s[2] == '\t' {
			return false
		}
		i := strings.IndexAny(s, " \t")
		if i < 0 {
			return true
		}
		s = s[i+1:]
	}
	return true
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// Trailer is one "Name: value" line given in a reply, collected the way
// b4 collects follow-up trailers.
type Trailer struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Comment is a "# for the foo bits" remark after the value, with
	// the blanks before it, kept as b4 keeps it.
	Comment string `json:"comment,omitempty"`
	// From is who wrote the reply carrying it.
	From flow.Address `json:"from"`
	// MessageID is the reply it came from.
	MessageID string `json:"message_id"`
}

// String is the trailer line as b4 writes it into the patch.
func (t Trailer) String() string { return t.Name + ": " + t.Value + t.Comment }

// person reports whether b4 would treat the trailer as naming a person
// (whose address must then match the reply's sender).
func (t Trailer) person() bool {
	switch strings.ToLower(t.Name) {
	case "fixes", "link", "buglink", "obsoleted-by", "message-id", "change-id", "base-commit":
		return false
	}
	return !strings.Contains(t.Value, "://")
}

var (
	emailInRe   = regexp.MustCompile(`\S+@\S+\.\S+`)
	angleAddrRe = regexp.MustCompile(`<([^>]+)>`)
	extInfoRe   = regexp.MustCompile(`(.*\S+)(\s+#[^#]+)$`)
	hexRe       = regexp.MustCompile(`^[\da-f]+$`)
)

// splitTrailer reads "Name: value" as b4's ^\s*(\w\S+):\s+(\S.*) does,
// without a regexp: the name is the first blank-free token ending in a
// colon, then blanks, then a value.
//
// Like b4 the name is letters, digits and dashes after a first letter
// or digit: "Reviewed_by:" and "Reviewed-by::" are not trailers.
func splitTrailer(line string) (name, value string, ok bool) {
	l := strings.TrimLeft(line, " \t")
	// The first byte first: it turns away quoted lines (most of a
	// reply) without looking for the end of the name.
	if l == "" || !isWordByte(l[0]) || l[0] == '_' {
		return "", "", false
	}
	sp := strings.IndexAny(l, " \t")
	if sp < 3 || l[sp-1] != ':' {
		return "", "", false
	}
	for i := 1; i < sp-1; i++ {
		if c := l[i]; c != '-' && (!isWordByte(c) || c == '_') {
			return "", "", false
		}
	}
	value = strings.TrimSpace(l[sp:])
	if value == "" {
		return "", "", false
	}
	return l[:sp-1], value, true
}

// gluedAfterAddress reports a value with something glued after its
// "<address>" that is neither a "# comment" nor a "[remark]": "Name
// <a@b>> ---", "Name <a@b> ---" (a quoted separator pulled onto the
// line). b4 does not take such a line as a trailer.
func gluedAfterAddress(value string) bool {
	i := strings.LastIndexByte(value, '>')
	if i < 0 || !strings.Contains(value[:i], "<") {
		return false
	}
	rest := strings.TrimLeft(value[i+1:], " \t")
	return rest != "" && rest[0] != '#' && rest[0] != '[' && rest[0] != '('
}

// unwrapTrailers calls fn with each line of body (split at "\n" as
// strings.Split does), rejoining two wrappings b4 repairs: "Fixes: sha
// (title" + "rest)" and "Name: Some Name" + "<addr>". It reads the lines
// in place: a reply quoting a whole patch has thousands.
func unwrapTrailers(body string, fn func(line string)) {
	l, rest, more := strings.Cut(body, "\n")
	for more {
		next, after, nextMore := strings.Cut(rest, "\n")
		if wrapped(l, next) {
			fn(l + " " + next)
			if !nextMore {
				return
			}
			l, rest, more = strings.Cut(after, "\n")
			continue
		}
		fn(l)
		l, rest, more = next, after, nextMore
	}
	fn(l)
}

// wrapped says whether next continues the trailer on line l.
func wrapped(l, next string) bool {
	_, v, ok := splitTrailer(l)
	if !ok || strings.ContainsAny(l[:1], " \t") {
		return false
	}
	sha, rest, _ := strings.Cut(v, " ")
	fixes := hexRe.MatchString(sha) && strings.HasPrefix(strings.TrimLeft(rest, " \t"), "(") &&
		!strings.Contains(rest, ")") && strings.Index(next, ")") > 0
	addr := !strings.Contains(v, "<") && len(next) > 2 && next[0] == '<' && next[len(next)-1] == '>' &&
		strings.Count(next, ">") == 1
	return fixes || addr
}

// CommitTrailers are the trailers of a patch's own commit message: the
// "Name: value" lines of the last paragraph above the "---" line that
// ends the message (or the diff, when there is no such line), as git
// interpret-trailers reads a message's trailer block.
func CommitTrailers(body string) []Trailer {
	var msg strings.Builder
	bodyLines(body, func(line string) bool {
		if line == "---" || strings.HasPrefix(line, "diff --git ") || strings.HasPrefix(line, "Index: ") {
			return false
		}
		msg.WriteString(line + "\n")
		return true
	})
	paras := strings.Split(strings.TrimSpace(msg.String()), "\n\n")
	last := paras[len(paras)-1]
	var out []Trailer
	unwrapTrailers(last, func(line string) {
		if name, value, ok := splitTrailer(line); ok {
			out = append(out, Trailer{Name: name, Value: value})
		}
	})
	return out
}

// followupTrailers finds the trailers a reply gives, by b4 0.12's rules
// (find_trailers with followup=True): unquoted "Name: value" lines above
// the signature whose value names an address or is a known utility
// trailer, no URLs, and never From/To/Cc/Author.
func followupTrailers(body string) []Trailer {
	if i := strings.Index(body, "\n-- \n"); i >= 0 {
		body = body[:i]
	}
	body = strings.TrimSpace(body)
	if !strings.Contains(body, ": ") && !strings.Contains(body, ":\t") {
		return nil
	}
	var out []Trailer
	unwrapTrailers(body, func(line string) {
		line = strings.TrimSuffix(line, "\r")
		name, value, ok := splitTrailer(line)
		if !ok {
			return
		}
		lname := strings.ToLower(name)
		switch lname {
		case "phone", "email", "subject", "date":
			// Subject: and Date: are the lines of a quoted mail's
			// attribution block ("From: X / Date: Y / Subject: Z"),
			// never trailers: git and b4 add no such trailer.
			return
		}
		if gluedAfterAddress(value) {
			return
		}
		if !isASCII(lname) {
			return
		}
		nonperson := false
		switch lname {
		case "fixes", "link", "buglink", "obsoleted-by", "change-id", "base-commit":
			nonperson = true
		}
		if !nonperson && !(strings.Contains(value, "@") && emailInRe.MatchString(value)) {
			return
		}
		if strings.Contains(value, "http://") || strings.Contains(value, "https://") {
			return
		}
		switch lname {
		case "from", "author", "cc", "to":
			return
		}
		comment := ""
		if strings.Contains(value, "#") {
			if x := extInfoRe.FindStringSubmatch(value); x != nil {
				value, comment = x[1], x[2]
			}
		}
		out = append(out, Trailer{Name: name, Value: value, Comment: comment})
	})
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// trailerFrom reports whether a person trailer names the reply's sender
// (b4's get_trailers: same address, or same name).
func trailerFrom(t Trailer, from flow.Address) bool {
	if !t.person() {
		return true
	}
	email := ""
	if m := angleAddrRe.FindStringSubmatch(t.Value); m != nil {
		email = m[1]
	} else if m := emailInRe.FindString(t.Value); m != "" {
		email = m
	}
	if email != "" && sameMailbox(email, from.Email) {
		return true
	}
	name := strings.TrimSpace(t.Value)
	if i := strings.IndexByte(name, '<'); i >= 0 {
		name = strings.TrimSpace(name[:i])
	}
	name = strings.Trim(name, `"`)
	return from.Name != "" && strings.EqualFold(name, from.Name)
}

// sameMailbox compares two addresses as b4 does for trailers: case
// aside, and with a "+tag" subaddress dropped from the local part, so
// syzbot+1234abcd@syzkaller.appspotmail.com is syzbot@syzkaller.appspotmail.com.
func sameMailbox(x, y string) bool {
	if strings.EqualFold(x, y) {
		return true
	}
	base := func(a string) string {
		local, domain, ok := strings.Cut(a, "@")
		if !ok {
			return strings.ToLower(a)
		}
		local, _, _ = strings.Cut(local, "+")
		return strings.ToLower(local + "@" + domain)
	}
	return base(x) == base(y)
}

var (
	// b4 reads the first hex run after "base-commit: " whatever
	// follows it: a "(cel/nfsd-testing)" remark, or the CR a
	// quoted-printable "=0D" left at the line end.
	baseCommitRe = regexp.MustCompile(`(?mi)^base-commit:[ \t]*([0-9a-f]{7,40})\b`)
	changeIDRe   = regexp.MustCompile(`(?m)^change-id:[ \t]*(\S+)[ \t\r]*$`)
	loreLinkRe   = regexp.MustCompile(`https?://lore\.kernel\.org/(?:[\w.-]+/)?(?:r/)?([^/\s<>]+@[^/\s<>]+?)/?(?:[\s>)\]]|$)`)
	gitCommitRe  = regexp.MustCompile(`https?://git\.kernel\.org/\S+/c/[0-9a-f]{7,40}|\bcommit:?\s+[0-9a-f]{12,40}\b`)
	// "Applied, thanks!", "Thanks, applied.", "Applied to for-next":
	// a maintainer's note. "Applied this and it crashes" is a tester's
	// report, and "Applied to which tree?" a question.
	appliedRe     = regexp.MustCompile(`(?i)^(thanks[,!.]?\s+)?(applied|merged|pushed)\b`)
	appliedToRe   = regexp.MustCompile(`(?i)^(applied|merged|pushed)(\s+(to|into|in)\s+\S+|\b.*\bwith\b)`)
	appliedThanks = regexp.MustCompile(`(?i)^thanks|thank`)
)

func firstSubmatch(re *regexp.Regexp, s string) string {
	if m := re.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// appliedNote reports whether an unquoted line of a reply says the
// patches were applied ("Applied, thanks!", b4 ty's form, "Thanks,
// applied to for-next") and returns any commit links it lists.
func appliedNote(body string) (bool, []string) {
	if !strings.Contains(body, "pplied") && !strings.Contains(body, "erged") && !strings.Contains(body, "ushed") &&
		!strings.Contains(body, "PPLIED") && !strings.Contains(body, "ERGED") && !strings.Contains(body, "USHED") {
		return false, nil
	}
	applied := false
	bodyLines(body, func(line string) bool {
		if strings.HasPrefix(line, ">") {
			return true
		}
		if line == "-- " {
			return false
		}
		l := strings.TrimSpace(line)
		if appliedRe.MatchString(l) && !strings.Contains(l, "?") &&
			(appliedThanks.MatchString(l) || appliedToRe.MatchString(l)) {
			applied = true
			return false
		}
		return true
	})
	if !applied {
		return false, nil
	}
	var commits []string
	bodyLines(body, func(line string) bool {
		if !strings.HasPrefix(line, ">") {
			commits = appendUnique(commits, gitCommitRe.FindAllString(line, -1)...)
		}
		return true
	})
	return true, commits
}

// CommandPrefix starts a line addressed to the bot in a reply.
const CommandPrefix = "#rdmabot"

// Command verbs.
const (
	// VerbTest asks for a test of the series: "#rdmabot test" against
	// the default base, or "#rdmabot test <tree> [<branch>]"; "#rdmabot
	// test fstests [...]" asks for the fstests profile too.
	VerbTest = "test"
	// VerbRetest asks to run the last test again, same arguments.
	VerbRetest = "retest"
	// VerbInvalid disputes the bot's report in this thread: "#rdmabot
	// invalid [<why>]". The report is marked so, not retracted.
	VerbInvalid = "invalid"
	// VerbDup says the report repeats another: "#rdmabot dup <link or
	// Message-ID>".
	VerbDup = "dup"
)

// knownVerbs are said in every error about a command.
const knownVerbs = "(known: test, retest, invalid, dup)"

// Command is a request to the bot found in a reply. The grammar, one
// command per line, at the very start of an unquoted line:
//
//	#rdmabot test                    test on the default base
//	#rdmabot test <tree> [<branch>]  test on a configured tree/branch
//	#rdmabot test fstests [...]      the same, with fstests' larger group
//	#rdmabot retest [<tree> [<branch>]]
//	#rdmabot invalid [<why>]         the bot's report here is wrong
//	#rdmabot dup <link|Message-ID>   it repeats another report
//
// Lines quoted with "> " and text below the "-- " signature are never
// commands, so quoting the bot's answer does not trigger it again. A
// line that starts with the prefix but does not parse yields a Command
// with Err set, so the bot can answer with help instead of staying
// silent.
type Command struct {
	// SeriesID is the series whose thread the reply is in ("" if the
	// thread has no series).
	SeriesID string `json:"series_id,omitempty"`
	// PatchIndex is the patch replied to (0: the cover or the series).
	PatchIndex int    `json:"patch_index,omitempty"`
	MessageID  string `json:"message_id"`
	// References are the reply's ancestors, oldest first (its References
	// header, and its In-Reply-To when that is not the last of them), for
	// an answer to keep the chain.
	References []string     `json:"-"`
	From       flow.Address `json:"from"`
	Date       time.Time    `json:"date"`
	Verb       string       `json:"verb,omitempty"`
	Tree       string       `json:"tree,omitempty"`
	Branch     string       `json:"branch,omitempty"`
	// Profiles are the lab profiles asked for by name ("fstests").
	Profiles []string `json:"profiles,omitempty"`
	// Note is what a dispute says: why the report is invalid, or the
	// report it duplicates.
	Note string `json:"note,omitempty"`
	// Line is the command line as written.
	Line string `json:"line"`
	// Err says why the line is not a valid command.
	Err string `json:"error,omitempty"`
	// Mail is the reply itself: whoever acts on the command checks with
	// DKIM.Authenticate that it comes from From.
	Mail *flow.Message `json:"-"`
}

// parseCommands finds the command lines of a reply body.
func parseCommands(body string) []Command {
	if !strings.Contains(body, CommandPrefix) {
		return nil
	}
	var out []Command
	bodyLines(body, func(line string) bool {
		if line == "-- " {
			return false
		}
		rest, ok := strings.CutPrefix(line, CommandPrefix)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			return true
		}
		c := Command{Line: strings.TrimSpace(line)}
		args := strings.Fields(rest)
		switch {
		case len(args) == 0:
			c.Err = "no command after " + CommandPrefix + " " + knownVerbs
		case args[0] == VerbInvalid:
			c.Verb = args[0]
			_, c.Note, _ = strings.Cut(strings.TrimSpace(rest), args[0])
			c.Note = strings.TrimSpace(c.Note)
		case args[0] == VerbDup && len(args) != 2:
			c.Err = "say which report this one repeats: " + CommandPrefix + " dup <link or Message-ID>"
		case args[0] == VerbDup:
			c.Verb, c.Note = args[0], args[1]
		case args[0] != VerbTest && args[0] != VerbRetest:
			c.Err = "unknown command " + strconv.Quote(args[0]) + " " + knownVerbs
		default:
			c.Verb = args[0]
			if len(args) > 1 && args[1] == flow.ProfileFstests {
				c.Profiles, args = []string{flow.ProfileFstests}, append(args[:1:1], args[2:]...)
			}
			if len(args) > 3 {
				c.Verb, c.Profiles = "", nil
				c.Err = "too many arguments: " + CommandPrefix + " " + args[0] + " [fstests] [<tree> [<branch>]]"
				break
			}
			if len(args) > 1 {
				c.Tree = args[1]
			}
			if len(args) > 2 {
				c.Branch = args[2]
			}
		}
		out = append(out, c)
		return true
	})
	return out
}

// DiffChanges lists what a patch body's diff changes: each added or
// removed line (without its +/-) and each hunk's function context, in
// order. Hunks are read by their line counts, so a signature ("-- ")
// after the last one is not taken for a removed line. A body with no
// diff returns nil.
func DiffChanges(body string) []flow.Change {
	var out []flow.Change
	file := ""
	oldLeft, newLeft := 0, 0 // lines of the current hunk still to come
	bodyLines(body, func(line string) bool {
		if strings.HasPrefix(line, "diff --git ") {
			oldLeft, newLeft = 0, 0 // a hunk shorter than its header said
		}
		if oldLeft > 0 || newLeft > 0 {
			switch {
			case strings.HasPrefix(line, "+"):
				newLeft--
				out = append(out, flow.Change{File: file, Text: line[1:]})
			case strings.HasPrefix(line, "-"):
				oldLeft--
				out = append(out, flow.Change{File: file, Text: line[1:]})
			case strings.HasPrefix(line, `\`): // "\ No newline at end of file"
			default: // context; a mailer may have stripped its space
				oldLeft--
				newLeft--
			}
			return true
		}
		switch {
		case strings.HasPrefix(line, "diff --git "):
			_, file = splitGitDiffLine(line[len("diff --git "):])
		case strings.HasPrefix(line, "+++ "):
			if p := strings.TrimPrefix(line[4:], "b/"); p != "/dev/null" {
				if i := strings.IndexByte(p, '\t'); i >= 0 {
					p = p[:i]
				}
				file = strings.TrimSpace(p)
			}
		case strings.HasPrefix(line, "@@ -"):
			var a, b, c, d int
			oldLeft, newLeft = 1, 1
			if n, _ := fmt.Sscanf(line, "@@ -%d,%d +%d,%d @@", &a, &b, &c, &d); n == 4 {
				oldLeft, newLeft = b, d
			} else if n, _ := fmt.Sscanf(line, "@@ -%d +%d,%d @@", &a, &c, &d); n == 3 {
				newLeft = d
			} else if n, _ := fmt.Sscanf(line, "@@ -%d,%d +%d @@", &a, &b, &c); n == 3 {
				oldLeft = b
			}
			if i := strings.Index(line[2:], "@@"); i >= 0 {
				if fn := strings.TrimSpace(line[2+i+2:]); fn != "" {
					out = append(out, flow.Change{File: file, Text: fn, Context: true})
				}
			}
		}
		return true
	})
	return out
}
