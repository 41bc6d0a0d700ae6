package lore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/glob"
)

// Series is one posting of a patch series (one version of it).
type Series struct {
	// ID is stable for this version of the series: it derives from the
	// cover (or the thread position of the first patch), not from the
	// order messages arrived in, so re-reading an archive or receiving
	// the cover late gives the same ID.
	ID string `json:"id"`
	// RootMessageID is the cover's Message-ID, or the message the
	// patches hang from (for a lore link); it may not be in the archive.
	RootMessageID string `json:"root_message_id"`
	// Subject is the cover's title, or the first patch's.
	Subject string       `json:"subject"`
	Version int          `json:"version"`
	RFC     bool         `json:"rfc,omitempty"`
	Resend  bool         `json:"resend,omitempty"`
	Author  flow.Address `json:"author"`
	// Date is the (clamped) date of the cover or the earliest patch.
	Date time.Time `json:"date"`
	// LastArrival is when the newest patch or cover arrived in the
	// archive.
	LastArrival time.Time `json:"last_arrival"`
	// LastSeen is when the reader first saw the newest patch or cover
	// (LastArrival when it did not say); the grace period runs from it:
	// a series posted long before it reached the reader is not late.
	LastSeen time.Time `json:"last_seen"`
	// Cover is the 0/N letter, nil when the series has none.
	Cover *flow.Message `json:"-"`
	// CoverMessageID is Cover's Message-ID, "" without a cover.
	CoverMessageID string `json:"cover_message_id,omitempty"`
	// Patches are ordered by index; Missing lists absent indexes.
	Patches []*Patch `json:"patches"`
	Missing []int    `json:"missing,omitempty"`
	// Total is the N of n/N (1 for a lone patch).
	Total int `json:"total"`
	// Complete is set when every patch 1..Total is present.
	Complete bool `json:"complete"`
	// Incomplete says what is missing once the grace period has passed
	// without the series becoming complete; "" before that.
	Incomplete string `json:"incomplete,omitempty"`
	// Duplicates are Message-IDs of second copies of a patch (a resent
	// mail); the earliest copy is the one in Patches.
	Duplicates []string `json:"duplicates,omitempty"`

	cover *entry // the cover's entry, nil without one
	// lastAt is the newest patch's or cover's entry.at: Flush settles
	// the series by it.
	lastAt time.Time
	// BaseCommit (see the function BaseCommit) and ChangeID come from
	// b4's "base-commit:" and "change-id:" lines.
	BaseCommit string `json:"base_commit,omitempty"`
	ChangeID   string `json:"change_id,omitempty"`
	// Tags are the subject's other bracket words; TreeTag is the first
	// that names a tree or branch (rdma-next, for-rc, net, nfsd, 6.9),
	// not a remark (FYI, WIP, AUTOSEL, RFT).
	Tags    []string `json:"tags,omitempty"`
	TreeTag string   `json:"tree_tag,omitempty"`
	// Lists are the configured list names it was posted to, then other
	// List-Id values seen.
	Lists []string `json:"lists,omitempty"`
	// ReadFrom are the configured lists its mail was read from
	// (flow.Message.ReadFrom), sorted: a local inbox or an IMAP folder
	// holds mail addressed to lists it never went to.
	ReadFrom []string `json:"read_from,omitempty"`
	// MatchedPaths are the touched files that match the configured
	// globs, over all patches.
	MatchedPaths []string `json:"matched_paths,omitempty"`
	// Trailers were given in replies to the cover: b4 applies them to
	// every patch with -t.
	Trailers []Trailer `json:"trailers,omitempty"`
	// Applied lists the "Applied, thanks!" replies, whoever wrote them:
	// only a maintainer's means the series was taken (see AppliedBy).
	Applied []Applied `json:"applied,omitempty"`
	// Reviews are other bots' reviews in the thread (Sashiko, 0-day,
	// syzbot), which a reply links.
	Reviews []flow.Review `json:"reviews,omitempty"`
	// Versions are the IDs of other versions of the same work (same
	// change-id, same titles by the same author, or a lore link to
	// them), ordered by version.
	Versions []string `json:"versions,omitempty"`
	// Replies counts the messages in the thread below the series.
	Replies int `json:"replies"`
}

// ReplyTo is the message a reply about the whole series answers: the
// cover, else the first patch present (nil for a series with neither,
// which Assemble never returns).
func (s *Series) ReplyTo() *flow.Message {
	if s.Cover != nil {
		return s.Cover
	}
	if len(s.Patches) > 0 {
		return s.Patches[0].Message
	}
	return nil
}

// Relevant reports whether any patch touches a configured path.
func (s *Series) Relevant() bool { return len(s.MatchedPaths) > 0 }

