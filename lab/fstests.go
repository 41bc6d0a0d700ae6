package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmabot/rdmabot/internal/cfgtype"
)

// FstestsConfig is the fstests profile (lab.fstests): fstests' `./check
// -nfs` on the client guest against two exports of the server guest,
// over NFS/RDMA, for series that touch the chunk and READ/WRITE paths.
type FstestsConfig struct {
	// Source is where fstests comes from: a git URL, a local clone, a
	// plain directory or a tarball (.tar.gz, .tar.xz, .tgz). A relative
	// path is relative to the directory of the config file.
	Source string `toml:"source"`
	// Commit pins the source: checked out of a git source, a label of
	// a directory or tarball. It keys the build cache with Source.
	Commit string `toml:"commit"`
	// Providers are the soft RDMA devices the boots run on, in turn;
	// empty turns the profile off.
	Providers []string `toml:"providers"`
	// Boots per provider and side.
	Boots int `toml:"boots"`
	// NFSVersions are used in turn, boot by boot.
	NFSVersions []string `toml:"nfs_versions"`
	// Group is the tests a series' boots run; LargeGroup a mainline
	// head's and a series' that asked for them (Boot.Thorough).
	Group      []string `toml:"group"`
	LargeGroup []string `toml:"large_group"`
	// GroupTimeout bounds Group's run on the guests, from the mount on;
	// LargeGroupTimeout LargeGroup's. A group still running then is a
	// hang.
	GroupTimeout      cfgtype.Duration `toml:"group_timeout"`
	LargeGroupTimeout cfgtype.Duration `toml:"large_group_timeout"`
	// FsxOps bounds the operations of every fsx run of the fsx family
	// (fstests' FSX_AVOID="-N n": fsx takes the last -N), so that
	// generic/075 and its kin fit an emulated pair, where each READ or
	// WRITE takes 40-50 ms; 0 keeps each test's own counts.
	FsxOps int `toml:"fsx_ops"`
	// Touches is a regular expression over the series' changed files,
	// changed lines and the functions their hunks are in.
	Touches string `toml:"touches"`
}

// FstestsTouches is what asks for the fstests profile by default: the
// Read/Write/Reply chunk code of svcrdma and xprtrdma, the rdma_rw API,
// MR registration, and the NFS client's and server's READ/WRITE paths.
const FstestsTouches = `(?i)svc_rdma_(rw|sendto|recvfrom)\.c|xprtrdma/(rpc_rdma|frwr_ops|verbs)\.c|core/(rw|mr_pool)\.c|ib_map_mr_sg|fs/nfs/(read|write|direct|pagelist)\.c|fs/nfsd/vfs\.c|nfsd_(vfs_)?(read|write)|nfsd_splice|nfsd_iter_read`

// DefaultFstests is lab.fstests' default: the snapshot beside the
// checkout, the groups docs/lab.md measured.
func DefaultFstests() FstestsConfig {
	return FstestsConfig{
		Source:            "../shared/peer/fstests-63a29724a85f.tar.gz",
		Commit:            "63a29724a85f",
		Providers:         []string{"rxe"},
		Boots:             1,
		NFSVersions:       []string{"3", "4.2"},
		Group:             []string{"generic/075", "generic/257", "generic/263"},
		LargeGroup:        []string{"generic/013", "generic/075", "generic/257", "generic/263"},
		GroupTimeout:      cfgtype.D(12 * time.Minute),
		LargeGroupTimeout: cfgtype.D(40 * time.Minute),
		FsxOps:            1000,
		Touches:           FstestsTouches,
	}
}

// fstestsName is a test as check names it; names travel on the kernel
// command line and into the guest's shell unquoted.
var fstestsName = regexp.MustCompile(`^[a-z0-9]+/[0-9]{3,4}$`)

// FstestsRun is what an fstests boot runs (Test.Fstests).
type FstestsRun struct {
	Tests []string `json:"tests"`
	// Timeout bounds the group on the guests, from the mount on.
	Timeout time.Duration `json:"timeout"`
	// FsxOps is FstestsConfig.FsxOps (0: the tests' own counts).
	FsxOps int `json:"fsx_ops,omitempty"`
}

func (f FstestsRun) validate() error {
	if len(f.Tests) == 0 || len(f.Tests) > 200 {
		return fmt.Errorf("fstests group of %d tests: want 1..200", len(f.Tests))
	}
	seen := map[string]bool{}
	for _, t := range f.Tests {
		if !fstestsName.MatchString(t) || seen[t] {
			return fmt.Errorf("fstests test %q: want a name like generic/075, once", t)
		}
		seen[t] = true
	}
	if f.Timeout < time.Minute {
		return fmt.Errorf("fstests group timeout %v: want at least a minute", f.Timeout)
	}
	if f.FsxOps < 0 || f.FsxOps > 1000000 {
		return fmt.Errorf("fstests fsx_ops %d: want 0 (the tests' own counts) to 1000000", f.FsxOps)
	}
	return nil
}

