package builder

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// The kernel's MAINTAINERS file, read as scripts/get_maintainer.pl reads
// it: sections start with a title line and hold "X:<tab>value" lines.
// Only the letters that say who looks after which files count here:
//
//	M: maintainer    R: reviewer    L: mailing list    S: status
//	F: file pattern  X: excluded pattern    N: file name regex
//
// F: and X: patterns are get_maintainer's: "dir/" matches everything
// below dir, "*" and "?" are globs ("*" may cross a "/", but a pattern
// without a trailing "/" only matches names with as many "/" as it
// has), a pattern naming a directory of the tree without the trailing
// "/" is taken as "dir/", and a pattern matches as a prefix, as
// get_maintainer's unanchored-at-the-end regex does. N: is a regex
// matched anywhere in the path. K: (content keywords) is not used: the
// lookup is by file name only.

// MaintainerSection is one entry of MAINTAINERS.
type MaintainerSection struct {
	// Title is the section's first line ("INFINIBAND SUBSYSTEM").
	Title string
	// Maintainers (M:), Reviewers (R:) and Lists (L:) as written, e.g.
	// "Leon Romanovsky <leon@kernel.org>"; a list's remark such as
	// "(moderated for non-subscribers)" is dropped.
	Maintainers, Reviewers, Lists []string
	Status                        string
	Files, Excludes, Regexes      []string

	files, excludes []filePattern
	regexes         []*regexp.Regexp
}

// filePattern is an F:/X: line compiled as get_maintainer compiles it.
type filePattern struct {
	re     *regexp.Regexp
	dir    bool // ends in "/": everything below
	slashs int
	// depth is how specific the pattern is: two per directory named
	// before its first wildcard, one more when it names (the start of)
	// a file there; "*" and "*/" are 0, "net/" 2, "net/sunrpc/" 4.
	depth int
}

// Maintainers is a parsed MAINTAINERS file.
type Maintainers struct {
	Sections []*MaintainerSection
}

// Role says why an address is listed for a file.
type Role string

const (
	RoleMaintainer Role = "maintainer"
	RoleReviewer   Role = "reviewer"
	RoleList       Role = "list"
)

// Contact is one address MAINTAINERS gives for a set of files.
type Contact struct {
	Name  string // "" for a list or a bare address
	Email string // lower case
	Role  Role
	// Sections are the titles of the sections that list it.
	Sections []string
}

// String is the contact as get_maintainer prints it and a Cc header
// takes it: "Name <addr>", the name quoted or encoded (net/mail) only
// when it holds specials or non-ASCII characters.
func (c Contact) String() string {
	if c.Name == "" {
		return c.Email
	}
	if strings.ContainsFunc(c.Name, func(r rune) bool { return r > '~' || strings.ContainsRune("\"(),:;<>@[\\]", r) }) {
		return (&mail.Address{Name: c.Name, Address: c.Email}).String()
	}
	return c.Name + " <" + c.Email + ">"
}

// ParseMaintainers reads a MAINTAINERS file. isDir says whether a path
// is a directory of the tree the file belongs to (nil: none is), so that
// "F: drivers/infiniband" covers what is below it, as get_maintainer
// decides by looking at the checkout. The text before the first section
// (the file's introduction, whose lines also look like "X: ...") is
// skipped as get_maintainer skips it: sections start after a line that
// is blank and is followed by a title.
func ParseMaintainers(data []byte, isDir func(path string) bool) (*Maintainers, error) {
	if isDir == nil {
		isDir = func(string) bool { return false }
	}
	m := &Maintainers{}
	var cur *MaintainerSection
	// get_maintainer reads only the lines that match "X:\s*value"; a
	// title is any other non-blank line after a blank one (or the first).
	// The introduction describes the letters indented by a tab; those
	// lines do not start with a letter and colon, so they are titles of
	// sections that never get a value, and are dropped below.
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	lineNo := 0
	blank := true
	for sc.Scan() {
		lineNo++
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" {
			blank = true
			continue
		}
		if len(line) >= 2 && line[1] == ':' && line[0] >= 'A' && line[0] <= 'Z' {
			if cur == nil {
				continue
			}
			if err := cur.add(line[0], strings.TrimSpace(line[2:]), isDir); err != nil {
				return nil, fmt.Errorf("MAINTAINERS:%d: %w", lineNo, err)
			}
			blank = false
			continue
		}
		if blank || cur == nil {
			cur = &MaintainerSection{Title: strings.TrimSpace(line)}
			m.Sections = append(m.Sections, cur)
		}
		blank = false
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("MAINTAINERS: %w", err)
	}
	// Titles without one value line are the introduction's prose.
	out := m.Sections[:0]
	for _, s := range m.Sections {
		if len(s.Maintainers)+len(s.Reviewers)+len(s.Lists)+len(s.Files)+len(s.Regexes) > 0 || s.Status != "" {
			out = append(out, s)
		}
	}
	m.Sections = out
	return m, nil
}

