package feed

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Git reads a public-inbox v2 archive: each commit of an epoch holds one
// message as blob `m`, or a removal as blob `d`; epochs are git/0.git,
// git/1.git, ... and only the newest one grows.
//
// Dir is either an inbox directory (with git/N.git inside), or a single
// bare epoch repository (read as epoch 0), or, when URL is set, the
// directory the inbox is mirrored into. With URL set, every Read first
// mirrors, from lore or any public-inbox server, the epochs from the
// checkpoint's to the newest (the epoch list comes from
// <URL>/manifest.js.gz); the first Read mirrors only the newest.
//
// Without a checkpoint, Read starts at the first commit of the newest
// epoch that has one. Reads follow rollover into the next epoch, and
// survive a history rewrite (public-inbox-purge/-edit force-push a new
// history): the messages of the rewritten range are compared by blob with
// what was already delivered, new ones are delivered, purged ones are
// delivered as deletions, and none is repeated. Naming the purged ones
// needs the old commits, which a go-git mirror keeps; public-inbox-purge
// prunes the inbox's own repositories, so a reader of those finds its
// place again by the blobs of the last messages it delivered (kept in the
// checkpoint), reads on, and logs that purged mail could not be reported.
// Only when none of those is left does Read fail with ErrCheckpointLost.
type Git struct {
	// List names the list; it is copied into every Item and the Key.
	List string
	// Dir is the inbox directory, a bare epoch repository, or the mirror.
	Dir string
	// URL is the inbox base URL (https://lore.kernel.org/linux-rdma), or
	// "" to read Dir as it is.
	URL string
	// HTTP fetches the manifest; nil means a client with UserAgent.
	HTTP *HTTPClient
	// AllEpochs makes a reader without a checkpoint start at the oldest
	// epoch instead of the newest: a scan of the whole archive.
	AllEpochs bool
	// FromTip makes a reader without a checkpoint start after the
	// newest epoch's current tip: only mail that arrives later is read
	// (a bot's first start on a lore epoch that holds years of mail).
	FromTip bool
	// Log receives what is skipped; nil discards.
	Log *slog.Logger
}

// ErrCheckpointLost means the checkpoint's commit is no longer in the
// archive, so what was delivered cannot be told from what was not.
var ErrCheckpointLost = errors.New("checkpoint commit is gone from the archive")

// Key implements Source.
func (g *Git) Key() string { return "git " + g.List }

// gitCheckpoint is where a Git read stands: in epoch Epoch, everything up
// to Commit is delivered; Recent are the blobs of the last messages
// delivered (oldest first), anchors to find the place again in a history
// that was rewritten and pruned. While a rewrite is being delivered, Tip
// is the new history's tip and Done how many of the rewrite's steps are
// done.
//
// Retry are the commits whose message could not be read (a missing or
// corrupt object): they were counted and passed over, and every Read
// tries them again first, delivering those that became readable (a
// mirror fetched again, a repaired repository).
type gitCheckpoint struct {
	Epoch  int
	Commit plumbing.Hash
	Recent []plumbing.Hash
	Tip    plumbing.Hash
	Done   int
	Retry  []retryRef
}

// retryRef is an unreadable message's commit in its epoch.
type retryRef struct {
	Epoch  int
	Commit plumbing.Hash
}

// maxRetry bounds the unreadable commits a checkpoint remembers; older
// ones are dropped (and logged): they stay counted, not retried.
const maxRetry = 64

// recentBlobs is how many anchors a checkpoint keeps: a purge of up to
// this many of the newest messages still finds the place.
const recentBlobs = 8

func (c gitCheckpoint) String() string {
	// "git1 <epoch> <commit> <recent,...|->", built in one buffer: every
	// message delivered carries a checkpoint.
	b := make([]byte, 0, 64+41*max(1, len(c.Recent)))
	b = append(b, "git1 "...)
	b = strconv.AppendInt(b, int64(c.Epoch), 10)
	b = append(b, ' ')
	b = hex.AppendEncode(b, c.Commit[:])
	b = append(b, ' ')
	if len(c.Recent) == 0 {
		b = append(b, '-')
	}
	for i, h := range c.Recent {
		if i > 0 {
			b = append(b, ',')
		}
		b = hex.AppendEncode(b, h[:])
	}
	s := string(b)
	if !c.Tip.IsZero() {
		s += fmt.Sprintf(" %s %d", c.Tip, c.Done)
	}
	if len(c.Retry) > 0 {
		rs := make([]string, len(c.Retry))
		for i, r := range c.Retry {
			rs[i] = position(r.Epoch, r.Commit)
		}
		s += " retry=" + strings.Join(rs, ",")
	}
	return s
}

