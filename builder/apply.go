package builder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/rdmabot/rdmabot/flow"
)

// DefaultMaxBlobSize is the largest file a patch may produce. The largest
// file of a kernel tree is a few MiB; anything far bigger is an attack
// on the bot's memory and disk.
const DefaultMaxBlobSize = 32 << 20

// DefaultMaxSeriesBytes bounds what a whole series writes (the sum of the
// files its patches produce): a mail of a few KB of "copy from" stanzas
// once made a 301 MiB tree, each copy of a big file costing no bytes of
// mail. Real series write a few MB.
const DefaultMaxSeriesBytes = 64 << 20

// ApplyOptions says how a series is committed.
type ApplyOptions struct {
	// Committer signs every commit; Now gives the committer date (an
	// injected clock: tests pin it to compare commit ids with git am).
	Committer Identity
	Now       func() time.Time
	// Scissors honours a "-- >8 --" line as git am --scissors does;
	// git am's default ignores it.
	Scissors bool
	// MaxBlobSize caps every file the patches produce; 0 means
	// DefaultMaxBlobSize.
	MaxBlobSize int64
	// MaxSeriesBytes caps the bytes of every file the series writes, all
	// patches together; 0 means DefaultMaxSeriesBytes.
	MaxSeriesBytes int64
	// Ref, when set, is pointed at the last commit (see SeriesRef).
	Ref plumbing.ReferenceName
}

// Applied is a series applied on a base: one commit per patch.
type Applied struct {
	Base    plumbing.Hash
	Commits []plumbing.Hash
	// Tree is the tree of the last commit.
	Tree plumbing.Hash
}

// ApplyError says a patch does not apply to the base: the series'
// fault (or the base's choice), never the bot's.
type ApplyError struct {
	Index, Total int           // patch n of m (1-based)
	Subject      string        // the patch mail's subject
	Base         plumbing.Hash // the base the series was applied to
	File         string        // the file that failed, if any
	Hunk         int           // 1-based hunk number within File, 0 if none
	HunkHeader   string        // "@@ -l,s +l,s @@" of that hunk
	Reason       string
}

func (e *ApplyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "patch %d/%d %q does not apply to %s", e.Index, e.Total, e.Subject, e.Base)
	if e.File != "" {
		fmt.Fprintf(&b, ": %s", e.File)
	}
	if e.Hunk > 0 {
		fmt.Fprintf(&b, ": hunk #%d %s", e.Hunk, e.HunkHeader)
	}
	fmt.Fprintf(&b, ": %s", e.Reason)
	return b.String()
}

// UnsafeError says a patch tries something the bot refuses outright: a
// path outside the tree or inside .git, a symlink out of the tree, an
// oversized file. Nothing of the series is written.
type UnsafeError struct {
	Index, Total int
	Subject      string
	File         string
	Reason       string
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("patch %d/%d %q refused: %s: %s", e.Index, e.Total, e.Subject, e.File, e.Reason)
}

