package wire

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// checkSandboxReads refuses to start a lab where QEMU could not read its
// kernels and images. QEMU runs under bwrap with no capabilities, so
// even as root it reads a file another user owns only through its
// "other" permission bits: a cache made by scripts/run.sh (the rdmabot
// user, 0700 folders) and a serve started as root made every lab job
// INFRA with bwrap's "Permission denied", retried for an hour. Said at
// start instead, with the fix. The folders and their children are
// looked at (an artifact's own folder), not every file; a group serve
// is in (gids) reads through the group's bits.
func checkSandboxReads(uid int, gids []int, dirs ...string) error {
	for _, dir := range dirs {
		err := walkDepth(dir, 2, func(p string, fi fs.FileInfo) error {
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok || int(st.Uid) == uid {
				return nil
			}
			need := fs.FileMode(0o004)
			if fi.IsDir() {
				need = 0o005
			}
			if slices.Contains(gids, int(st.Gid)) {
				need <<= 3
			}
			if fi.Mode().Perm()&need == need {
				return nil
			}
			return fmt.Errorf("%s belongs to uid %d (mode %04o), and serve runs as uid %d: QEMU's sandbox has no capabilities and cannot read it. "+
				"Start serve as uid %d (scripts/run.sh runs it as the rdmabot user), or give the cache to uid %d (chown -R %d %s)",
				p, st.Uid, fi.Mode().Perm(), uid, st.Uid, uid, uid, dir)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// walkDepth calls f for dir and what is below it, depth levels deep; a
// dir that does not exist yet is nothing to check.
func walkDepth(dir string, depth int, f func(string, fs.FileInfo) error) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	if err := f(dir, fi); err != nil || !fi.IsDir() || depth == 0 {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	for _, e := range ents {
		if err := walkDepth(filepath.Join(dir, e.Name()), depth-1, f); err != nil {
			return err
		}
	}
	return nil
}
