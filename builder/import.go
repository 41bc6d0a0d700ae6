package builder

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Imported describes the commit a tarball import made.
type Imported struct {
	Commit  plumbing.Hash
	Tree    plumbing.Hash
	Ref     plumbing.ReferenceName // refs/trees/<name>/import
	Tag     plumbing.ReferenceName // refs/tags/<name>/v<version>, when the Makefile names one
	Version string                 // from the top-level Makefile, e.g. 6.12.117
	Files   int
}

// ImportTarball makes one commit holding the tarball's files (its single
// top-level directory stripped, modes and symlinks kept, nothing ignored:
// Debian's linux-source tarball ships a .gitignore that ignores
// everything) and points refs/trees/<name>/import and a version tag at it.
// The objects go into one new pack; the commit date is the newest file
// time in the tarball, so the same tarball always gives the same commit.
func (s *Store) ImportTarball(ctx context.Context, tarball, name string, id Identity) (*Imported, error) {
	if err := checkRefComponent(name); err != nil {
		return nil, fmt.Errorf("tree name: %w", err)
	}
	rd, wait, err := openTarball(ctx, tarball)
	if err != nil {
		return nil, err
	}
	pw, err := newPackWriter(filepath.Join(s.Dir, "objects"))
	if err != nil {
		rd.Close()
		wait()
		return nil, err
	}
	defer pw.Abort()
	files, newest, makefile, err := packTarball(ctx, tar.NewReader(rd), pw)
	if err == nil {
		// tar stops at its end-of-archive blocks; the padding after them
		// is read too, or xz is killed writing it (EPIPE) and its check
		// of the whole stream never runs.
		if _, cerr := io.Copy(io.Discard, rd); cerr != nil {
			err = fmt.Errorf("reading past the archive's end: %w", cerr)
		}
	}
	rd.Close()
	if werr := wait(); err == nil && werr != nil {
		err = fmt.Errorf("decompress %s: %w", tarball, werr)
	}
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", tarball, err)
	}
	root := newDirNode()
	for p, e := range files {
		if err := root.insert(p, e); err != nil {
			return nil, fmt.Errorf("import %s: %w", tarball, err)
		}
	}
	tree, ok, err := root.writeTrees(pw.Add)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("import %s: no files", tarball)
	}
	version := kernelVersion(makefile)
	msg := fmt.Sprintf("Import %s\n", filepath.Base(tarball))
	if version != "" {
		msg = fmt.Sprintf("Linux %s, imported from %s\n", version, filepath.Base(tarball))
	}
	sig := object.Signature{Name: id.Name, Email: id.Email, When: newest}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: tree}
	raw, err := encodeCommit(c)
	if err != nil {
		return nil, err
	}
	commit, err := pw.Add(plumbing.CommitObject, raw)
	if err != nil {
		return nil, err
	}
	if err := pw.Finish(); err != nil {
		return nil, err
	}
	// go-git lists packs when the repository is opened.
	if err := s.reopen(); err != nil {
		return nil, err
	}
	out := &Imported{Commit: commit, Tree: tree, Ref: TreeRef(name, ImportBranch), Version: version, Files: len(files)}
	if err := s.Repository().Storer.SetReference(plumbing.NewHashReference(out.Ref, commit)); err != nil {
		return nil, err
	}
	if version != "" {
		out.Tag = plumbing.ReferenceName("refs/tags/" + name + "/v" + version)
		if err := s.Repository().Storer.SetReference(plumbing.NewHashReference(out.Tag, commit)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// openTarball returns the uncompressed tar stream. xz is decompressed by
// the xz program, which is several times faster than a Go decoder and
// runs on the other core while this process hashes and compresses.
func openTarball(ctx context.Context, tarball string) (io.ReadCloser, func() error, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return nil, nil, err
	}
	none := func() error { return nil }
	switch {
	case strings.HasSuffix(tarball, ".tar.xz") || strings.HasSuffix(tarball, ".txz"):
		cmd := exec.CommandContext(ctx, "xz", "-dc")
		cmd.Stdin = f
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		if err := cmd.Start(); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("xz: %w", err)
		}
		return out, func() error {
			err := cmd.Wait()
			f.Close()
			if err != nil {
				return fmt.Errorf("xz: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
			}
			return nil
		}, nil
	case strings.HasSuffix(tarball, ".tar.gz") || strings.HasSuffix(tarball, ".tgz"):
		zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return readCloser{zr, f}, none, nil
	case strings.HasSuffix(tarball, ".tar"):
		return f, none, nil
	}
	f.Close()
	return nil, nil, fmt.Errorf("%s: not a .tar, .tar.gz or .tar.xz", tarball)
}

type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

type tarFile struct {
	path    string
	mode    filemode.FileMode
	content []byte
}

type packedFile struct {
	path  string
	entry object.TreeEntry
	size  int64
	z     []byte
}

// packTarball reads every file of the tarball into pw: one goroutine
// reads the tar, workers hash and compress, the caller's goroutine
// appends to the pack. It returns path -> entry with the top-level
// directory stripped.
func packTarball(ctx context.Context, tr *tar.Reader, pw *packWriter) (map[string]object.TreeEntry, time.Time, []byte, error) {
	todo := make(chan tarFile, 64)
	done := make(chan packedFile, 64)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var readErr error
	var newest time.Time
	var makefile []byte
	go func() {
		defer close(todo)
		readErr = readTar(ctx, tr, todo, &newest, &makefile)
	}()
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var zbuf bytes.Buffer
			zw, _ := zlib.NewWriterLevel(&zbuf, zlib.BestSpeed)
			for f := range todo {
				zbuf.Reset()
				zw.Reset(&zbuf)
				zw.Write(f.content)
				zw.Close()
				id := objectHash(plumbing.BlobObject, f.content)
				pf := packedFile{
					path:  f.path,
					entry: object.TreeEntry{Name: path.Base(f.path), Mode: f.mode, Hash: id},
					size:  int64(len(f.content)),
					z:     bytes.Clone(zbuf.Bytes()),
				}
				select {
				case done <- pf:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()

	files := map[string]object.TreeEntry{}
	var writeErr error
	for pf := range done {
		if writeErr != nil {
			continue
		}
		if _, dup := files[pf.path]; dup {
			writeErr = fmt.Errorf("%s twice in the tarball", pf.path)
			cancel()
			continue
		}
		files[pf.path] = pf.entry
		if err := pw.AddCompressed(pf.entry.Hash, plumbing.BlobObject, pf.size, pf.z); err != nil {
			writeErr = err
			cancel()
		}
	}
	// done is closed only after the reader finished: readErr is settled.
	if err := errors.Join(writeErr, readErr); err != nil {
		return nil, time.Time{}, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, time.Time{}, nil, err
	}
	return files, newest, makefile, nil
}

func readTar(ctx context.Context, tr *tar.Reader, todo chan<- tarFile, newest *time.Time, makefile *[]byte) error {
	top := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.ModTime.After(*newest) {
			*newest = h.ModTime
		}
		name := strings.TrimPrefix(h.Name, "./")
		first, rest, _ := strings.Cut(name, "/")
		if top == "" {
			top = first
		}
		if first != top {
			return fmt.Errorf("%s: outside the top-level directory %s/", h.Name, top)
		}
		rest = strings.TrimSuffix(rest, "/")
		var f tarFile
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
			f.mode = gitFileMode(h.Mode, false)
			f.content = make([]byte, h.Size)
			if _, err := io.ReadFull(tr, f.content); err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			f.mode = filemode.Symlink
			f.content = []byte(h.Linkname)
		default:
			// Hard links, devices and fifos have no place in a kernel tree.
			return fmt.Errorf("%s: unsupported tar entry type %q", h.Name, h.Typeflag)
		}
		if err := checkTreePath(rest); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		f.path = rest
		if rest == "Makefile" {
			*makefile = f.content
		}
		select {
		case todo <- f:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// insert adds a file entry at slash-separated path p.
func (n *dirNode) insert(p string, e object.TreeEntry) error {
	dir, base := path.Split(p)
	for _, part := range strings.Split(strings.TrimSuffix(dir, "/"), "/") {
		if part == "" {
			continue
		}
		if _, clash := n.files[part]; clash {
			return fmt.Errorf("%s: %s is a file", p, part)
		}
		d, ok := n.dirs[part]
		if !ok {
			d = newDirNode()
			n.dirs[part] = d
		}
		n = d
	}
	if _, clash := n.dirs[base]; clash {
		return fmt.Errorf("%s is a directory", p)
	}
	e.Name = base
	n.files[base] = e
	return nil
}

var makefileVar = regexp.MustCompile(`(?m)^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION) *= *(\S*)`)

// kernelVersion reads "6.12.117" from the top-level Makefile.
func kernelVersion(makefile []byte) string {
	v := map[string]string{}
	for _, m := range makefileVar.FindAllSubmatch(makefile, -1) {
		if _, seen := v[string(m[1])]; !seen {
			v[string(m[1])] = string(m[2])
		}
	}
	if v["VERSION"] == "" || v["PATCHLEVEL"] == "" {
		return ""
	}
	s := v["VERSION"] + "." + v["PATCHLEVEL"]
	if v["SUBLEVEL"] != "" && v["SUBLEVEL"] != "0" {
		s += "." + v["SUBLEVEL"]
	}
	return s + v["EXTRAVERSION"]
}

// encodeCommit serialises c as git does.
func encodeCommit(c *object.Commit) ([]byte, error) {
	o := &plumbing.MemoryObject{}
	if err := c.Encode(o); err != nil {
		return nil, err
	}
	rd, err := o.Reader()
	if err != nil {
		return nil, err
	}
	return io.ReadAll(rd)
}

// Refresh re-reads the store, for a tree that is updated outside the bot
// (an operator's git fetch or push into a tree without a URL): go-git
// lists the packs once and would not see new ones. A cancelled ctx
// refreshes nothing.
func (s *Store) Refresh(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("refresh %s: %w", s.Dir, err)
	}
	return s.reopen()
}

// reopen re-reads the repository so go-git sees packs written behind its
// back.
func (s *Store) reopen() error {
	r, err := git.PlainOpen(s.Dir)
	if err != nil {
		return fmt.Errorf("reopen %s: %w", s.Dir, err)
	}
	s.mu.Lock()
	s.repo = r
	s.mu.Unlock()
	return nil
}
