package kbuild

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/rdmabot/rdmabot/internal/safefile"
)

// The host reads and writes files in directories the sandboxed build
// could write (the output and configuration trees). It never follows a
// symlink there and never blocks on a FIFO: every path is opened one
// component at a time from "/" with O_NOFOLLOW, so a symlink anywhere in
// it is an error, and only regular files are read. New() resolves the
// builder's own directory once, so the host paths leading to it contain
// no symlinks either.

// readRegular reads a regular file of at most max bytes (see
// safefile.OpenRegular).
func readRegular(name string, max int64) ([]byte, error) {
	f, _, err := safefile.OpenRegular(name, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The size was checked, but the file may grow: read at most max+1.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: more than the %d bytes allowed", name, max)
	}
	return b, nil
}

// createNew makes name a new, empty regular file: whatever was at that
// name (a planted symlink included) is unlinked first, and the file is
// created with O_EXCL|O_NOFOLLOW, so nothing is followed.
func createNew(name string, perm os.FileMode) (*os.File, error) {
	dfd, err := safefile.OpenDirNoFollow(filepath.Dir(name))
	if err != nil {
		return nil, err
	}
	defer syscall.Close(dfd)
	base := filepath.Base(name)
	if err := syscall.Unlinkat(dfd, base); err != nil && err != syscall.ENOENT {
		if err == syscall.EISDIR || err == syscall.EPERM {
			err = fmt.Errorf("a directory is in the way: %w", err)
		}
		return nil, &os.PathError{Op: "unlink", Path: name, Err: err}
	}
	fd, err := syscall.Openat(dfd, base, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	if err := f.Chmod(perm.Perm()); err != nil { // the umask must not decide the mode
		f.Close()
		return nil, err
	}
	return f, nil
}

// writeNewFile replaces name by a new file holding data (see createNew).
func writeNewFile(name string, data []byte, perm os.FileMode) error {
	f, err := createNew(name, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeFileAtomic replaces name by data through a rename, so readers see
// the old content or the new, never a torn file. Neither the temporary
// nor name is followed if it is a symlink: the temporary is created anew
// and the rename replaces the directory entry.
func writeFileAtomic(name string, data []byte) error {
	tmp := name + ".tmp"
	if err := writeNewFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// resetDir makes dir an empty directory, removing whatever was there
// (RemoveAll does not follow symlinks).
func resetDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}