// Apply commits patches (in order) on base as git am without -3 would:
// author, date and message from each mail, hunks found where git apply
// finds them, one commit per patch. Objects are written only when every
// patch applied, so a failing or refused series leaves the repository as
// it was. Errors are *ApplyError, *UnsafeError or the store's own.
func (s *Store) Apply(ctx context.Context, base plumbing.Hash, patches []*flow.Message, opts ApplyOptions) (*Applied, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxBlobSize == 0 {
		opts.MaxBlobSize = DefaultMaxBlobSize
	}
	if opts.MaxSeriesBytes == 0 {
		opts.MaxSeriesBytes = DefaultMaxSeriesBytes
	}
	var written int64
	if opts.Committer.Name == "" || opts.Committer.Email == "" {
		return nil, errors.New("apply: committer identity unset")
	}
	if opts.Ref != "" {
		if err := checkRef(opts.Ref); err != nil {
			return nil, fmt.Errorf("apply: %w", err)
		}
	}
	repo := s.Repository()
	baseCommit, err := repo.CommitObject(base)
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", base, err)
	}
	objs := newPendingObjects(repo.Storer)
	tree := newEditTree(objs, baseCommit.TreeHash)
	out := &Applied{Base: base}
	parent := base
	for i, m := range patches {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := &patchRun{index: i + 1, total: len(patches), subject: m.Subject, base: base, opts: &opts, objs: objs, tree: tree, written: &written}
		mi := parseMailInfo(m, opts.Scissors)
		if err := p.apply(mi.patch); err != nil {
			return nil, err
		}
		treeID := tree.write(objs.add)
		if treeID.IsZero() {
			treeID = objs.add(plumbing.TreeObject, nil)
		}
		when := mi.date
		now := opts.Now()
		if when.IsZero() {
			when = now
		}
		c := &object.Commit{
			Author:       object.Signature{Name: identCrud(mi.name), Email: identCrud(mi.email), When: when},
			Committer:    object.Signature{Name: opts.Committer.Name, Email: opts.Committer.Email, When: now},
			Message:      mi.message,
			TreeHash:     treeID,
			ParentHashes: []plumbing.Hash{parent},
		}
		raw, err := encodeCommit(c)
		if err != nil {
			return nil, err
		}
		parent = objs.add(plumbing.CommitObject, raw)
		out.Commits = append(out.Commits, parent)
		out.Tree = treeID
	}
	if len(out.Commits) == 0 {
		return nil, errors.New("apply: no patches")
	}
	if err := objs.flush(ctx, s.Dir); err != nil {
		return nil, err
	}
	if opts.Ref != "" {
		if err := repo.Storer.SetReference(plumbing.NewHashReference(opts.Ref, parent)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// identCrud trims what git's ident code strips from names and emails:
// leading and trailing blanks and punctuation, and any <, > or newline.
func identCrud(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '<' || r == '>' || r == '\n' {
			return -1
		}
		return r
	}, s)
	return strings.TrimFunc(s, func(r rune) bool {
		return r <= ' ' || strings.ContainsRune(".,:;<>\"\\'", r)
	})
}

// patchRun applies one patch mail.
type patchRun struct {
	index, total int
	subject      string
	base         plumbing.Hash
	opts         *ApplyOptions
	objs         *pendingObjects
	tree         *editTree
	// written counts the bytes the series wrote so far, all patches.
	written *int64
}

func (p *patchRun) fail(file string, hunk int, header, format string, args ...any) *ApplyError {
	return &ApplyError{Index: p.index, Total: p.total, Subject: p.subject, Base: p.base,
		File: file, Hunk: hunk, HunkHeader: header, Reason: fmt.Sprintf(format, args...)}
}

func (p *patchRun) refuse(file, format string, args ...any) *UnsafeError {
	return &UnsafeError{Index: p.index, Total: p.total, Subject: p.subject, File: file, Reason: fmt.Sprintf(format, args...)}
}

// fileResult is one file's outcome within a patch.
type fileResult struct {
	path    string
	mode    filemode.FileMode
	id      plumbing.Hash
	deleted bool
}

// apply parses the patch text and applies every file of it: first all
// contents are computed against the tree as it was before this patch
// (or as an earlier file of the same patch left it), then removals, then
// additions, as git apply writes its results, so a rename onto a path
// that the same patch frees works.
func (p *patchRun) apply(text string) error {
	files, _, err := gitdiff.Parse(strings.NewReader(text))
	if err != nil {
		return p.fail("", 0, "", "malformed patch: %v", err)
	}
	if len(files) == 0 {
		return p.fail("", 0, "", "no patch in the mail")
	}
	// Paths are checked before anything is read, so a hostile patch is
	// refused whatever else it contains.
	for _, f := range files {
		for _, name := range []string{f.OldName, f.NewName} {
			if name == "" {
				continue
			}
			if err := checkTreePath(name); err != nil {
				return p.refuse(name, "%v", err)
			}
		}
	}
	state := map[string]*fileResult{} // path -> its content after earlier files of this patch
	var results []*fileResult
	lookup := func(name string) (filemode.FileMode, plumbing.Hash, bool, error) {
		if r, ok := state[name]; ok {
			return r.mode, r.id, !r.deleted, nil
		}
		return p.tree.get(name)
	}
	for _, f := range files {
		rs, err := p.applyFile(f, lookup)
		if err != nil {
			return err
		}
		for _, r := range rs {
			state[r.path] = r
			results = append(results, r)
		}
	}
	for _, r := range results {
		if r.deleted && state[r.path].deleted {
			if err := p.tree.remove(r.path); err != nil {
				return p.fail(r.path, 0, "", "%v", err)
			}
		}
	}
	for _, r := range results {
		if !r.deleted && state[r.path] == r {
			if err := p.tree.put(r.path, r.mode, r.id); err != nil {
				return p.fail(r.path, 0, "", "%v", err)
			}
		}
	}
	return nil
}