// position is an Item's Pos: "<epoch>:<commit>".
func position(epoch int, commit plumbing.Hash) string {
	return strconv.Itoa(epoch) + ":" + commit.String()
}

// withDelivered returns c with blob added to Recent.
func (c gitCheckpoint) withDelivered(blob plumbing.Hash) gitCheckpoint {
	r := append(slices.Clone(c.Recent), blob)
	c.Recent = r[max(0, len(r)-recentBlobs):]
	return c
}

func parseGitCheckpoint(s string) (gitCheckpoint, error) {
	var c gitCheckpoint
	f := strings.Fields(s)
	if n := len(f); n > 0 && strings.HasPrefix(f[n-1], "retry=") {
		for _, r := range strings.Split(strings.TrimPrefix(f[n-1], "retry="), ",") {
			e, h, ok := strings.Cut(r, ":")
			n, err := strconv.Atoi(e)
			if !ok || err != nil || n < 0 || !plumbing.IsHash(h) {
				return c, fmt.Errorf("bad git checkpoint %q: retry %q", s, r)
			}
			c.Retry = append(c.Retry, retryRef{n, plumbing.NewHash(h)})
		}
		f = f[:n-1]
	}
	if (len(f) != 4 && len(f) != 6) || f[0] != "git1" {
		return c, fmt.Errorf("bad git checkpoint %q", s)
	}
	var err error
	if c.Epoch, err = strconv.Atoi(f[1]); err != nil || c.Epoch < 0 {
		return c, fmt.Errorf("bad git checkpoint %q: epoch", s)
	}
	if c.Commit, err = parseHash(f[2]); err != nil {
		return c, fmt.Errorf("bad git checkpoint %q: %w", s, err)
	}
	if f[3] != "-" {
		for _, h := range strings.Split(f[3], ",") {
			b, err := parseHash(h)
			if err != nil {
				return c, fmt.Errorf("bad git checkpoint %q: %w", s, err)
			}
			c.Recent = append(c.Recent, b)
		}
	}
	if len(f) == 6 {
		if c.Tip, err = parseHash(f[4]); err != nil {
			return c, fmt.Errorf("bad git checkpoint %q: %w", s, err)
		}
		if c.Done, err = strconv.Atoi(f[5]); err != nil || c.Done < 0 {
			return c, fmt.Errorf("bad git checkpoint %q: count", s)
		}
	}
	return c, nil
}

func parseHash(s string) (plumbing.Hash, error) {
	if !plumbing.IsHash(s) {
		return plumbing.ZeroHash, fmt.Errorf("bad commit id %q", s)
	}
	return plumbing.NewHash(s), nil
}

