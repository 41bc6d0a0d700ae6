// Package safefile reads and copies files a hostile program may have
// written (a kernel build's output tree) without following anything it
// planted there: every path is opened one component at a time from "/"
// (or the working directory) with O_NOFOLLOW, so a symlink anywhere in
// it is an error; only regular files are read, and a FIFO is never
// blocked on. It is the one hardened file copy and tree copy.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrNotRegular is a path a program made something other than a plain
// file: a symlink, FIFO, device or directory.
var ErrNotRegular = errors.New("not a regular file")

// OpenDirNoFollow opens the directory dir, refusing a symlink in any
// component (a relative dir starts at the working directory).
func OpenDirNoFollow(dir string) (int, error) {
	start := "."
	if filepath.IsAbs(dir) {
		start = "/"
	}
	fd, err := syscall.Open(start, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(filepath.Clean(dir), "/") {
		if c == "" || c == "." {
			continue
		}
		next, err := syscall.Openat(fd, c, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		syscall.Close(fd)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: dir, Err: err}
		}
		fd = next
	}
	return fd, nil
}

// OpenRegular opens name for reading when it is a regular file of at
// most max bytes (no bound when max < 0), with no symlink in any
// component of its path.
func OpenRegular(name string, max int64) (*os.File, os.FileInfo, error) {
	dfd, err := OpenDirNoFollow(filepath.Dir(name))
	if err != nil {
		return nil, nil, err
	}
	defer syscall.Close(dfd)
	fd, err := syscall.Openat(dfd, filepath.Base(name), syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if err == syscall.ELOOP {
			err = ErrNotRegular
		}
		return nil, nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &os.PathError{Op: "open", Path: name, Err: ErrNotRegular}
	}
	if max >= 0 && fi.Size() > max {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %d bytes, more than the %d allowed", name, fi.Size(), max)
	}
	return f, fi, nil
}

// CopyFile copies the regular file src (see OpenRegular) of at most max
// bytes (no bound when max < 0) to the new file dst, with src's
// permissions, and says how many bytes it copied.
func CopyFile(src, dst string, max int64) (int64, error) {
	in, fi, err := OpenRegular(src, max)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return 0, err
	}
	var r io.Reader = in
	if max >= 0 {
		r = io.LimitReader(in, max) // it may grow after the check
	}
	n, err := io.Copy(out, r)
	if err != nil {
		out.Close()
		return n, err
	}
	return n, out.Close()
}

// CopyTree copies a regular file, or a directory with its regular files,
// directories and local symlinks, to the new dst: each file at most
// maxFile bytes, all at most maxTotal (no bound when negative). Nothing
// is followed: a symlink where a file is named, or in the path leading
// to it, is an error, as is a FIFO or device anywhere; a symlink inside
// a directory is kept only when its target is relative and stays inside
// (lib/modules' absolute build and source links are dropped), so no
// copied tree points out of itself.
func CopyTree(src, dst string, maxFile, maxTotal int64) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		_, err := CopyFile(src, dst, maxFile)
		return err
	}
	var total int64
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if !filepath.IsLocal(t) {
				return nil
			}
			return os.Symlink(t, to)
		default:
			max := maxFile
			if maxTotal >= 0 && (max < 0 || maxTotal-total < max) {
				max = maxTotal - total
			}
			n, err := CopyFile(p, to, max)
			total += n
			return err
		}
	})
}