type lookupFunc func(name string) (filemode.FileMode, plumbing.Hash, bool, error)

// applyFile computes one file's results: its new content and, for a
// rename or deletion, the removal of the old path.
func (p *patchRun) applyFile(f *gitdiff.File, lookup lookupFunc) ([]*fileResult, error) {
	oldName, newName := f.OldName, f.NewName
	name := newName
	if f.IsDelete {
		name = oldName
	}
	var src []byte
	var oldMode filemode.FileMode
	if f.IsNew {
		_, _, exists, err := lookup(newName)
		if err != nil {
			return nil, p.fail(newName, 0, "", "%v", err)
		}
		if exists {
			return nil, p.fail(newName, 0, "", "already exists in the tree")
		}
	} else {
		mode, id, exists, err := lookup(oldName)
		if err != nil {
			return nil, p.fail(oldName, 0, "", "%v", err)
		}
		if !exists {
			return nil, p.fail(oldName, 0, "", "does not exist in the tree")
		}
		if (f.IsRename || f.IsCopy) && newName != oldName {
			_, _, taken, err := lookup(newName)
			if err != nil {
				return nil, p.fail(newName, 0, "", "%v", err)
			}
			if taken {
				return nil, p.fail(newName, 0, "", "already exists in the tree")
			}
		}
		if f.OldMode != 0 && !sameType(filemode.FileMode(uint32(f.OldMode)), mode) {
			return nil, p.fail(oldName, 0, "", "wrong type: the patch expects mode %o, the tree has %o", uint32(f.OldMode), uint32(mode))
		}
		oldMode = mode
		if src, err = p.objs.readBlob(id); err != nil {
			return nil, err
		}
	}

	var dst []byte
	var err error
	switch {
	case f.IsBinary:
		dst, err = p.applyBinary(f, name, src, lookup)
	default:
		dst, err = p.applyText(f, name, src)
	}
	if err != nil {
		return nil, err
	}
	if int64(len(dst)) > p.opts.MaxBlobSize {
		return nil, p.refuse(name, "result is %d bytes, over the %d byte limit", len(dst), p.opts.MaxBlobSize)
	}

	if !f.IsDelete {
		*p.written += int64(len(dst))
		if *p.written > p.opts.MaxSeriesBytes {
			return nil, p.refuse(name, "the series writes %d bytes by here, over the %d byte limit", *p.written, p.opts.MaxSeriesBytes)
		}
	}
	if f.IsDelete {
		if len(dst) != 0 {
			return nil, p.fail(name, 0, "", "the deletion leaves content behind")
		}
		return []*fileResult{{path: oldName, deleted: true}}, nil
	}
	mode := oldMode
	if f.IsNew || (f.NewMode != 0 && f.NewMode != f.OldMode) {
		mode = filemode.FileMode(uint32(f.NewMode))
	}
	if mode == 0 {
		mode = filemode.Regular
	}
	switch mode {
	case filemode.Regular, filemode.Executable:
	case filemode.Symlink:
		if err := checkSymlink(newName, string(dst)); err != nil {
			return nil, p.refuse(newName, "%v", err)
		}
	default:
		return nil, p.refuse(newName, "file mode %o is not a regular file, executable or symlink", uint32(mode))
	}
	res := []*fileResult{{path: newName, mode: mode, id: p.objs.add(plumbing.BlobObject, dst)}}
	if f.IsRename && oldName != newName {
		res = append([]*fileResult{{path: oldName, deleted: true}}, res...)
	}
	return res, nil
}