// Read implements Source.
func (g *Git) Read(ctx context.Context, after string, yield func(Item) error) (string, error) {
	var cp gitCheckpoint
	started := after != ""
	if started {
		var err error
		if cp, err = parseGitCheckpoint(after); err != nil {
			return "", err
		}
	}
	if g.URL != "" {
		first := -1
		if started {
			first = cp.Epoch
		} else if g.AllEpochs {
			first = 0
		}
		if err := g.mirror(ctx, first); err != nil {
			return "", &SourceError{Source: g.Key(), Err: err}
		}
	}
	epochs, err := g.epochs()
	if err != nil {
		return "", &SourceError{Source: g.Key(), Err: err}
	}
	if len(epochs) == 0 {
		return after, nil
	}
	if !started && g.AllEpochs {
		cp = gitCheckpoint{Epoch: epochs[0].n}
	} else if !started {
		// The newest epoch with mail: one just created may be empty.
		cp = gitCheckpoint{Epoch: epochs[len(epochs)-1].n}
		for i := len(epochs) - 1; i > 0; i-- {
			has, err := hasCommits(epochs[i].path)
			if err != nil {
				return "", &SourceError{Source: g.Key(), Err: err}
			}
			if has {
				break
			}
			cp.Epoch = epochs[i-1].n
		}
	} else if !slices.ContainsFunc(epochs, func(e epoch) bool { return e.n == cp.Epoch }) {
		logOrDiscard(g.Log).Warn("feed: the checkpoint's epoch is missing; its unread mail cannot be read",
			"source", g.Key(), "epoch", cp.Epoch, "dir", g.Dir)
	}
	if !started && g.FromTip && !g.AllEpochs {
		return g.tipCheckpoint(epochs[len(epochs)-1])
	}
	rs := &readState{retry: cp.Retry}
	if len(cp.Retry) > 0 {
		if err := g.retryUnreadable(ctx, epochs, cp, rs, yield); err != nil {
			return "", err
		}
	}
	for _, e := range epochs {
		if e.n < cp.Epoch {
			continue
		}
		start := cp
		if e.n > cp.Epoch {
			start = gitCheckpoint{Epoch: e.n}
		}
		next, err := g.readEpoch(ctx, e, start, rs, yield)
		if err != nil {
			return "", err
		}
		// An epoch without commits yet (just created) is no place to
		// resume from: the checkpoint stays in the previous one.
		if !next.Commit.IsZero() {
			cp = next
		}
	}
	cp.Retry = rs.retry
	if cp.Commit.IsZero() {
		if len(cp.Retry) > 0 {
			return cp.String(), nil
		}
		return after, nil // nothing in the archive yet
	}
	return cp.String(), nil
}

// readState is what one Read carries across epochs: the commits whose
// message could not be read, to try again next time.
type readState struct {
	retry []retryRef
}

// retryUnreadable tries the checkpoint's unreadable commits again and
// delivers those that can be read now; the others stay for next time.
func (g *Git) retryUnreadable(ctx context.Context, epochs []epoch, cp gitCheckpoint, rs *readState, yield func(Item) error) error {
	readers := map[int]*epochReader{}
	defer func() {
		for _, rd := range readers {
			rd.pr.close()
			rd.st.Close()
		}
	}()
	for _, ref := range cp.Retry {
		if err := ctx.Err(); err != nil {
			return err
		}
		rd := readers[ref.Epoch]
		if rd == nil {
			i := slices.IndexFunc(epochs, func(e epoch) bool { return e.n == ref.Epoch })
			if i < 0 {
				logOrDiscard(g.Log).Warn("feed: the epoch of an unreadable message is gone; it is not retried",
					"source", g.Key(), "epoch", ref.Epoch, "commit", ref.Commit)
				rs.retry = without(rs.retry, ref)
				continue
			}
			r, st, err := openRepo(epochs[i].path)
			if err != nil {
				return &SourceError{Source: g.Key(), Err: err}
			}
			pr, err := openPackReader(epochs[i].path, r.Storer)
			if err != nil {
				st.Close()
				return &SourceError{Source: g.Key(), Err: err}
			}
			rd = &epochReader{g: g, pr: pr, st: st, n: ref.Epoch, rs: rs}
			readers[ref.Epoch] = rd
		}
		c, e, raw, ok, err := rd.load(ref.Commit)
		if err != nil {
			rd.log().Debug("feed: message still unreadable", "source", g.Key(), "epoch", ref.Epoch, "commit", ref.Commit, "err", err)
			continue
		}
		rs.retry = without(rs.retry, ref)
		if !ok {
			continue
		}
		rd.log().Info("feed: a message that could not be read before is readable now", "source", g.Key(), "epoch", ref.Epoch, "commit", ref.Commit)
		next := cp
		next.Retry = rs.retry
		if err := yield(Item{
			List:       g.List,
			Raw:        raw,
			Received:   c.committed,
			Pos:        position(ref.Epoch, ref.Commit),
			Deleted:    e.name == "d",
			Checkpoint: next.String(),
		}); err != nil {
			return err
		}
	}
	return nil
}

// without returns list minus r, in a new slice.
func without(list []retryRef, r retryRef) []retryRef {
	out := make([]retryRef, 0, len(list))
	for _, x := range list {
		if x != r {
			out = append(out, x)
		}
	}
	return out
}

type epoch struct {
	n    int
	path string
}

var epochDirRe = regexp.MustCompile(`^([0-9]+)\.git$`)