// FstestsTest is the fstests profile's test for its boot-th boot on
// provider (0-based): NFS versions in turn; the large group when large.
func (c Config) FstestsTest(provider string, boot int, large bool) Test {
	f := c.Fstests
	run := &FstestsRun{Tests: f.Group, Timeout: f.GroupTimeout.Duration, FsxOps: f.FsxOps}
	if large {
		run.Tests, run.Timeout = f.LargeGroup, f.LargeGroupTimeout.Duration
	}
	t := Test{Kind: "fstests", SizeMiB: 1, Iterations: 1, NFSVersion: "3", Transport: "rdma", RDMA: provider,
		HungTaskSecs: c.Test.HungTaskSecs, Fstests: run}
	if len(f.NFSVersions) > 0 {
		t.NFSVersion = f.NFSVersions[boot%len(f.NFSVersions)]
	}
	return t
}

func (f FstestsConfig) validate(c Config) error {
	if len(f.Providers) == 0 {
		return nil
	}
	if f.Boots < 1 {
		return fmt.Errorf("lab.fstests.boots %d: want at least 1 (or providers = [] to turn the profile off)", f.Boots)
	}
	for _, prov := range f.Providers {
		if prov != "rxe" && prov != "siw" {
			return fmt.Errorf("lab.fstests.providers: %q: want rxe or siw (the QEMU pair's soft devices)", prov)
		}
	}
	if f.Source == "" || !fstestsCommit.MatchString(f.Commit) {
		return fmt.Errorf("lab.fstests: source %q and commit %q: want fstests' git URL, clone, directory or tarball, pinned to a commit (7-40 hex digits)", f.Source, f.Commit)
	}
	for i := range max(len(f.NFSVersions), 1) {
		for _, large := range []bool{false, true} {
			if err := c.FstestsTest(f.Providers[0], i, large).Validate(); err != nil {
				return fmt.Errorf("lab.fstests: %w", err)
			}
		}
	}
	if _, err := regexp.Compile(f.Touches); err != nil || f.Touches == "" {
		return fmt.Errorf("lab.fstests.touches %q: want a regular expression: %v", f.Touches, err)
	}
	return nil
}

var fstestsCommit = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// fstestsBuildVersion changes when the build or the packing below
// changes meaning.
const fstestsBuildVersion = "rdmabot-fstests/1"

// fstestsDir is where the built tree lies in the guest.
const fstestsDir = "var/lib/xfstests"

// EnsureFstests returns the archive of fstests built from f's source at
// its commit (an initramfs archive holding /var/lib/xfstests), from the
// cache in dir (…/lab/fstests) or built now on this host, whose Debian
// is the guests' userland. A source that is absent or does not build is
// the lab's gap (InfraError), never a kernel's.
func EnsureFstests(ctx context.Context, dir string, f FstestsConfig, log *slog.Logger) (string, error) {
	if !IsURL(f.Source) {
		// One key per source, however the path was written.
		if abs, err := filepath.Abs(f.Source); err == nil {
			f.Source = abs
		}
	}
	h := sha256.Sum256([]byte(fstestsBuildVersion + "\n" + f.Source + "\n" + f.Commit))
	key := hex.EncodeToString(h[:])[:16]
	out := filepath.Join(dir, key, "fstests.cpio")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", &InfraError{Op: "fstests", Err: err}
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", &InfraError{Op: "fstests", Err: err}
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", &InfraError{Op: "fstests lock", Err: err}
	}
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	start := time.Now()
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", &InfraError{Op: "fstests", Err: err}
	}
	defer os.RemoveAll(work)
	src, err := fstestsSource(ctx, work, f)
	if err != nil {
		return "", &InfraError{Op: "fstests source", Err: err}
	}
	log.Info("fstests: building", "source", f.Source, "commit", f.Commit)
	if _, err := runCmd(ctx, src, "make", "-j", strconv.Itoa(runtime.NumCPU())); err != nil {
		return "", &InfraError{Op: "fstests build", Err: fmt.Errorf("%w (scripts/setup.sh installs fstests' build dependencies)", err)}
	}
	built := time.Since(start)
	stage := filepath.Join(work, "stage")
	if err := stageFstests(ctx, src, filepath.Join(stage, fstestsDir)); err != nil {
		return "", &InfraError{Op: "fstests pack", Err: err}
	}
	final := filepath.Join(work, "out")
	if err := os.MkdirAll(final, 0o755); err != nil {
		return "", &InfraError{Op: "fstests", Err: err}
	}
	if err := packRoot(stage, filepath.Join(final, "fstests.cpio"), false); err != nil {
		return "", &InfraError{Op: "fstests pack", Err: err}
	}
	if err := os.WriteFile(filepath.Join(final, "source.txt"), []byte(f.Source+"\n"+f.Commit+"\n"), 0o644); err != nil {
		return "", &InfraError{Op: "fstests", Err: err}
	}
	if err := os.Rename(final, filepath.Join(dir, key)); err != nil {
		return "", &InfraError{Op: "fstests", Err: err}
	}
	fi, err := os.Stat(out)
	if err != nil {
		return "", &InfraError{Op: "fstests", Err: err}
	}
	log.Info("fstests built", "path", out, "bytes", fi.Size(), "build", built.Round(time.Second), "took", time.Since(start).Round(time.Second))
	return out, nil
}