// sameType says whether two modes are the same kind of object (a file,
// a symlink, a directory): git apply refuses a patch that disagrees on
// the kind and only warns about the executable bit.
func sameType(a, b filemode.FileMode) bool {
	kind := func(m filemode.FileMode) int {
		switch m {
		case filemode.Regular, filemode.Executable, filemode.Deprecated:
			return 1
		}
		return int(m)
	}
	return kind(a) == kind(b)
}

// checkSymlink refuses a symlink whose target leaves the tree or enters
// a .git directory: a build checkout would follow it.
func checkSymlink(name, target string) error {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		return fmt.Errorf("symlink to %q", target)
	}
	resolved := path.Join(path.Dir(name), target)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return fmt.Errorf("symlink to %q points out of the tree", target)
	}
	for _, c := range strings.Split(resolved, "/") {
		if strings.EqualFold(c, ".git") {
			return fmt.Errorf("symlink to %q points into .git", target)
		}
	}
	return nil
}

func (p *patchRun) applyText(f *gitdiff.File, name string, src []byte) ([]byte, error) {
	if len(f.TextFragments) == 0 {
		return src, nil
	}
	img := splitLines(src)
	for i, frag := range f.TextFragments {
		if err := img.applyFragment(frag); err != nil {
			return nil, p.fail(name, i+1, strings.TrimSpace(frag.Header()), "%v", err)
		}
	}
	return img.bytes(), nil
}

func (p *patchRun) applyBinary(f *gitdiff.File, name string, src []byte, lookup lookupFunc) ([]byte, error) {
	// git apply checks a binary patch's pre- and post-image ids, which
	// need the full index line.
	if !f.IsNew && !plumbing.IsHash(f.OldOIDPrefix) {
		return nil, p.fail(name, 0, "", "binary patch without a full index line")
	}
	if !f.IsNew {
		if got := objectHash(plumbing.BlobObject, src); got.String() != f.OldOIDPrefix {
			return nil, p.fail(name, 0, "", "binary patch expects %s, the tree has %s", f.OldOIDPrefix, got)
		}
	}
	var dst []byte
	if f.BinaryFragment == nil {
		// "Binary files differ": usable only when the repository has
		// the post-image already.
		if !plumbing.IsHash(f.NewOIDPrefix) {
			return nil, p.fail(name, 0, "", "binary patch without data")
		}
		if f.IsDelete {
			return nil, nil
		}
		b, err := p.objs.readBlob(plumbing.NewHash(f.NewOIDPrefix))
		if err != nil {
			return nil, p.fail(name, 0, "", "binary patch without data, and %s is not in the repository", f.NewOIDPrefix)
		}
		dst = b
	} else {
		if f.BinaryFragment.Size > p.opts.MaxBlobSize {
			return nil, p.refuse(name, "binary data of %d bytes, over the %d byte limit", f.BinaryFragment.Size, p.opts.MaxBlobSize)
		}
		var out bytes.Buffer
		a := gitdiff.NewBinaryApplier(&out, bytes.NewReader(src), gitdiff.WithMaxBinaryFragmentBytes(p.opts.MaxBlobSize))
		if err := a.ApplyFragment(f.BinaryFragment); err != nil {
			return nil, p.fail(name, 0, "", "binary patch: %v", err)
		}
		if err := a.Close(); err != nil {
			return nil, p.fail(name, 0, "", "binary patch: %v", err)
		}
		dst = out.Bytes()
	}
	if plumbing.IsHash(f.NewOIDPrefix) && !f.IsDelete {
		if got := objectHash(plumbing.BlobObject, dst); got.String() != f.NewOIDPrefix {
			return nil, p.fail(name, 0, "", "binary patch makes %s, expected %s", got, f.NewOIDPrefix)
		}
	}
	return dst, nil
}