// epochs lists Dir's epochs in order; a bare repository is epoch 0.
func (g *Git) epochs() ([]epoch, error) {
	ents, err := os.ReadDir(filepath.Join(g.Dir, "git"))
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(g.Dir, "objects")); err != nil {
			if g.URL != "" && errors.Is(err, os.ErrNotExist) {
				return nil, nil
			}
			return nil, fmt.Errorf("%s is neither a public-inbox directory nor a git repository: %w", g.Dir, err)
		}
		return []epoch{{0, g.Dir}}, nil
	}
	if err != nil {
		return nil, err
	}
	var out []epoch
	for _, e := range ents {
		if m := epochDirRe.FindStringSubmatch(e.Name()); m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, epoch{n, filepath.Join(g.Dir, "git", e.Name())})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n < out[j].n })
	return out, nil
}

// openRepo opens a bare repository for reading many objects: descriptors
// stay open and a large cache keeps decoded delta bases.
func openRepo(path string) (*git.Repository, *filesystem.Storage, error) {
	st := filesystem.NewStorageWithOptions(osfs.New(path), cache.NewObjectLRU(64*cache.MiByte),
		filesystem.Options{KeepDescriptors: true})
	r, err := git.Open(st, nil)
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	return r, st, nil
}

// Unread says whether the archive, as it is on disk (no mirror is
// fetched), holds mail past checkpoint after, and names its newest tip
// ("<epoch>:<commit>"). It reads refs alone, no object, so serve can look
// at a local inbox every few seconds and read it as soon as mail comes. A
// Dir that does not exist yet (an inbox nothing was posted to) holds none.
func (g *Git) Unread(after string) (tip string, unread bool, err error) {
	if _, err := os.Stat(g.Dir); errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	epochs, err := g.epochs()
	if err != nil {
		return "", false, &SourceError{Source: g.Key(), Err: err}
	}
	for i := len(epochs) - 1; i >= 0; i-- {
		r, st, err := openRepo(epochs[i].path)
		if err != nil {
			return "", false, &SourceError{Source: g.Key(), Err: err}
		}
		h, err := tipOf(r)
		st.Close()
		if err != nil {
			return "", false, &SourceError{Source: g.Key(), Err: err}
		}
		if h.IsZero() {
			continue // an epoch just created: its mail is in the one before
		}
		tip = position(epochs[i].n, h)
		if after == "" {
			return tip, true, nil
		}
		cp, err := parseGitCheckpoint(after)
		if err != nil {
			return "", false, err
		}
		return tip, epochs[i].n > cp.Epoch || (epochs[i].n == cp.Epoch && h != cp.Commit), nil
	}
	return "", false, nil
}

// tipCheckpoint is the checkpoint of e's current tip ("" while empty).
func (g *Git) tipCheckpoint(e epoch) (string, error) {
	r, st, err := openRepo(e.path)
	if err != nil {
		return "", &SourceError{Source: g.Key(), Err: err}
	}
	defer st.Close()
	tip, err := tipOf(r)
	if err != nil {
		return "", &SourceError{Source: g.Key(), Err: err}
	}
	if tip.IsZero() {
		return "", nil
	}
	return gitCheckpoint{Epoch: e.n, Commit: tip}.String(), nil
}

func hasCommits(path string) (bool, error) {
	r, st, err := openRepo(path)
	if err != nil {
		return false, err
	}
	defer st.Close()
	tip, err := tipOf(r)
	return !tip.IsZero(), err
}

func tipOf(r *git.Repository) (plumbing.Hash, error) {
	for _, name := range []plumbing.ReferenceName{"refs/heads/master", plumbing.HEAD} {
		ref, err := r.Reference(name, true)
		if err == nil {
			return ref.Hash(), nil
		}
		if !errors.Is(err, plumbing.ErrReferenceNotFound) {
			return plumbing.ZeroHash, err
		}
	}
	return plumbing.ZeroHash, nil // an epoch without commits yet
}

