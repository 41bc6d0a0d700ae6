package bundle

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Cache keeps bundles as gzipped tars in a directory, each made once for
// what it holds and served as a file from then on: gzipping one (its
// rdmabot binary above all, 46 MB) costs seconds of CPU, which a
// download must not cost again. One archive is made at a time.
type Cache struct {
	dir  string
	keep int
	// sem is held while an archive is looked up or made.
	sem chan struct{}
}

// DefaultKeep is how many archives a Cache keeps when not told.
const DefaultKeep = 16

// NewCache keeps at most keep archives (DefaultKeep when keep <= 0) in
// dir, the least recently served going first.
func NewCache(dir string, keep int) *Cache {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Cache{dir: dir, keep: keep, sem: make(chan struct{}, 1)}
}

// Open returns b's archive open for reading, made now (dated now) unless
// one of the same bundle is kept: the same directory name and files, the
// files read from a path unchanged since (size, time, inode).
func (c *Cache) Open(ctx context.Context, b *Bundle, now time.Time) (*os.File, error) {
	key, err := b.key()
	if err != nil {
		return nil, err
	}
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	path := filepath.Join(c.dir, b.Dir+"-"+key+".tar.gz")
	if f, err := os.Open(path); err == nil {
		os.Chtimes(path, now, now) // served: kept longer
		return f, nil
	}
	if err := c.write(b, path, now); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	c.prune(path)
	return f, nil
}

// write makes b's archive at path, whole or not at all.
func (c *Cache) write(b *Bundle, path string, now time.Time) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	tmp, err := os.CreateTemp(c.dir, ".part-*")
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 1<<20)
	err = b.WriteTarGz(w, now)
	if err == nil {
		err = w.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(tmp.Name(), now, now)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("bundle: %s: %w", b.Dir, err)
	}
	return nil
}

// prune removes all but the keep most recently served archives, just
// among them, and what a write cut short left (none is under way: c.sem
// is held). A reader that has one open reads it to its end.
func (c *Cache) prune(just string) {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type kept struct {
		path string
		at   time.Time
	}
	var all []kept
	for _, e := range ents {
		p := filepath.Join(c.dir, e.Name())
		if strings.HasPrefix(e.Name(), ".part-") {
			os.Remove(p)
			continue
		}
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".tar.gz") && e.Type().IsRegular() {
			all = append(all, kept{p, info.ModTime()})
		}
	}
	slices.SortFunc(all, func(a, b kept) int { return b.at.Compare(a.at) })
	others := 0
	for _, k := range all {
		if k.path == just {
			continue
		}
		if others++; others >= c.keep {
			os.Remove(k.path)
		}
	}
}

// inode is a file's inode number (0 where there is none): a file
// replaced in place within the clock's resolution is another file.
func inode(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ino
	}
	return 0
}

// key names what b's archive holds: its directory, each file's name and
// mode, and its bytes or, for a file read from a path, that path as it
// is now.
func (b *Bundle) key() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", b.Dir)
	for _, f := range b.Files {
		fmt.Fprintf(h, "%q %o ", f.Name, f.Mode)
		if f.Path == "" {
			fmt.Fprintf(h, "data %d\n", len(f.Data))
			h.Write(f.Data)
			continue
		}
		st, err := os.Stat(f.Path)
		if err != nil {
			return "", fmt.Errorf("bundle: %s: %w", f.Name, err)
		}
		fmt.Fprintf(h, "path %q %d %d %v\n", f.Path, st.Size(), st.ModTime().UnixNano(), inode(st))
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}