// fstestsSource puts f's source at its commit in work/src and returns
// that directory.
func fstestsSource(ctx context.Context, work string, f FstestsConfig) (string, error) {
	src := filepath.Join(work, "src")
	if IsURL(f.Source) {
		return src, gitCheckout(ctx, f.Source, src, f.Commit)
	}
	fi, err := os.Stat(f.Source)
	if err != nil {
		return "", fmt.Errorf("lab.fstests.source %s is absent (%w): the operator's gap: point it at fstests' git URL, a clone, a directory or a tarball, pinned with lab.fstests.commit, or set lab.fstests.providers = [] to turn the profile off", f.Source, err)
	}
	if fi.IsDir() {
		if isGitDir(f.Source) {
			return src, gitCheckout(ctx, f.Source, src, f.Commit)
		}
		if _, err := runCmd(ctx, "", "cp", "-a", f.Source+"/.", src+"/"); err != nil {
			return "", err
		}
		return src, nil
	}
	x := filepath.Join(work, "x")
	if err := os.MkdirAll(x, 0o755); err != nil {
		return "", err
	}
	if _, err := runCmd(ctx, "", "tar", "-xf", f.Source, "-C", x); err != nil {
		return "", fmt.Errorf("lab.fstests.source %s is no tarball tar can read: %w", f.Source, err)
	}
	// A tarball holds the tree, or one directory holding it.
	top, err := os.ReadDir(x)
	if err != nil {
		return "", err
	}
	if len(top) == 1 && top[0].IsDir() {
		return src, os.Rename(filepath.Join(x, top[0].Name()), src)
	}
	return src, os.Rename(x, src)
}

// IsURL says a source is a git remote rather than a local path.
func IsURL(source string) bool {
	return strings.Contains(source, "://") || strings.HasPrefix(source, "git@")
}

func isGitDir(dir string) bool {
	for _, p := range []string{".git", "HEAD"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return true
		}
	}
	return false
}

// gitCheckout clones repo into dst and checks out commit, which must be
// what HEAD then is.
func gitCheckout(ctx context.Context, repo, dst, commit string) error {
	if _, err := runCmd(ctx, "", "git", "clone", "-q", "--no-checkout", repo, dst); err != nil {
		return err
	}
	if _, err := runCmd(ctx, dst, "git", "-c", "advice.detachedHead=false", "checkout", "-q", commit); err != nil {
		return fmt.Errorf("lab.fstests.commit %s: %w", commit, err)
	}
	head, err := runCmd(ctx, dst, "git", "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(head), commit) {
		return fmt.Errorf("lab.fstests.commit %s names %s, not a commit", commit, bytes.TrimSpace(head))
	}
	return nil
}

// fstestsSkipDirs and fstestsSkipExt are what check never runs: the
// build's sources, objects and its own tooling.
var (
	fstestsSkipDirs = map[string]bool{".git": true, "autom4te.cache": true, "doc": true, "m4": true, "include": true,
		"lib": true, "build": true, ".libs": true, ".deps": true, "tools": true, "results": true}
	fstestsSkipExt = map[string]bool{".c": true, ".h": true, ".o": true, ".lo": true, ".la": true, ".a": true,
		".in": true, ".m4": true, ".ac": true, ".am": true, ".d": true, ".cpp": true}
)

// stageFstests copies what check runs of the built tree src into dst,
// its programs without their debug information.
func stageFstests(ctx context.Context, src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if fstestsSkipDirs[name] {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if fstestsSkipExt[filepath.Ext(name)] || name == "Makefile" || strings.HasPrefix(name, "config.") || name == "configure" || name == "libtool" {
			return nil
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		}
		if err := copyFile(path, out, fi.Mode().Perm()); err != nil {
			return err
		}
		if isELF(out) {
			_, err = runCmd(ctx, "", "strip", "--strip-debug", out)
		}
		return err
	})
}

func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [4]byte
	_, err = io.ReadFull(f, b[:])
	return err == nil && string(b[:]) == "\x7fELF"
}

// fstestsInitrd is the image with layers, the fstests layer and the
// built fstests tree, composed once per tree next to the image.
func (p *QEMUPair) fstestsInitrd(ctx context.Context, layers []string) (string, error) {
	if p.fstests == nil {
		return "", &InfraError{Op: "fstests", Err: fmt.Errorf("the pair was made without lab.fstests")}
	}
	tree, err := p.fstests(ctx)
	if err != nil {
		return "", err
	}
	return p.image.withTree(append(layers, "fstests"), tree)
}