// readEpoch delivers epoch e's commits after cp.
func (g *Git) readEpoch(ctx context.Context, e epoch, cp gitCheckpoint, rs *readState, yield func(Item) error) (gitCheckpoint, error) {
	r, st, err := openRepo(e.path)
	if err != nil {
		return cp, &SourceError{Source: g.Key(), Err: err}
	}
	defer st.Close()
	pr, err := openPackReader(e.path, r.Storer)
	if err != nil {
		return cp, &SourceError{Source: g.Key(), Err: err}
	}
	defer pr.close()
	rd := &epochReader{g: g, pr: pr, n: e.n, yield: yield, rs: rs}
	tip, err := tipOf(r)
	if err != nil {
		return cp, &SourceError{Source: g.Key(), Err: err}
	}
	if tip.IsZero() {
		return cp, nil
	}
	if !cp.Commit.IsZero() {
		if _, _, err := rd.pr.read(cp.Commit); err != nil {
			return rd.resumeByBlobs(ctx, cp, tip)
		}
	}
	if !cp.Tip.IsZero() {
		// A rewrite was being delivered when we stopped: finish it.
		cp, err = rd.finishRewrite(ctx, cp, tip)
		if err != nil {
			return cp, err
		}
	}
	if cp.Commit == tip {
		return cp, nil
	}
	newer, found, broken, err := rd.walkBackBroken(ctx, tip, cp.Commit)
	if err != nil {
		return cp, err
	}
	if !broken.IsZero() {
		// A commit of the history itself is missing or corrupt: the
		// commits behind it cannot be reached. Deliver what is newer,
		// count the break, and go on: one bad object is not a reason
		// to stop reading the archive.
		rd.log().Error("feed: archive history is broken at an unreadable commit; the commits behind it cannot be read",
			"source", g.Key(), "epoch", e.n, "commit", broken, "after", cp.Commit)
		if err := yield(Item{List: g.List, Pos: position(e.n, broken),
			Err: rd.sourceErr(fmt.Errorf("commit %s unreadable: history behind it lost", broken))}); err != nil {
			return cp, err
		}
		found = true
	}
	if !found {
		return rd.rewrite(ctx, cp, tip, nil)
	}
	for i := len(newer) - 1; i >= 0; i-- {
		w := newer[i]
		next, err := rd.deliverCommit(w.hash, rawCommit{tree: w.tree, committed: w.committed}, false,
			gitCheckpoint{Epoch: e.n, Commit: w.hash, Recent: cp.Recent})
		if err != nil {
			return cp, err
		}
		cp = next
	}
	return cp, nil
}

// resumeByBlobs finds the place in a history whose checkpoint commit is
// gone (rewritten, then pruned, as public-inbox-purge does to its own
// repositories): the newest commit holding one of the recently delivered
// blobs is the anchor, and the commits after it whose blobs were not
// delivered follow. The purged messages themselves cannot be named.
func (rd *epochReader) resumeByBlobs(ctx context.Context, cp gitCheckpoint, tip plumbing.Hash) (gitCheckpoint, error) {
	all, _, err := rd.walkBack(ctx, tip, plumbing.ZeroHash)
	if err != nil {
		return cp, err
	}
	recent := map[plumbing.Hash]bool{}
	for _, b := range cp.Recent {
		recent[b] = true
	}
	anchor := -1
	for i, h := range all {
		_, e, ok, err := rd.entryOf(h)
		if err != nil {
			return cp, err
		}
		if ok && recent[e.blob] {
			anchor = i
			break
		}
	}
	if anchor < 0 {
		return cp, rd.sourceErr(fmt.Errorf("%w: %s, and none of the last %d delivered messages is in the new history",
			ErrCheckpointLost, cp.Commit, len(cp.Recent)))
	}
	rd.log().Warn("feed: archive history was rewritten and the old commits pruned; resuming after the last delivered message still there (purged messages cannot be reported)",
		"source", rd.g.Key(), "epoch", rd.n, "old", cp.Commit, "anchor", all[anchor])
	cp = gitCheckpoint{Epoch: rd.n, Commit: all[anchor], Recent: cp.Recent}
	for i := anchor - 1; i >= 0; i-- {
		_, e, ok, err := rd.entryOf(all[i])
		if err != nil {
			return cp, err
		}
		if ok && recent[e.blob] {
			cp.Commit = all[i] // delivered before the rewrite
			continue
		}
		next, err := rd.deliver(all[i], false, gitCheckpoint{Epoch: rd.n, Commit: all[i], Recent: cp.Recent})
		if err != nil {
			return cp, err
		}
		cp = next
	}
	return cp, nil
}

type epochReader struct {
	g     *Git
	pr    *packReader
	st    *filesystem.Storage // closed by its owner; set only when rd owns it
	n     int
	yield func(Item) error
	rs    *readState
	// zones are the commit time zones seen: the walk keeps every
	// commit's time, and a zone each would outweigh the list.
	zones map[int]*time.Location
}

