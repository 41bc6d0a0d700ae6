package kbuild

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rdmabot/rdmabot/internal/cgroup"
)

// Limits bound what one sandboxed run may use. Zero fields take the
// defaults (DefaultLimits); a negative one means no limit.
type Limits struct {
	// Memory is the memory cgroup limit of the whole run, in bytes.
	Memory int64
	// Tasks is the cgroup's process and thread limit.
	Tasks int64
	// CPUs caps the run's CPU bandwidth (cgroup cpu quota), in CPUs.
	CPUs int
	// Tmp is the size of the sandbox's /tmp tmpfs, in bytes.
	Tmp int64
	// FileSize is the largest file a process may write (RLIMIT_FSIZE).
	FileSize int64
	// Disk caps an untrusted build's own directory (its copy of the
	// output tree and what it writes), in bytes, checked every few
	// seconds from the host.
	Disk int64
	// Files caps how many files and directories that directory holds:
	// inodes, which a build can use up without using blocks.
	Files int64
	// Log caps the build log the host keeps, in bytes.
	Log int64
}

// DefaultLimits fit a kernel build with -j of a few CPUs.
var DefaultLimits = Limits{
	Memory:   16 << 30,
	Tasks:    4096,
	Tmp:      2 << 30,
	FileSize: 4 << 30,
	Disk:     32 << 30,
	Files:    200_000, // the lab kernel's output tree holds about 5,000
	Log:      64 << 20,
}

// cgroupLimits is the part of l a cgroup holds. Where the bot may not make
// one, the run goes without it (serve says so at start, cgroup.Check);
// Tmp, FileSize, Disk and Log still hold.
func (l Limits) cgroupLimits() cgroup.Limits {
	return cgroup.Limits{Memory: l.Memory, Tasks: l.Tasks, CPUs: l.CPUs}
}

func (l Limits) withDefaults(jobs int) Limits {
	d := DefaultLimits
	d.CPUs = jobs
	for _, f := range []struct{ v, def *int64 }{{&l.Memory, &d.Memory}, {&l.Tasks, &d.Tasks}, {&l.Tmp, &d.Tmp},
		{&l.FileSize, &d.FileSize}, {&l.Disk, &d.Disk}, {&l.Files, &d.Files}, {&l.Log, &d.Log}} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if l.CPUs == 0 {
		l.CPUs = d.CPUs
	}
	return l
}

// diskUsage sums the blocks allocated under dir (sparse files count what
// they use) and counts its entries, without following symlinks.
func diskUsage(dir string) (bytes, files int64) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		files++
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				bytes += st.Blocks * 512
			}
		}
		return nil
	})
	return bytes, files
}

// diskLimitError ends an untrusted build that wrote more than its limit
// of bytes or of files.
type diskLimitError struct{ Limit, Files int64 }

func (e *diskLimitError) Error() string {
	if e.Files > 0 {
		return fmt.Sprintf("the build made more than its limit of %d files", e.Files)
	}
	return fmt.Sprintf("the build wrote more than its %d MiB disk limit", e.Limit>>20)
}

// overDisk says which limit dir is past, if any (nil: neither).
func overDisk(dir string, limit, files int64) *diskLimitError {
	b, n := diskUsage(dir)
	switch {
	case limit > 0 && b > limit:
		return &diskLimitError{Limit: limit}
	case files > 0 && n > files:
		return &diskLimitError{Files: files}
	}
	return nil
}

// watchDisk cancels ctx when dir grows past limit bytes or files; it
// returns when ctx ends.
func watchDisk(ctx context.Context, dir string, limit, files int64, cancel context.CancelCauseFunc, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if e := overDisk(dir, limit, files); e != nil {
				cancel(e)
				return
			}
		}
	}
}

// hostDiskLow says whether the file system holding dir is nearly full:
// the host's fact, unlike a "No space left" a build can print.
func hostDiskLow(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	free := int64(st.Bavail) * st.Bsize
	total := int64(st.Blocks) * st.Bsize
	return free < 1<<30 || free < total/50
}

// limitedLog passes the first max bytes to the log file and drops the
// rest, saying so once: a build cannot fill the host's disk by printing.
type limitedLog struct {
	f       *os.File
	max, n  int64
	dropped bool
}

func (l *limitedLog) Write(p []byte) (int, error) {
	if l.n >= l.max {
		if !l.dropped {
			l.dropped = true
			fmt.Fprintf(l.f, "\nrdmabot: build log truncated at %d bytes\n", l.max)
		}
		return len(p), nil
	}
	q := p
	if int64(len(q)) > l.max-l.n {
		q = q[:l.max-l.n]
	}
	n, err := l.f.Write(q)
	l.n += int64(n)
	if err != nil {
		return n, err
	}
	return len(p), nil
}
