package flock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// staleAfter is how old a temporary directory with a free lock must be
// before Stale names it: its maker locks it right after making it, and
// this covers the moment between.
const staleAfter = time.Minute

// TempDir makes a new directory in parent, named prefix and a random
// tail, and holds a lock on it until release. Stale never names a
// directory whose maker still runs; a maker that crashed leaves its lock
// free, and the directory is Stale's to clean. A rename keeps the lock.
func TempDir(parent, prefix string) (dir string, release func(), err error) {
	dir, err = os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", nil, err
	}
	release, ok, err := tryLock(dir)
	if err != nil || !ok {
		os.Remove(dir)
		if err == nil {
			err = fmt.Errorf("lock %s: held by another process at birth", dir)
		}
		return "", nil, err
	}
	return dir, release, nil
}

// Stale calls clean, with the directory's lock held, for each directory
// in parent whose name starts with prefix and whose maker is gone (its
// lock is free and it is older than a minute at now). It returns
// clean's first error, after trying the others.
func Stale(parent, prefix string, now time.Time, clean func(dir string) error) error {
	ents, err := os.ReadDir(parent)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var first error
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if fi, err := e.Info(); err != nil || now.Sub(fi.ModTime()) < staleAfter {
			continue
		}
		release, ok, err := tryLock(dir)
		if err != nil || !ok {
			continue // gone meanwhile, or its maker still runs
		}
		if err := clean(dir); err != nil && first == nil {
			first = err
		}
		release()
	}
	return first
}

// tryLock takes dir's lock if no one holds it.
func tryLock(dir string) (release func(), ok bool, err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, true, nil
}