// walkBack returns the commits from tip back to stop (excluded), newest
// first, and whether stop was met; a zero stop walks to the root.
// public-inbox history is linear, so the first parent is the history.
// An unreadable commit is an error: the rewrite logic must not take a
// broken history for a shorter one.
func (rd *epochReader) walkBack(ctx context.Context, tip, stop plumbing.Hash) ([]plumbing.Hash, bool, error) {
	ws, found, broken, err := rd.walkBackBroken(ctx, tip, stop)
	if err == nil && !broken.IsZero() {
		_, err = rd.commit(broken)
	}
	out := make([]plumbing.Hash, len(ws))
	for i, w := range ws {
		out[i] = w.hash
	}
	return out, found, err
}

// walked is a commit the walk back read, with what delivering its
// message needs: reading it again costs a second inflate, which for an
// object this small is mostly building the Huffman tables (a tenth of
// a scan's CPU went to reading every commit twice).
type walked struct {
	hash, tree plumbing.Hash
	committed  time.Time
}

// walkBackBroken is walkBack that stops at an unreadable commit below
// the tip and returns it as broken (the tip itself must be readable).
func (rd *epochReader) walkBackBroken(ctx context.Context, tip, stop plumbing.Hash) ([]walked, bool, plumbing.Hash, error) {
	var out []walked
	for h := tip; ; {
		if h == stop {
			return out, true, plumbing.ZeroHash, nil
		}
		if len(out)%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, false, plumbing.ZeroHash, err
			}
		}
		c, err := rd.commit(h)
		if err != nil {
			if h == tip {
				return nil, false, plumbing.ZeroHash, err
			}
			return out, false, h, nil
		}
		out = append(out, walked{h, c.tree, c.committed})
		if c.parent.IsZero() {
			return out, stop.IsZero(), plumbing.ZeroHash, nil
		}
		h = c.parent
	}
}

func (rd *epochReader) sourceErr(err error) error {
	return &SourceError{Source: rd.g.Key(), Err: fmt.Errorf("epoch %d: %w", rd.n, err)}
}

// entry is what one public-inbox commit holds: blob m or d.
type entry struct {
	name string
	blob plumbing.Hash
}

// object reads an object that must have type want.
func (rd *epochReader) object(h plumbing.Hash, want plumbing.ObjectType) ([]byte, error) {
	t, b, err := rd.pr.read(h)
	if err != nil {
		return nil, rd.sourceErr(err)
	}
	if t != want {
		return nil, rd.sourceErr(fmt.Errorf("object %s is a %s, not a %s", h, t, want))
	}
	return b, nil
}

func (rd *epochReader) commit(h plumbing.Hash) (rawCommit, error) {
	b, err := rd.object(h, plumbing.CommitObject)
	if err != nil {
		return rawCommit{}, err
	}
	if rd.zones == nil {
		rd.zones = map[int]*time.Location{}
	}
	c, err := parseRawCommit(b, rd.zones)
	if err != nil {
		return c, rd.sourceErr(fmt.Errorf("commit %s: %w", h, err))
	}
	return c, nil
}

// emptyBlob is what public-inbox-purge leaves in place of a purged
// message (commit "purged <blob>").
var emptyBlob = plumbing.NewHash("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")

// entryOf returns the commit's single m or d blob; ok is false when the
// commit holds neither (not an archive commit) or an empty one (a purge).
func (rd *epochReader) entryOf(h plumbing.Hash) (rawCommit, entry, bool, error) {
	c, err := rd.commit(h)
	if err != nil {
		return c, entry{}, false, err
	}
	e, ok, err := rd.entryIn(c)
	return c, e, ok, err
}

// entryIn is entryOf for a commit already read.
func (rd *epochReader) entryIn(c rawCommit) (entry, bool, error) {
	t, err := rd.object(c.tree, plumbing.TreeObject)
	if err != nil {
		return entry{}, false, err
	}
	e, ok := treeEntry(t)
	return e, ok && e.blob != emptyBlob, nil
}