func (s *MaintainerSection) add(letter byte, v string, isDir func(string) bool) error {
	switch letter {
	case 'M':
		s.Maintainers = append(s.Maintainers, v)
	case 'R':
		s.Reviewers = append(s.Reviewers, v)
	case 'L':
		s.Lists = append(s.Lists, v)
	case 'S':
		s.Status = v
	case 'F', 'X':
		p, err := compileFilePattern(v, isDir)
		if err != nil {
			return err
		}
		if letter == 'F' {
			s.Files, s.files = append(s.Files, v), append(s.files, p)
		} else {
			s.Excludes, s.excludes = append(s.Excludes, v), append(s.excludes, p)
		}
	case 'N':
		// Perl's m/$regex/x: unescaped white space is not part of it.
		re, err := regexp.Compile(stripRegexSpace(v))
		if err != nil {
			//lint:ignore ST1005 N: is the MAINTAINERS field's own name
			return fmt.Errorf("N: %q: %w", v, err)
		}
		s.Regexes, s.regexes = append(s.Regexes, v), append(s.regexes, re)
	}
	return nil
}

// compileFilePattern turns an F:/X: value into get_maintainer's regex:
// "." literal, "*" is ".*", "?" is ".", a directory of the tree gains a
// trailing "/".
func compileFilePattern(v string, isDir func(string) bool) (filePattern, error) {
	if !strings.HasSuffix(v, "/") && !strings.ContainsAny(v, "*?") && isDir(v) {
		v += "/"
	}
	var b strings.Builder
	for _, r := range v {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	re, err := regexp.Compile("^" + b.String())
	if err != nil {
		//lint:ignore ST1005 F: is the MAINTAINERS field's own name
		return filePattern{}, fmt.Errorf("F: %q: %w", v, err)
	}
	lit := v
	if i := strings.IndexAny(v, "*?"); i >= 0 {
		lit = v[:i]
	}
	depth := 2 * strings.Count(lit, "/")
	if lit != "" && !strings.HasSuffix(lit, "/") {
		depth++
	}
	return filePattern{re: re, dir: strings.HasSuffix(v, "/"), slashs: strings.Count(v, "/"), depth: depth}, nil
}

func (p filePattern) match(file string) bool {
	if !p.re.MatchString(file) {
		return false
	}
	return p.dir || strings.Count(file, "/") == p.slashs
}

func stripRegexSpace(v string) string {
	var b strings.Builder
	esc := false
	for _, r := range v {
		switch {
		case esc:
			esc = false
		case r == '\\':
			esc = true
		case r == ' ' || r == '\t':
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Covers says whether the section looks after file: an F: pattern or
// an N: regex matches it and no X: pattern does.
func (s *MaintainerSection) Covers(file string) bool {
	for _, x := range s.excludes {
		if x.match(file) {
			return false
		}
	}
	for _, f := range s.files {
		if f.match(file) {
			return true
		}
	}
	for _, re := range s.regexes {
		if re.MatchString(file) {
			return true
		}
	}
	return false
}

// depthOf is how specifically the section covers file: its most specific
// matching F: pattern's depth (an N: match counts as a directory below
// the top level: 3), -1 when it does not cover the file.
func (s *MaintainerSection) depthOf(file string) int {
	if !s.Covers(file) {
		return -1
	}
	d := 0
	for _, f := range s.files {
		if f.match(file) {
			d = max(d, f.depth)
		}
	}
	for _, re := range s.regexes {
		if re.MatchString(file) {
			d = max(d, 3)
		}
	}
	return d
}

// topLevel is the depth of a pattern naming a whole top-level tree
// ("net/", "drivers/") or all of it ("*", "*/"): a catch-all section
// (THE REST, NETWORKING [GENERAL] for what is below net/) covers a file
// at no more than this.
const topLevel = 2

// SpecificSectionsFor are, for each of files, the sections covering it
// most specifically (see depthOf; ties all kept), never one that covers
// it only as a whole top-level tree or more: the sections whose people
// look after the file itself, not the catch-alls get_maintainer adds
// for every file below net/ or anywhere. In MAINTAINERS order.
func (m *Maintainers) SpecificSectionsFor(files []string) []*MaintainerSection {
	keep := map[*MaintainerSection]bool{}
	for _, f := range files {
		best := topLevel + 1
		var at []*MaintainerSection
		for _, s := range m.Sections {
			switch d := s.depthOf(f); {
			case d > best:
				best, at = d, []*MaintainerSection{s}
			case d == best:
				at = append(at, s)
			}
		}
		for _, s := range at {
			keep[s] = true
		}
	}
	var out []*MaintainerSection
	for _, s := range m.Sections {
		if keep[s] {
			out = append(out, s)
		}
	}
	return out
}

// SectionsFor are the sections covering any of files, in file order.
func (m *Maintainers) SectionsFor(files []string) []*MaintainerSection {
	var out []*MaintainerSection
	seen := map[*MaintainerSection]bool{}
	for _, s := range m.Sections {
		for _, f := range files {
			if !seen[s] && s.Covers(f) {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// penguinChief is the address get_maintainer.pl leaves out unless asked
// (--git-chief-penguins): "THE REST" names Linus for every file, and no
// patch reply should Cc him for that.
const penguinChief = "torvalds@linux-foundation.org"

// For returns the maintainers, then the reviewers, then the lists of
// every section covering any of files (get_maintainer's default: all
// matching sections, "THE REST" included, its chief penguin left out),
// each address once with the sections that list it, in the order
// MAINTAINERS lists them.
func (m *Maintainers) For(files []string) []Contact {
	return contactsOf(m.SectionsFor(files))
}

// SpecificFor is For of the most specific sections only
// (SpecificSectionsFor): whom a reply about the files copies.
func (m *Maintainers) SpecificFor(files []string) []Contact {
	return contactsOf(m.SpecificSectionsFor(files))
}

// contactsOf lists the maintainers, then the reviewers, then the lists
// of secs, each address once with the sections that list it, the chief
// penguin left out.
func contactsOf(secs []*MaintainerSection) []Contact {
	var out []Contact
	at := map[string]int{}
	add := func(raw string, role Role, section string) {
		c, ok := parseContact(raw, role)
		if !ok || c.Email == penguinChief {
			return
		}
		if i, dup := at[c.Email]; dup {
			out[i].Sections = appendUniqueString(out[i].Sections, section)
			return
		}
		c.Sections = []string{section}
		at[c.Email] = len(out)
		out = append(out, c)
	}
	for _, role := range []Role{RoleMaintainer, RoleReviewer, RoleList} {
		for _, s := range secs {
			vals := map[Role][]string{RoleMaintainer: s.Maintainers, RoleReviewer: s.Reviewers, RoleList: s.Lists}[role]
			for _, v := range vals {
				add(v, role, s.Title)
			}
		}
	}
	return out
}

func appendUniqueString(l []string, s string) []string {
	for _, x := range l {
		if x == s {
			return l
		}
	}
	return append(l, s)
}

// parseContact reads "Name <addr>", "addr (remark)" or "addr".
func parseContact(raw string, role Role) (Contact, bool) {
	v := raw
	if i := strings.Index(v, " ("); i > 0 && !strings.Contains(v, "<") {
		v = v[:i]
	}
	a, err := mail.ParseAddress(v)
	if err != nil {
		f := strings.Fields(v)
		if len(f) == 0 || !strings.Contains(f[0], "@") {
			return Contact{}, false
		}
		a = &mail.Address{Address: f[0]}
	}
	name := a.Name
	if role == RoleList {
		name = ""
	}
	return Contact{Name: name, Email: strings.ToLower(a.Address), Role: role}, true
}

// ErrNoMaintainers is returned for a commit whose tree has no MAINTAINERS.
var ErrNoMaintainers = errors.New("no MAINTAINERS file")

// MaintainersAt reads MAINTAINERS from commit's tree, directories
// judged by that tree.
func (s *Store) MaintainersAt(commit plumbing.Hash) (*Maintainers, error) {
	c, err := s.Repository().CommitObject(commit)
	if err != nil {
		return nil, fmt.Errorf("maintainers: commit %s: %w", commit, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("maintainers: tree of %s: %w", commit, err)
	}
	f, err := tree.File("MAINTAINERS")
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, fmt.Errorf("%s: %w", commit, ErrNoMaintainers)
	}
	if err != nil {
		return nil, fmt.Errorf("maintainers: %s: %w", commit, err)
	}
	data, err := readBlob(s.Repository().Storer, f.Hash)
	if err != nil {
		return nil, fmt.Errorf("maintainers: %s: %w", commit, err)
	}
	isDir := func(p string) bool {
		e, err := tree.FindEntry(strings.TrimSuffix(p, "/"))
		return err == nil && e.Mode == filemode.Dir
	}
	return ParseMaintainers(data, isDir)
}
