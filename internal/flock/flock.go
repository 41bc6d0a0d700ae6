// Package flock takes advisory locks on files: the heavy-work lock the
// builder and the lab share, the kbuild slot and output tree locks, and
// the locks that tell a store's temporary directory whose maker crashed
// from one still being written. It is the one implementation all use,
// since builder may not import lab.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Exclusive takes an exclusive flock on path ("" = no lock), waiting
// while ctx allows. The wait is a blocking flock in a goroutine, so the
// kernel queues us with the other waiters instead of whoever polls first
// winning; if ctx ends first the goroutine gives the lock back as soon as
// it gets it. The error carries context.Cause(ctx), so a build timeout
// says it was one.
func Exclusive(ctx context.Context, path string) (release func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	// flock needs no write access: a lock file another user made (root,
	// before serve ran as its own user) still locks when opened to read.
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	}
	if err != nil {
		return nil, err
	}
	got := make(chan error, 1)
	go func() { got <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return func() { f.Close() }, nil
	case <-ctx.Done():
		go func() {
			<-got
			f.Close()
		}()
		return nil, fmt.Errorf("waiting for %s: %w", path, context.Cause(ctx))
	}
}

// TryShared takes a shared flock on path without waiting: ok is false
// when someone holds it exclusive. Readers of a directory take it shared
// around a copy; its writer holds it exclusive (Exclusive) while writing.
func TryShared(path string) (release func(), ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	}
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, true, nil
}