func readAllInto(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// deliver yields commit h's message with the checkpoint next (plus the
// blob among the recent ones) and returns that checkpoint. purged turns
// an `m` into a deletion: the message vanished from a rewritten history.
//
// A commit whose tree or blob cannot be read (missing, corrupt, too big)
// is not an error: it is yielded as an unreadable Item (Err set), kept
// in the checkpoint's retry list, and the read goes on.
func (rd *epochReader) deliver(h plumbing.Hash, purged bool, next gitCheckpoint) (gitCheckpoint, error) {
	c, err := rd.commit(h)
	if err != nil {
		return rd.unreadable(h, c, next, err)
	}
	return rd.deliverCommit(h, c, purged, next)
}

// deliverCommit is deliver for commit h already read as c.
func (rd *epochReader) deliverCommit(h plumbing.Hash, c rawCommit, purged bool, next gitCheckpoint) (gitCheckpoint, error) {
	e, raw, ok, err := rd.message(c)
	if err != nil {
		return rd.unreadable(h, c, next, err)
	}
	if !ok {
		rd.log().Warn("feed: commit holds no message (no m or d blob, or a purged empty one), skipped", "source", rd.g.Key(), "epoch", rd.n, "commit", h)
		return next, nil
	}
	if !purged && e.name == "m" {
		next = next.withDelivered(e.blob)
	}
	next.Retry = rd.rs.retry
	return next, rd.yield(Item{
		List:       rd.g.List,
		Raw:        raw,
		Received:   c.committed,
		Pos:        position(rd.n, h),
		Deleted:    purged || e.name == "d",
		Checkpoint: next.String(),
	})
}

// load reads commit h's entry and blob; ok is false when the commit
// holds no message.
func (rd *epochReader) load(h plumbing.Hash) (rawCommit, entry, []byte, bool, error) {
	c, err := rd.commit(h)
	if err != nil {
		return c, entry{}, nil, false, err
	}
	e, raw, ok, err := rd.message(c)
	return c, e, raw, ok, err
}

// message reads the entry and blob of a commit already read.
func (rd *epochReader) message(c rawCommit) (entry, []byte, bool, error) {
	e, ok, err := rd.entryIn(c)
	if err != nil || !ok {
		return e, nil, ok, err
	}
	raw, err := rd.object(e.blob, plumbing.BlobObject)
	if err != nil {
		return e, nil, false, err
	}
	return e, raw, true, nil
}

// unreadable yields commit h as a message that cannot be read and
// remembers it for a retry.
func (rd *epochReader) unreadable(h plumbing.Hash, c rawCommit, next gitCheckpoint, err error) (gitCheckpoint, error) {
	ref := retryRef{rd.n, h}
	retry := append(without(rd.rs.retry, ref), ref)
	if len(retry) > maxRetry {
		rd.log().Warn("feed: too many unreadable messages to remember; the oldest is no longer retried",
			"source", rd.g.Key(), "epoch", retry[0].Epoch, "commit", retry[0].Commit)
		retry = retry[len(retry)-maxRetry:]
	}
	rd.rs.retry = retry
	next.Retry = retry
	return next, rd.yield(Item{
		List:       rd.g.List,
		Received:   c.committed,
		Pos:        position(rd.n, h),
		Checkpoint: next.String(),
		Err:        err,
	})
}

func (rd *epochReader) log() *slog.Logger {
	if rd.g.Log != nil {
		return rd.g.Log
	}
	return slog.New(slog.DiscardHandler)
}

// rewriteStep is one thing a rewritten history changes for a reader:
// a new commit's message, or an old message that is gone (purged).
type rewriteStep struct {
	commit plumbing.Hash
	purged bool
	entry  entry
}

// stepKey identifies a step across histories: commits differ, blobs not.
type stepKey struct {
	purged bool
	entry  entry
}

// rewritePlan compares the delivered history ending at old with the new
// one ending at tip, from their last common commit on: the steps are the
// old messages that are gone (as deletions), then the new commits whose
// blob was not delivered, in history order.
func (rd *epochReader) rewritePlan(ctx context.Context, old, tip plumbing.Hash) ([]rewriteStep, error) {
	newList, _, err := rd.walkBack(ctx, tip, plumbing.ZeroHash)
	if err != nil {
		return nil, err
	}
	inNew := make(map[plumbing.Hash]int, len(newList))
	for i, h := range newList {
		inNew[h] = i
	}
	if _, _, err := rd.pr.read(old); err != nil {
		return nil, rd.sourceErr(fmt.Errorf("%w: %s (history rewritten and old objects pruned)", ErrCheckpointLost, old))
	}
	var oldList []plumbing.Hash // newest first, down to the common commit
	base := len(newList)        // index in newList of the common commit
	for h := old; ; {
		if i, ok := inNew[h]; ok {
			base = i
			break
		}
		c, err := rd.commit(h)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCheckpointLost, err)
		}
		oldList = append(oldList, h)
		if c.parent.IsZero() {
			break
		}
		h = c.parent
	}
	oldSet := map[entry]bool{}
	var oldEntries []rewriteStep
	for i := len(oldList) - 1; i >= 0; i-- {
		_, e, ok, err := rd.entryOf(oldList[i])
		if err != nil {
			return nil, err
		}
		if ok {
			oldSet[e] = true
			oldEntries = append(oldEntries, rewriteStep{commit: oldList[i], purged: true, entry: e})
		}
	}
	newSet := map[entry]bool{}
	var added []rewriteStep
	for i := base - 1; i >= 0; i-- {
		_, e, ok, err := rd.entryOf(newList[i])
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		newSet[e] = true
		if !oldSet[e] {
			added = append(added, rewriteStep{commit: newList[i], entry: e})
		}
	}
	var plan []rewriteStep
	for _, s := range oldEntries {
		if s.entry.name == "m" && !newSet[s.entry] {
			plan = append(plan, s)
		}
	}
	return append(plan, added...), nil
}