// AppliedBy is the series' applied notes whose From: is one of
// maintainers (addresses, compared without case). A note from anyone
// else is a claim, not a fact: it must not stop the series from being
// tested; nor one of these until its mail proves its From:.
func (s *Series) AppliedBy(maintainers []string) []Applied {
	var out []Applied
	for _, a := range s.Applied {
		for _, m := range maintainers {
			if a.By.Email != "" && strings.EqualFold(a.By.Email, m) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// Patch is one patch of a series.
type Patch struct {
	Index     int           `json:"index"`
	Message   *flow.Message `json:"-"`
	MessageID string        `json:"message_id"`
	// Title is the subject git am will commit.
	Title string `json:"title"`
	// Files are every path the diff touches; MatchedPaths those that
	// match the configured globs.
	Files        []string `json:"files"`
	MatchedPaths []string `json:"matched_paths,omitempty"`
	// Trailers were given in replies to this patch (b4's follow-up
	// trailers), not the ones already in the patch. Like b4, they
	// include those given to the same patch (same diff) in another
	// version posted in the same thread.
	Trailers []Trailer `json:"trailers,omitempty"`

	entry *entry
}

// Applied is a note that (part of) a series was applied.
type Applied struct {
	By        flow.Address `json:"by"`
	MessageID string       `json:"message_id"`
	Date      time.Time    `json:"date"`
	// PatchIndex is the patch replied to, 0 for the cover or series.
	PatchIndex int `json:"patch_index,omitempty"`
	// Commits are the commit links or hashes the note lists.
	Commits []string `json:"commits,omitempty"`
	// Mail is the note itself, for whoever checks that it comes from
	// By (DKIM).
	Mail *flow.Message `json:"-"`
}

// AssemblerConfig sets up an Assembler.
type AssemblerConfig struct {
	// Paths are the relevance globs (lore.paths).
	Paths []string
	// Lists name the configured lists, for Series.Lists.
	Lists []ListConfig
	// BotAddresses are the bot's own From addresses: such mail is never
	// input, so the bot cannot trigger itself.
	BotAddresses []string
	// GracePeriod is how long an incomplete series waits.
	GracePeriod time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Assembler groups messages into series. Add messages in any order and
// call Assemble whenever a view is needed: the result depends only on
// the set of messages, never on their order. An Assembler is not safe
// for concurrent use.
type Assembler struct {
	cfg   AssemblerConfig
	globs []glob.Glob
	bots  map[string]bool
	byID  map[string]*entry
	// alias maps a message's second and later Message-IDs to its first,
	// so replies referencing any of them find it.
	alias map[string]string
	// implicit are the plain-subject covers the last Assemble found.
	implicit map[*entry]bool
	// gen changes whenever the held set does. parentOf and heldParent
	// keep their answers per entry while it stays: every flush walks up
	// the threads of all the replies held, most of them more than once.
	gen uint64
	// flushed are the IDs of the series Flush gave out, with the cutoff
	// they went at: a patch that comes into such a thread later is a
	// posting of its own, never the given-out series a second time.
	flushed map[string]time.Time
}

type kind int

const (
	kindOther kind = iota // a reply or anything that is not a patch
	kindCover
	kindPatch
)

// entry is a message with what Assemble needs precomputed at Add time.
type entry struct {
	msg     *flow.Message
	subj    Subject
	kind    kind
	date    time.Time // Date clamped to the arrival time
	arrived time.Time
	seen    time.Time // first read by the caller; arrived when unknown
	// at is the time Flush holds the message by: date, or later when a
	// Stream gave it (a message never comes in already settled).
	at     time.Time
	author string // lower-case From address
	parent string // In-Reply-To, or the last reference
	files  []string
	// matched are the files that match the globs, and lists and
	// otherLists the configured list names and the other List-Ids the
	// message went to: Add works them out once, as a streaming scan
	// assembles the same held messages again at every flush.
	matched, lists, otherLists []string
	key                        string // seriesKey, computed once
	// parentOf's and heldParent's answers, valid (see there) while
	// Assembler.gen is still parentGen and heldGen; parentByID says
	// parentE was found under e.parent itself, and gone is set when
	// the entry is forgotten.
	parentE            *entry
	held               *entry
	parentGen, heldGen uint64
	parentByID, gone   bool
	ltitle             string // lowerTitle, computed once
	links              []string
	linksDone          bool
	// pwhash is b4's patchwork hash of the body, to carry trailers
	// between versions of an unchanged patch; computed when first needed.
	pwhash string
	// b4's change-id: line, if the body has one.
	changeID string
	// For replies (b4's "reply"): trailers, applied notes, commands.
	// signed are the trailers that name the sender (trailerFrom),
	// with From and MessageID set: every flush gives them again.
	reply    bool
	trailers []Trailer
	signed   []Trailer
	applied  bool
	commits  []string
	commands []Command
	review   *flow.Review // a reviewer bot's mail (reviewOf)
}

// NewAssembler checks the globs once.
func NewAssembler(cfg AssemblerConfig) (*Assembler, error) {
	a := &Assembler{cfg: cfg, bots: map[string]bool{}, byID: map[string]*entry{}, alias: map[string]string{}}
	for _, p := range cfg.Paths {
		g, err := glob.Compile(p)
		if err != nil {
			return nil, err
		}
		a.globs = append(a.globs, g)
	}
	for _, b := range cfg.BotAddresses {
		a.bots[strings.ToLower(strings.TrimSpace(b))] = true
	}
	if a.cfg.Now == nil {
		a.cfg.Now = time.Now
	}
	return a, nil
}

// Add takes a message that arrived at the given time (the commit or
// Received time the source knows; zero when unknown). Its Date is
// clamped to that time: senders' clocks lie, the archive's does not.
// Add returns false for the bot's own mail and for a Message-ID already
// held (the first copy wins).
func (a *Assembler) Add(m *flow.Message, arrived time.Time) bool {
	return a.AddSeen(m, arrived, time.Time{})
}

// AddSeen is Add for a reader that knows when it first read the message
// (zero when not): the grace period of an incomplete series runs from
// that, not from the archive's time.
func (a *Assembler) AddSeen(m *flow.Message, arrived, seen time.Time) bool {
	return a.add(m, arrived, seen, time.Time{})
}

// writtenAt is when m was written as far as the archive can tell: its
// Date, never after it arrived (senders' clocks lie, the archive's does
// not). Without an arrival time the topmost Received header stands in;
// without either, date is the Date and arrived is date.
func writtenAt(m *flow.Message, arrived time.Time) (date, arr time.Time) {
	if arrived.IsZero() {
		arrived = m.ReceivedAt
	}
	date = m.Date
	if !arrived.IsZero() && (date.IsZero() || date.After(arrived)) {
		date = arrived
	}
	if arrived.IsZero() {
		arrived = date
	}
	return date, arrived
}

// add is AddSeen holding the message by at for Flush (its date when
// at is earlier or zero).
func (a *Assembler) add(m *flow.Message, arrived, seen, at time.Time) bool {
	if a.bots[strings.ToLower(m.From.Email)] {
		return false
	}
	if a.lookup(m.MessageID) != nil {
		return false
	}
	e := &entry{msg: m, subj: ParseSubject(m.Subject), author: strings.ToLower(m.From.Email)}
	e.date, e.arrived = writtenAt(m, arrived)
	e.at = e.date
	if at.After(e.at) {
		e.at = at
	}
	e.seen = seen
	if e.seen.IsZero() {
		e.seen = e.arrived
	}
	e.parent = m.InReplyTo
	if e.parent == "" && len(m.References) > 0 {
		e.parent = m.References[len(m.References)-1]
	}
	diff := hasDiff(m.Body)
	s := e.subj
	switch {
	case s.IsReply || s.IsForward:
		e.reply = true
	case s.Index == 0 && s.Total > 0:
		// b4: counter 0 is a cover even when it quotes a range-diff.
		e.kind = kindCover
	case s.Pull:
		// A pull request quotes a diffstat, often the whole diff
		// (request-pull -p): it asks to merge a branch, it is not a
		// patch to apply.
	case diff:
		// With or without [PATCH]: b4 takes any non-reply diff as one.
		e.kind = kindPatch
		e.files = diffFiles(m.Body)
		for _, f := range e.files {
			if a.matches(f) {
				e.matched = append(e.matched, f)
			}
		}
	}
	e.lists, e.otherLists = a.listsOfMessage(m)
	if e.kind != kindOther || !e.reply {
		// Not only patches and covers: a plain-subject letter the
		// patches answer is the cover too (see implicitCovers).
		if strings.Contains(m.Body, "change-id:") {
			e.changeID = firstSubmatch(changeIDRe, m.Body)
		}
	}
	if e.kind == kindOther {
		e.trailers = followupTrailers(m.Body)
		for _, t := range e.trailers {
			if trailerFrom(t, m.From) {
				t.From, t.MessageID = m.From, m.MessageID
				e.signed = append(e.signed, t)
			}
		}
		if !e.reply && len(e.trailers) > 0 && m.InReplyTo != "" {
			// b4: a follow-up without "Re:" that gives trailers.
			e.reply = true
		}
		e.applied, e.commits = appliedNote(m.Body)
		e.commands = parseCommands(m.Body)
		e.review = reviewOf(m)
	}
	a.gen++
	a.byID[m.MessageID] = e
	for _, id := range m.MessageIDs[1:] {
		if a.lookup(id) == nil {
			a.alias[id] = m.MessageID
		}
	}
	return true
}

// lookup finds a held message by any of its Message-IDs.
func (a *Assembler) lookup(id string) *entry {
	if e, ok := a.byID[id]; ok {
		return e
	}
	if p, ok := a.alias[id]; ok {
		return a.byID[p]
	}
	return nil
}

// forget drops a held message and its aliases.
func (a *Assembler) forget(e *entry) {
	a.gen++
	e.gone = true
	delete(a.byID, e.msg.MessageID)
	for _, id := range e.msg.MessageIDs[1:] {
		if a.alias[id] == e.msg.MessageID {
			delete(a.alias, id)
		}
	}
}

// AddRaw parses raw mail and adds it (see Add). Bad mail gives a
// *MalformedError and changes nothing; the bot's own mail and a repeated
// Message-ID are ignored without error.
func (a *Assembler) AddRaw(raw []byte, arrived time.Time) error {
	m, err := ParseMessage(raw)
	if err != nil {
		return err
	}
	a.Add(m, arrived)
	return nil
}

// ForgetRaw removes the message a public-inbox deletion carries.
func (a *Assembler) ForgetRaw(raw []byte) error {
	m, err := ParseMessage(raw)
	if err != nil {
		return err
	}
	for _, id := range m.MessageIDs {
		a.Remove(id)
	}
	return nil
}

// Remove forgets a message (a public-inbox deletion). It reports
// whether the message was held.
func (a *Assembler) Remove(messageID string) bool {
	e := a.lookup(messageID)
	if e != nil {
		a.forget(e)
	}
	return e != nil
}

// Assembly is the result of Assemble.
type Assembly struct {
	// Series ordered by date, then ID.
	Series []*Series `json:"series"`
	// Commands found in replies, ordered by date, then Message-ID.
	Commands []Command `json:"commands"`
}

// seriesKey is what the messages of one posting share.
func (e *entry) seriesKey() string {
	if e.key == "" {
		e.key = e.makeSeriesKey()
	}
	return e.key
}

func (e *entry) makeSeriesKey() string { return e.keyOfVersion(e.subj.Version) }

// keyOfVersion is the series key e would have as version v.
func (e *entry) keyOfVersion(v int) string {
	total := e.subj.Total
	if total == 0 {
		total = 1
	}
	return e.author + "|v" + strconv.Itoa(v) + "|" + strconv.Itoa(total) + "|" + strconv.FormatBool(e.subj.Resend)
}

// adoptedBy says whether patch e, which gives no version (or v1), belongs to
// cover c that does ("[PATCH v2 0/3]" over "[PATCH 1/3]"): b4 too takes
// patches answering a cover as that cover's version. Patches that name
// a version keep it: a v2 posted into the v1 cover's thread is its own.
func (e *entry) adoptedBy(c *entry) bool {
	return c.kind == kindCover && e.subj.Version == 1 && c.subj.Version > 1 && c.seriesKey() == e.keyOfVersion(c.subj.Version)
}

func (e *entry) index() int {
	if e.kind == kindCover {
		return 0
	}
	if e.subj.Total == 0 {
		return 1
	}
	return e.subj.Index
}

// heldParent returns the nearest held ancestor: the parent if held,
// else the newest held reference; nil when none is held.
func (a *Assembler) heldParent(e *entry) *entry {
	if p := a.parentOf(e); p != nil {
		return p
	}
	if e.heldGen != a.gen {
		e.held, e.heldGen = a.heldReference(e), a.gen
	}
	return e.held
}

// parentOf is lookup(e.parent), kept in e. A parent held under that very
// Message-ID stays the answer until it is forgotten, whatever else comes
// (Add keeps the first message with an ID); any other answer, nil or a
// parent found by a second ID, holds only while the held set is the same.
func (a *Assembler) parentOf(e *entry) *entry {
	if p := e.parentE; e.parentByID && !p.gone {
		return p
	}
	if e.parentGen != a.gen {
		p := a.lookup(e.parent)
		e.parentE, e.parentGen = p, a.gen
		e.parentByID = p != nil && p.msg.MessageID == e.parent
	}
	return e.parentE
}

// heldReference is the newest held reference of e, or nil.
func (a *Assembler) heldReference(e *entry) *entry {
	refs := e.msg.References
	for i := len(refs) - 1; i >= 0; i-- {
		if p := a.lookup(refs[i]); p != nil {
			return p
		}
	}
	return nil
}

// rootOf returns the id a patch or cover hangs from: the cover, the
// topmost patch of a chain, or (when the thread goes on into other
// mail, or into mail not held yet) that message's id; and the series
// key of the posting, e's own unless a versioned cover adopts it.
func (a *Assembler) rootOf(e *entry) (root, key string) {
	key = e.seriesKey()
	if e.kind == kindCover {
		return e.msg.MessageID, key
	}
	if e.subj.Total == 0 {
		return e.msg.MessageID, key // "[PATCH] x" is a series of its own
	}
	cur := e
	seen := map[*entry]bool{e: true}
	path := []*entry{e}
	for {
		if cur.parent == "" {
			return cur.msg.MessageID, key
		}
		p := a.parentOf(cur)
		if p == nil {
			// Try an older reference: a missing middle patch must not
			// split a chained series, but only if it is the same work.
			if q := a.heldParent(cur); q != nil && !seen[q] && q.kind != kindOther && !q.reply && (q.seriesKey() == key || e.adoptedBy(q)) {
				p = q
			} else {
				return cur.parent, key
			}
		}
		if seen[p] {
			// A loop in the references: name the series after the
			// smallest id on the cycle, wherever the walk entered it.
			low := p.msg.MessageID
			for i := len(path) - 1; i >= 0 && path[i] != p; i-- {
				low = min(low, path[i].msg.MessageID)
			}
			return low, key
		}
		if e.adoptedBy(p) {
			return p.msg.MessageID, p.seriesKey()
		}
		if p.kind == kindOther || p.reply || p.seriesKey() != key {
			// New version posted into an old thread: the series hangs
			// from here, keyed apart from the old one.
			return p.msg.MessageID, key
		}
		if p.kind == kindCover {
			return p.msg.MessageID, key
		}
		seen[p] = true
		path = append(path, p)
		cur = p
	}
}

type group struct {
	root, key string
	members   []*entry
}

// Assemble groups the messages held into series and finds the commands.
func (a *Assembler) Assemble() *Assembly {
	held := make([]*entry, 0, len(a.byID))
	for _, e := range a.byID {
		held = append(held, e)
	}
	slices.SortFunc(held, func(x, y *entry) int {
		if c := x.date.Compare(y.date); c != 0 {
			return c
		}
		return strings.Compare(x.msg.MessageID, y.msg.MessageID)
	})

	groups := map[string]*group{}
	var order []*group
	memberOf := map[*entry]*group{}
	for _, e := range held {
		if e.kind == kindOther || e.reply {
			continue
		}
		root, key := a.rootOf(e)
		gk := root + "\x00" + key
		g := groups[gk]
		if g == nil {
			g = &group{root: root, key: key}
			groups[gk] = g
			order = append(order, g)
		}
		g.members = append(g.members, e)
		memberOf[e] = g
	}
	order = a.mergeUnthreaded(order, memberOf)
	a.implicitCovers(order, memberOf)

	asm := &Assembly{}
	seriesOf := map[*group]*Series{}
	for _, g := range order {
		s := a.buildSeries(g)
		seriesOf[g] = s
		asm.Series = append(asm.Series, s)
	}
	a.attachReplies(held, memberOf, seriesOf, asm)
	a.carryTrailers(order, seriesOf)
	linkVersions(asm.Series)
	now := a.cfg.Now()
	for _, s := range asm.Series {
		if !s.Complete && a.cfg.GracePeriod > 0 && now.Sub(s.LastSeen) >= a.cfg.GracePeriod {
			s.Incomplete = incompleteReason(s, a.cfg.GracePeriod)
		}
	}
	sort.SliceStable(asm.Series, func(i, j int) bool {
		si, sj := asm.Series[i], asm.Series[j]
		if !si.Date.Equal(sj.Date) {
			return si.Date.Before(sj.Date)
		}
		return si.ID < sj.ID
	})
	return asm
}

// implicitCovers finds the covers that do not say they are one: a
// letter with a plain subject ("[PATCHES] Fix x", "[PATCHSET] y", or no
// brackets at all) that the patches of a series answer. It is the
// message the series hangs from, by the same author, not a reply and
// without a diff, and at least one patch replies to it directly. It
// becomes the series' cover, so its base-commit and the trailers given
// in replies to it count for the whole series.
func (a *Assembler) implicitCovers(order []*group, memberOf map[*entry]*group) {
	a.implicit = map[*entry]bool{}
	for _, g := range order {
		first := g.members[0]
		if slices.ContainsFunc(g.members, func(e *entry) bool { return e.kind == kindCover }) {
			continue
		}
		r := a.lookup(g.root)
		if r == nil || r.kind != kindOther || r.reply || r.subj.Pull || r.author != first.author || memberOf[r] != nil {
			continue
		}
		if !slices.ContainsFunc(g.members, func(e *entry) bool { return a.parentOf(e) == r }) {
			continue
		}
		a.implicit[r] = true
		memberOf[r] = g
		g.members = append(g.members, r)
		sort.SliceStable(g.members, func(i, j int) bool { return entryBefore(g.members[i], g.members[j]) })
	}
}

// isCover says whether e is a cover: by its 0/N subject, or implicitly.
func (a *Assembler) isCover(e *entry) bool {
	return e.kind == kindCover || a.implicit[e]
}

// unthreadedWindow is how close in time the patches of a series sent
// without any threading must be to be taken as one series.
const unthreadedWindow = time.Hour

// mergeUnthreaded joins patches sent without In-Reply-To (each its own
// root) to the series they belong to: same author, version, count and
// tags, first message within an hour (any time apart for mail without a
// Message-ID, a format-patch file's), no index present twice. They join
// a threaded series or a cover first (a patch re-sent alone after a
// bounce, a cover and patches that were all sent unthreaded), then each
// other.
func (a *Assembler) mergeUnthreaded(order []*group, memberOf map[*entry]*group) []*group {
	rootless := func(g *group) bool {
		first := g.members[0]
		return first.subj.Total > 1 && first.kind == kindPatch && first.parent == "" && g.root == first.msg.MessageID
	}
	dropped := map[*group]bool{}
	merge := func(into, from *group) {
		for _, m := range from.members {
			memberOf[m] = into
		}
		into.members = append(into.members, from.members...)
		sort.SliceStable(into.members, func(i, j int) bool { return entryBefore(into.members[i], into.members[j]) })
		dropped[from] = true
	}
	fits := func(into, from *group) bool {
		fi, ff := into.members[0], from.members[0]
		if into == from || dropped[into] || into.key != from.key ||
			strings.Join(fi.subj.Tags, " ") != strings.Join(ff.subj.Tags, " ") {
			return false
		}
		// Mail without a Message-ID header is what `git format-patch
		// --stdout` writes (lists' servers add one): such a file is one
		// posting, its patches dated by their commits' author dates,
		// days apart, and its cover by when it was made.
		if d := ff.date.Sub(fi.date); (d > unthreadedWindow || d < -unthreadedWindow) && !(fi.msg.DerivedID && ff.msg.DerivedID) {
			return false
		}
		have := map[int]bool{}
		for _, m := range into.members {
			have[m.index()] = true
		}
		for _, m := range from.members {
			if m.kind == kindPatch && have[m.index()] {
				return false
			}
		}
		return true
	}
	for _, threaded := range []bool{true, false} {
		for _, c := range order {
			if dropped[c] || !rootless(c) {
				continue
			}
			for _, t := range order {
				if rootless(t) == threaded || !fits(t, c) {
					continue
				}
				if !threaded && entryBefore(c.members[0], t.members[0]) {
					continue // the earliest rootless group collects the rest
				}
				merge(t, c)
				break
			}
		}
	}
	out := order[:0]
	for _, g := range order {
		if !dropped[g] {
			out = append(out, g)
		}
	}
	return out
}

// entryBefore orders messages by clamped date, then Message-ID.
func entryBefore(x, y *entry) bool {
	if !x.date.Equal(y.date) {
		return x.date.Before(y.date)
	}
	return x.msg.MessageID < y.msg.MessageID
}

func (a *Assembler) buildSeries(g *group) *Series {
	sum := sha256.Sum256([]byte(g.root + "\x00" + g.key))
	if _, done := a.flushed[hex.EncodeToString(sum[:8])]; done {
		// The thread's series went out already (Flush): what comes
		// into it weeks later is named by its own first message.
		sum = sha256.Sum256([]byte(g.root + "\x00" + g.key + "\x00" + g.members[0].msg.MessageID))
	}
	s := &Series{ID: hex.EncodeToString(sum[:8]), RootMessageID: g.root}
	byIndex := map[int]*entry{}
	var cover *entry
	for _, e := range g.members { // members are in date order
		if e.arrived.After(s.LastArrival) {
			s.LastArrival = e.arrived
		}
		if e.at.After(s.lastAt) {
			s.lastAt = e.at
		}
		if e.seen.After(s.LastSeen) {
			s.LastSeen = e.seen
		}
		if a.isCover(e) {
			if cover == nil {
				cover = e
			} else {
				s.Duplicates = append(s.Duplicates, e.msg.MessageID)
			}
			continue
		}
		if _, dup := byIndex[e.index()]; dup {
			s.Duplicates = append(s.Duplicates, e.msg.MessageID)
			continue
		}
		byIndex[e.index()] = e
	}
	first := cover
	indexes := make([]int, 0, len(byIndex))
	for i := range byIndex {
		indexes = append(indexes, i)
	}
	sort.Ints(indexes)
	if first == nil || a.implicit[first] {
		// A plain-subject cover says nothing of version or count.
		first = byIndex[indexes[0]]
	}
	s.Version, s.RFC, s.Resend = first.subj.Version, first.subj.RFC, first.subj.Resend
	s.Author = first.msg.From
	s.Tags = first.subj.Tags
	s.TreeTag = treeTag(s.Tags)
	s.Total = first.subj.Total
	if s.Total == 0 {
		s.Total = 1
	}
	s.Date = first.date
	if cover != nil {
		s.Cover, s.CoverMessageID, s.cover = cover.msg, cover.msg.MessageID, cover
		s.Subject = cover.subj.Title
	} else {
		s.Subject = byIndex[indexes[0]].subj.Title
	}
	for _, e := range g.members {
		if e.date.Before(s.Date) {
			s.Date = e.date
		}
	}
	var matched []string
	for _, i := range indexes {
		e := byIndex[i]
		p := &Patch{Index: i, Message: e.msg, MessageID: e.msg.MessageID, Title: e.subj.Title, Files: e.files, entry: e}
		if len(e.matched) > 0 {
			p.MatchedPaths = slices.Clone(e.matched)
			for _, f := range e.matched {
				matched = appendUnique(matched, f)
			}
		}
		s.Patches = append(s.Patches, p)
	}
	sort.Strings(matched)
	s.MatchedPaths = matched
	for i := 1; i <= s.Total; i++ {
		if byIndex[i] == nil {
			s.Missing = append(s.Missing, i)
		}
	}
	s.Complete = len(s.Missing) == 0
	s.readB4Lines()
	s.Lists = a.listsOf(g.members)
	for _, e := range g.members {
		if e.msg.ReadFrom != "" {
			s.ReadFrom = appendUnique(s.ReadFrom, e.msg.ReadFrom)
		}
	}
	sort.Strings(s.ReadFrom)
	return s
}

// readB4Lines reads b4's base-commit: and change-id: lines, which b4
// writes into the cover letter, or the last patch.
func (s *Series) readB4Lines() {
	var patches []*flow.Message
	hints := []*entry{s.cover}
	for i := len(s.Patches) - 1; i >= 0; i-- {
		patches = append([]*flow.Message{s.Patches[i].Message}, patches...)
		hints = append(hints, s.Patches[i].entry)
	}
	s.BaseCommit = BaseCommit(s.Cover, patches)
	for _, e := range hints {
		if e != nil && e.changeID != "" {
			s.ChangeID = e.changeID
			return
		}
	}
}

func (a *Assembler) matches(file string) bool {
	for _, g := range a.globs {
		if g.Match(file) {
			return true
		}
	}
	return false
}

// listsOf names the configured lists the messages went to (by address
// in To/Cc or by List-Id), then any other List-Id.
func (a *Assembler) listsOf(members []*entry) []string {
	var names, others []string
	for _, e := range members {
		for _, n := range e.lists {
			names = appendUnique(names, n)
		}
		for _, id := range e.otherLists {
			others = appendUnique(others, id)
		}
	}
	sort.Strings(names)
	sort.Strings(others)
	return append(names, others...)
}

// listsOfMessage is listsOf for one message: the configured lists it
// went to, in configuration order, and its other List-Ids, lower-case.
func (a *Assembler) listsOfMessage(m *flow.Message) (names, others []string) {
	for _, l := range a.cfg.Lists {
		if contains(names, l.Name) {
			continue
		}
		listID := strings.ReplaceAll(strings.ToLower(l.Address), "@", ".")
		hit := false
		for _, ad := range m.To {
			hit = hit || (l.Address != "" && strings.EqualFold(ad.Email, l.Address))
		}
		for _, ad := range m.Cc {
			hit = hit || (l.Address != "" && strings.EqualFold(ad.Email, l.Address))
		}
		for _, id := range m.ListIDs {
			hit = hit || (listID != "" && strings.EqualFold(id, listID))
		}
		if hit {
			names = append(names, l.Name)
		}
	}
	for _, id := range m.ListIDs {
		known := false
		for _, l := range a.cfg.Lists {
			known = known || strings.EqualFold(id, strings.ReplaceAll(l.Address, "@", "."))
		}
		if !known {
			others = appendUnique(others, strings.ToLower(id))
		}
	}
	return names, others
}

// attachReplies walks each reply up its thread to the series message it
// answers, and collects trailers, applied notes and commands as b4 does.
func (a *Assembler) attachReplies(held []*entry, memberOf map[*entry]*group, seriesOf map[*group]*Series, asm *Assembly) {
	patchOf := map[*entry]*Patch{}
	for g, s := range seriesOf {
		for _, p := range s.Patches {
			for _, e := range g.members {
				if e.msg == p.Message {
					patchOf[e] = p
				}
			}
		}
	}
	for _, f := range held {
		if (f.kind != kindOther && !f.reply) || a.implicit[f] {
			continue
		}
		// Find the series message this reply is under; loops in
		// References end the walk.
		var target *entry
		seen := map[*entry]bool{f: true}
		for cur := f; ; {
			p := a.heldParent(cur)
			if p == nil || seen[p] {
				break
			}
			seen[p] = true
			if memberOf[p] != nil {
				target = p
				break
			}
			if !p.reply {
				// A message that starts a discussion of its own (a bug
				// report, a pull request): b4 stops climbing there too.
				break
			}
			cur = p
		}
		var (
			s     *Series
			index int
		)
		if target != nil {
			s = seriesOf[memberOf[target]]
			if !a.implicit[target] {
				index = target.index()
			}
			s.Replies++
		}
		if len(f.trailers) > 0 {
			a.collectTrailers(f, memberOf, seriesOf, patchOf)
		}
		if s != nil && f.review != nil && !slices.ContainsFunc(s.Reviews, func(r flow.Review) bool { return r.MessageID == f.review.MessageID }) {
			s.Reviews = append(s.Reviews, *f.review)
		}
		if s != nil && f.applied {
			s.Applied = append(s.Applied, Applied{By: f.msg.From, MessageID: f.msg.MessageID, Date: f.date, PatchIndex: index, Commits: f.commits, Mail: f.msg})
		}
		for _, c := range f.commands {
			c.MessageID, c.From, c.Date, c.Mail = f.msg.MessageID, f.msg.From, f.date, f.msg
			c.References = append([]string(nil), f.msg.References...)
			if f.parent != "" && !slices.Contains(c.References, f.parent) {
				c.References = append(c.References, f.parent)
			}
			if s != nil {
				c.SeriesID, c.PatchIndex = s.ID, index
			}
			asm.Commands = append(asm.Commands, c)
		}
	}
	for _, s := range asm.Series {
		for _, p := range s.Patches {
			sortTrailers(p.Trailers)
		}
		sortTrailers(s.Trailers)
	}
}

// collectTrailers gives a reply's trailers to the patch (or, from a
// reply to the cover, the series) it answers, walking up exactly as b4
// 0.12 does: the parent is In-Reply-To (only if held; without one, the
// first held reference), climbing goes through replies by In-Reply-To
// only and picks up their trailers too, and it stops at any message
// that is not a reply. Person trailers must name the reply's sender.
func (a *Assembler) collectTrailers(f *entry, memberOf map[*entry]*group, seriesOf map[*group]*Series, patchOf map[*entry]*Patch) {
	var p *entry
	if f.msg.InReplyTo != "" {
		p = a.parentOf(f) // the parent is In-Reply-To
	} else {
		for _, r := range f.msg.References {
			if p = a.lookup(r); p != nil && p != f {
				break
			}
		}
	}
	ts := slices.Clip(f.signed) // appending below must not write into f
	seen := map[*entry]bool{f: true}
	for p != nil && !seen[p] {
		seen[p] = true
		if g := memberOf[p]; g != nil {
			if pt := patchOf[p]; pt != nil && p.kind == kindPatch {
				pt.Trailers = addTrailers(pt.Trailers, ts)
			} else if a.isCover(p) {
				s := seriesOf[g]
				s.Trailers = addTrailers(s.Trailers, ts)
			}
			return
		}
		if !p.reply || p.msg.InReplyTo == "" {
			return
		}
		for _, t := range p.trailers {
			t.From, t.MessageID = p.msg.From, p.msg.MessageID
			ts = append(ts, t)
		}
		p = a.parentOf(p) // In-Reply-To, as it is not empty
	}
}

// carryTrailers gives a patch the follow-up trailers of the same patch
// (same patchwork hash) in another version posted in the same thread, as
// b4 does when a re-roll leaves a patch unchanged.
func (a *Assembler) carryTrailers(order []*group, seriesOf map[*group]*Series) {
	byThread := map[*entry][]*Series{}
	for _, g := range order {
		top := a.threadTop(g.members[0])
		byThread[top] = append(byThread[top], seriesOf[g])
	}
	for _, list := range byThread {
		if len(list) < 2 {
			continue
		}
		own := map[*Patch][]Trailer{}
		for _, s := range list {
			for _, p := range s.Patches {
				own[p] = p.Trailers
			}
		}
		for _, s := range list {
			for _, q := range s.Patches {
				for _, o := range list {
					if o.Version == s.Version {
						continue
					}
					for _, p := range o.Patches {
						if p.entry.patchworkHash() == q.entry.patchworkHash() {
							q.Trailers = addTrailers(q.Trailers, own[p])
						}
					}
				}
			}
		}
	}
}

// loreLinks are the Message-IDs of the lore links in the body, found
// once: a streaming scan links versions again at every flush.
func (e *entry) loreLinks() []string {
	if !e.linksDone {
		e.linksDone = true
		if strings.Contains(e.msg.Body, "lore.kernel.org") {
			for _, m := range loreLinkRe.FindAllStringSubmatch(e.msg.Body, -1) {
				e.links = append(e.links, m[1])
			}
		}
	}
	return e.links
}

// lowerTitle is the lower-case patch title, made once.
func (e *entry) lowerTitle() string {
	if e.ltitle == "" {
		e.ltitle = strings.ToLower(e.subj.Title)
	}
	return e.ltitle
}

// patchworkHash returns the entry's patchwork hash, computing it once.
func (e *entry) patchworkHash() string {
	if e.pwhash == "" {
		e.pwhash = patchworkHash(e.msg.Body)
	}
	return e.pwhash
}

// threadTop is the topmost held ancestor of a message.
func (a *Assembler) threadTop(e *entry) *entry {
	seen := map[*entry]bool{e: true}
	for {
		p := a.heldParent(e)
		if p == nil || seen[p] {
			return e
		}
		seen[p] = true
		e = p
	}
}

// addTrailers appends trailers not yet present (same name and value).
func addTrailers(list, add []Trailer) []Trailer {
	for _, t := range add {
		dup := false
		for _, x := range list {
			dup = dup || (strings.EqualFold(x.Name, t.Name) && x.Value == t.Value)
		}
		if !dup {
			list = append(list, t)
		}
	}
	return list
}

// sortTrailers keeps the order deterministic whatever order replies
// were walked in: by name, then value.
func sortTrailers(ts []Trailer) {
	sort.SliceStable(ts, func(i, j int) bool {
		if !strings.EqualFold(ts[i].Name, ts[j].Name) {
			return strings.ToLower(ts[i].Name) < strings.ToLower(ts[j].Name)
		}
		return ts[i].Value < ts[j].Value
	})
}

// linkVersions connects versions of the same work by one author: same
// change-id, same cover title, most patch titles shared, or a lore link
// in one version's cover or first patch to a message of the other.
func linkVersions(all []*Series) {
	byAuthor := map[string][]*Series{}
	for _, s := range all {
		a := strings.ToLower(s.Author.Email)
		byAuthor[a] = append(byAuthor[a], s)
	}
	// byMsg finds the series of a linked message; only the linked ones
	// go in (a flush links again every held series, and links are few).
	linked := map[string]bool{}
	for _, s := range all {
		if e := s.linkSource(); e != nil {
			for _, id := range e.loreLinks() {
				linked[id] = true
			}
		}
	}
	byMsg := map[string]*Series{}
	for _, s := range all {
		if len(linked) == 0 {
			break
		}
		if s.Cover != nil && linked[s.Cover.MessageID] {
			byMsg[s.Cover.MessageID] = s
		}
		for _, p := range s.Patches {
			if linked[p.Message.MessageID] {
				byMsg[p.Message.MessageID] = s
			}
		}
	}
	link := func(x, y *Series) {
		if x == y || x.Version == y.Version {
			return
		}
		x.Versions = appendUnique(x.Versions, y.ID)
		y.Versions = appendUnique(y.Versions, x.ID)
	}
	for _, list := range byAuthor {
		for i, x := range list {
			for _, y := range list[i+1:] {
				if sameWork(x, y) {
					link(x, y)
				}
			}
		}
	}
	for _, s := range all {
		e := s.linkSource()
		if e == nil {
			continue
		}
		for _, id := range e.loreLinks() {
			if o := byMsg[id]; o != nil && strings.EqualFold(o.Author.Email, s.Author.Email) {
				link(s, o)
			}
		}
	}
	ver := map[string]*Series{}
	for _, s := range all {
		ver[s.ID] = s
	}
	for _, s := range all {
		sort.Slice(s.Versions, func(i, j int) bool {
			vi, vj := ver[s.Versions[i]], ver[s.Versions[j]]
			if vi.Version != vj.Version {
				return vi.Version < vj.Version
			}
			return vi.ID < vj.ID
		})
	}
}

// linkSource is the message whose lore links name other versions: the
// cover, else the first patch.
func (s *Series) linkSource() *entry {
	if s.cover != nil {
		return s.cover
	}
	if len(s.Patches) > 0 {
		return s.Patches[0].entry
	}
	return nil
}

// versionWindow is how far apart two versions linked by their titles
// alone may be.
const versionWindow = 180 * 24 * time.Hour

func sameWork(x, y *Series) bool {
	if x.Version == y.Version {
		return false
	}
	if x.ChangeID != "" && x.ChangeID == y.ChangeID {
		return true
	}
	// Titles repeat over the years ("mlx5 fixes"); a re-roll comes
	// within months.
	if d := x.Date.Sub(y.Date); d > versionWindow || d < -versionWindow {
		return false
	}
	if x.Cover != nil && y.Cover != nil && strings.EqualFold(x.Subject, y.Subject) {
		return true
	}
	tx := map[string]bool{}
	for _, p := range x.Patches {
		tx[p.entry.lowerTitle()] = true
	}
	common, union := 0, len(tx)
	for _, p := range y.Patches {
		t := p.entry.lowerTitle()
		if tx[t] {
			common++
		} else {
			union++
		}
	}
	return union > 0 && common*2 >= union
}

func incompleteReason(s *Series, grace time.Duration) string {
	miss := make([]string, len(s.Missing))
	for i, m := range s.Missing {
		miss[i] = strconv.Itoa(m)
	}
	noun := "patch"
	if len(miss) > 1 {
		noun = "patches"
	}
	return fmt.Sprintf("%s %s of %d missing %s after the last one arrived", noun, strings.Join(miss, ", "), s.Total, grace)
}

// notTrees are bracket words that say something about a posting, not
// where it goes.
var notTrees = map[string]bool{
	"fyi": true, "git": true, "pull": true, "bug": true, "rft": true, "dnm": true, "wip": true,
	"poc": true, "test": true, "autosel": true, "do": true, "not": true, "merge": true,
	"draft": true, "review": true, "repost": true, "new": true, "proposal": true, "question": true,
}

// treeTag picks the first tag that can name a tree or branch.
func treeTag(tags []string) string {
	for _, t := range tags {
		if notTrees[strings.ToLower(t)] || allDigits(t) {
			continue
		}
		return t
	}
	return ""
}

// Flush is Assemble for a reader that streams an archive and must not
// hold all of it: it returns the series settled before the cutoff
// (their newest patch or cover was written before it: its clamped Date,
// or the later time a Stream held it by) and the commands of the
// replies it drops, and forgets every message written before the
// cutoff unless an open series still needs it (its patches, cover, and
// the replies under them). Written, not arrived: a mirror's commit time
// jumps by weeks where it stopped archiving and caught up later, and
// the mail on both sides of such a gap was written minutes apart. What
// stays is the assembly window: the mail after the cutoff and the open
// series. A reply that comes after its series was flushed finds no
// series, so the cutoff must trail the newest mail by the time replies
// take (weeks). A cutoff after every message empties the Assembler and
// returns everything left. Versions are linked only within what is
// held together.
func (a *Assembler) Flush(before time.Time) *Assembly {
	asm := a.Assemble()
	open := map[*entry]bool{}
	out := &Assembly{}
	for _, s := range asm.Series {
		if !s.lastAt.Before(before) {
			if s.Cover != nil {
				open[a.byID[s.Cover.MessageID]] = true
			}
			for _, p := range s.Patches {
				open[p.entry] = true
			}
			continue
		}
		out.Series = append(out.Series, s)
		if a.flushed == nil {
			a.flushed = map[string]time.Time{}
		}
		a.flushed[s.ID] = before
	}
	// A thread silent for longer than versions are linked is done.
	for id, at := range a.flushed {
		if before.Sub(at) > versionWindow {
			delete(a.flushed, id)
		}
	}
	keep := func(e *entry) bool {
		if !e.at.Before(before) || open[e] {
			return true
		}
		seen := map[*entry]bool{e: true}
		for p := a.heldParent(e); p != nil && !seen[p]; p = a.heldParent(p) {
			if open[p] {
				return true
			}
			seen[p] = true
		}
		return false
	}
	var drop []*entry
	for _, e := range a.byID {
		if !keep(e) {
			drop = append(drop, e)
		}
	}
	dropped := map[string]bool{}
	for _, e := range drop {
		dropped[e.msg.MessageID] = true
		a.forget(e)
	}
	for _, c := range asm.Commands {
		if dropped[c.MessageID] {
			out.Commands = append(out.Commands, c)
		}
	}
	return out
}

// BaseCommit is the base a series' mails name, by b4's rule: b4 writes
// a "base-commit:" line into the cover letter, or the last patch, and
// reads the first run of 7 to 40 hex digits after it, in any case. It
// is lower-cased, as git names commits; "" when no mail names one.
func BaseCommit(cover *flow.Message, patches []*flow.Message) string {
	mails := []*flow.Message{cover}
	for i := len(patches) - 1; i >= 0; i-- {
		mails = append(mails, patches[i])
	}
	for _, m := range mails {
		// A cheap look first: most mails have no such line.
		if m == nil || !strings.Contains(m.Body, "base-commit:") && !strings.Contains(m.Body, "BASE-COMMIT:") {
			continue
		}
		if h := firstSubmatch(baseCommitRe, m.Body); h != "" {
			return strings.ToLower(h)
		}
	}
	return ""
}
