// Package artifact keeps built kernels where lab workers can get them.
//
// Every worker has a local directory store. On one machine that is all:
// the lab job finds the build job's directory. With several machines the
// build worker records in the database which worker holds an artifact
// (its advertised URL), and serves it at GET /artifacts/<key>.tar; a lab
// worker missing an artifact pulls that tar once into its own store. No
// shared filesystem or bucket is needed, and a pulled artifact is cached.
package artifact

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/rdmabot/rdmabot/internal/flock"
	"github.com/rdmabot/rdmabot/internal/safefile"
)

// validKey keeps keys to one path element.
var validKey = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$`)

// Dir is a local artifact store: one directory per key.
type Dir struct{ Root string }

// Path is where key lives, whether or not it is there.
func (d Dir) Path(key string) string { return filepath.Join(d.Root, key) }

// Has reports whether key is stored.
func (d Dir) Has(key string) bool {
	st, err := os.Stat(d.Path(key))
	return err == nil && st.IsDir()
}

// Put stores a copy of src under key (hard links when possible). The
// copy appears atomically: a crash leaves no half artifact under key,
// nor does a cancelled ctx, which stops the copy between files.
func (d Dir) Put(ctx context.Context, key, src string) error {
	if !validKey.MatchString(key) {
		return fmt.Errorf("artifact: bad key %q", key)
	}
	if d.Has(key) {
		return nil
	}
	tmp, release, err := d.temp(key)
	if err != nil {
		return err
	}
	defer release()
	defer os.RemoveAll(tmp)
	err = filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(tmp, rel)
		switch {
		case e.IsDir():
			return os.MkdirAll(dst, 0o755)
		case e.Type().IsRegular():
			if os.Link(p, dst) == nil {
				return nil
			}
			_, err := safefile.CopyFile(p, dst, -1)
			return err
		}
		return nil // sockets, symlinks: not part of a kernel artifact
	})
	if err != nil {
		return fmt.Errorf("artifact: put %s: %w", key, err)
	}
	return d.commit(tmp, key)
}

// Touch records a use of key at now in its directory's modification
// time, which nothing else changes once the artifact is in place (a
// file's access time is not kept on most mounts). Prune removes the
// least recently used first; Put and Pull count as a use.
func (d Dir) Touch(key string, now time.Time) error {
	if !validKey.MatchString(key) {
		return fmt.Errorf("artifact: bad key %q", key)
	}
	return os.Chtimes(d.Path(key), now, now)
}

// Stored is an artifact as Prune weighs it.
type Stored struct {
	Key  string
	Size int64     // bytes allocated to its files and directories
	Used time.Time // its last use (Touch, Put, Pull)
}

// List returns the artifacts in place, least recently used first.
// Those being written or removed (hidden names) are not listed.
func (d Dir) List() ([]Stored, error) {
	ents, err := os.ReadDir(d.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	var out []Stored
	for _, e := range ents {
		if !e.IsDir() || !validKey.MatchString(e.Name()) {
			continue
		}
		st, err := os.Lstat(d.Path(e.Name()))
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, Stored{Key: e.Name(), Size: allocated(d.Path(e.Name())), Used: st.ModTime()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Used.Before(out[j].Used) })
	return out, nil
}

// allocated is what dir takes on disk: its entries' blocks, as du
// counts them (a sparse file counts what it uses).
func allocated(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := e.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// Prune removes the least recently used artifacts until the store holds
// at most max bytes, skipping those keep holds on to. Each is first
// renamed out of place, so that Has never sees half of one and two
// Prunes never remove one twice, and one used since it was listed is
// kept; gone is told its key and new directory before it is deleted
// (to drop what shares its files elsewhere). Prune returns the keys it
// removed and the bytes left, which stay above max when keep holds on
// to more. An error of gone stops it, the artifact already removed.
func (d Dir) Prune(ctx context.Context, max int64, keep func(Stored) bool, gone func(key, dir string) error) (removed []string, left int64, err error) {
	// What a crash left is finished first; should that fail (a directory
	// another user made), the prune goes on and says so at the end.
	crashErr := d.finishCrashed(gone)
	defer func() { err = errors.Join(err, crashErr) }()
	all, err := d.List()
	if err != nil {
		return nil, 0, err
	}
	for _, s := range all {
		left += s.Size
	}
	for _, s := range all {
		if left <= max {
			break
		}
		if err := ctx.Err(); err != nil {
			return removed, left, err
		}
		if keep(s) {
			continue
		}
		if st, err := os.Lstat(d.Path(s.Key)); err != nil || !st.ModTime().Equal(s.Used) {
			continue // used or removed since it was listed
		}
		tmp, release, err := flock.TempDir(d.Root, ".gone-"+s.Key+"-")
		if err != nil {
			return removed, left, fmt.Errorf("artifact: %w", err)
		}
		dir := filepath.Join(tmp, s.Key)
		if err := os.Rename(d.Path(s.Key), dir); err != nil {
			os.Remove(tmp)
			release()
			if errors.Is(err, fs.ErrNotExist) {
				continue // another Prune took it
			}
			return removed, left, fmt.Errorf("artifact: %w", err)
		}
		removed, left = append(removed, s.Key), left-s.Size
		err = gone(s.Key, dir)
		if rerr := os.RemoveAll(tmp); err == nil && rerr != nil {
			err = fmt.Errorf("artifact: %w", rerr)
		}
		release()
		if err != nil {
			return removed, left, err
		}
	}
	return removed, left, nil
}

// finishCrashed completes what a Put, Pull or Prune killed midway left:
// a half-written copy is removed, and a kernel a Prune had moved out of
// place is told to gone (its store copy would stay forever otherwise)
// and removed. As in Prune, an error of gone is returned, the kernel
// removed all the same.
func (d Dir) finishCrashed(gone func(key, dir string) error) error {
	now := time.Now()
	if err := flock.Stale(d.Root, ".tmp-", now, os.RemoveAll); err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	return flock.Stale(d.Root, ".gone-", now, func(tmp string) error {
		ents, err := os.ReadDir(tmp)
		if err != nil {
			return fmt.Errorf("artifact: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() && validKey.MatchString(e.Name()) && err == nil {
				err = gone(e.Name(), filepath.Join(tmp, e.Name()))
			}
		}
		if rerr := os.RemoveAll(tmp); err == nil && rerr != nil {
			err = fmt.Errorf("artifact: %w", rerr)
		}
		return err
	})
}

// temp makes a directory to write key's copy in, locked until release:
// Prune removes it only once its writer is gone.
func (d Dir) temp(key string) (string, func(), error) {
	if err := os.MkdirAll(d.Root, 0o755); err != nil {
		return "", nil, fmt.Errorf("artifact: %w", err)
	}
	tmp, release, err := flock.TempDir(d.Root, ".tmp-"+key+"-")
	if err != nil {
		return "", nil, fmt.Errorf("artifact: %w", err)
	}
	return tmp, release, nil
}

func (d Dir) commit(tmp, key string) error {
	if err := os.Rename(tmp, d.Path(key)); err != nil {
		if d.Has(key) { // another job stored it first
			return nil
		}
		return fmt.Errorf("artifact: %w", err)
	}
	return nil
}

// ServeHTTP answers GET /artifacts/<key>.tar with the artifact as a tar.
func (d Dir) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimSuffix(filepath.Base(r.URL.Path), ".tar")
	if !validKey.MatchString(key) || !d.Has(key) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	tw := tar.NewWriter(w)
	root := d.Path(key)
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := e.Info()
		if err != nil {
			return err
		}
		if !e.IsDir() && !e.Type().IsRegular() {
			return nil
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		// Headers are gone; a truncated tar fails the puller's checks.
		panic(http.ErrAbortHandler)
	}
}

// Pull fetches key from the worker at baseURL into the store, unless it
// is already here, and returns its local path.
func (d Dir) Pull(ctx context.Context, client *http.Client, baseURL, key string) (string, error) {
	if d.Has(key) {
		return d.Path(key), nil
	}
	if !validKey.MatchString(key) {
		return "", fmt.Errorf("artifact: bad key %q", key)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(baseURL, "/")+"/artifacts/"+key+".tar", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("artifact: pull %s: %w", key, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("artifact: pull %s from %s: %s", key, baseURL, resp.Status)
	}
	tmp, release, err := d.temp(key)
	if err != nil {
		return "", err
	}
	defer release()
	defer os.RemoveAll(tmp)
	tr := tar.NewReader(resp.Body)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("artifact: pull %s: %w", key, err)
		}
		name := filepath.FromSlash(h.Name)
		if !filepath.IsLocal(name) {
			return "", fmt.Errorf("artifact: pull %s: bad entry %q", key, h.Name)
		}
		dst := filepath.Join(tmp, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return "", err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return "", err
			}
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, fs.FileMode(h.Mode).Perm())
			if err != nil {
				return "", err
			}
			n, err := io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil || n != h.Size {
				return "", fmt.Errorf("artifact: pull %s: %s truncated: %v", key, h.Name, err)
			}
		}
	}
	if err := d.commit(tmp, key); err != nil {
		return "", err
	}
	return d.Path(key), nil
}