// rewrite delivers the difference between the delivered history (ending
// at cp.Commit) and the new one (ending at tip), skipping the steps in
// done (delivered before an interruption). While it runs the checkpoint
// carries the old commit, the new tip and the count of steps done, so a
// crash resumes it; at the end the checkpoint is the new tip.
func (rd *epochReader) rewrite(ctx context.Context, cp gitCheckpoint, tip plumbing.Hash, done map[stepKey]bool) (gitCheckpoint, error) {
	rd.log().Warn("feed: archive history was rewritten; comparing messages", "source", rd.g.Key(), "epoch", rd.n, "old", cp.Commit, "new", tip)
	if cp.Commit.IsZero() {
		return cp, rd.sourceErr(errors.New("rewrite without a delivered commit"))
	}
	plan, err := rd.rewritePlan(ctx, cp.Commit, tip)
	if err != nil {
		return cp, err
	}
	start := 0
	if cp.Tip == tip {
		start = cp.Done
	}
	recent := cp.Recent
	for i := start; i < len(plan); i++ {
		s := plan[i]
		next := gitCheckpoint{Epoch: rd.n, Commit: cp.Commit, Recent: recent, Tip: tip, Done: i + 1}
		if i == len(plan)-1 {
			next = gitCheckpoint{Epoch: rd.n, Commit: tip, Recent: recent}
		}
		if done[stepKey{s.purged, s.entry}] {
			continue
		}
		next, err := rd.deliver(s.commit, s.purged, next)
		if err != nil {
			return gitCheckpoint{Epoch: rd.n, Commit: cp.Commit, Recent: recent, Tip: tip, Done: i}, err
		}
		recent = next.Recent
	}
	return gitCheckpoint{Epoch: rd.n, Commit: tip, Recent: recent}, nil
}

// finishRewrite resumes an interrupted rewrite delivery. If the archive
// only grew since, the rest of the same plan is delivered; if it was
// rewritten once more, the new plan is delivered minus the steps already
// done.
func (rd *epochReader) finishRewrite(ctx context.Context, cp gitCheckpoint, tip plumbing.Hash) (gitCheckpoint, error) {
	if cp.Tip == tip {
		return rd.rewrite(ctx, cp, tip, nil)
	}
	_, grew, err := rd.walkBack(ctx, tip, cp.Tip)
	if err != nil {
		return cp, err
	}
	if grew {
		return rd.rewrite(ctx, cp, cp.Tip, nil) // then the caller fast-forwards
	}
	old, err := rd.rewritePlan(ctx, cp.Commit, cp.Tip)
	if err != nil {
		return cp, err
	}
	done := map[stepKey]bool{}
	for _, s := range old[:min(cp.Done, len(old))] {
		done[stepKey{s.purged, s.entry}] = true
	}
	return rd.rewrite(ctx, gitCheckpoint{Epoch: cp.Epoch, Commit: cp.Commit, Recent: cp.Recent}, tip, done)
}
