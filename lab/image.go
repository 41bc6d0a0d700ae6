package lab

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

//go:embed guest/init.sh
var initScript []byte

//go:embed guest/labtest.sh
var labtestScript []byte

// GuestScripts are the scripts every guest runs, by name: init.sh brings
// the guest and its link up and starts labtest.sh, the test. A reader
// who boots kernels by hand runs the same.
func GuestScripts() map[string][]byte {
	return map[string][]byte{"init.sh": initScript, "labtest.sh": labtestScript}
}

// Recipe says how the guest root image is made. Its hash names the cached
// image, so any change to the packages or the scripts rebuilds it.
type Recipe struct {
	// Packages are the base image, installed with their Depends closure.
	Packages []string
	// Layers are optional extras, each its own archive of what its
	// packages add to the base; a run appends the ones it needs (the
	// kernel unpacks concatenated archives in order). fio alone brings
	// ~60 MB of libraries, which would slow every boot under TCG.
	Layers map[string][]string
	// Skip are packages of the closure never run in the guest (their
	// maintainer scripts would need them; we never run those).
	Skip []string
}

// DefaultRecipe is what the transfer test, the fio variant and the SSH
// driver's tests need.
func DefaultRecipe() Recipe {
	return Recipe{
		Packages: []string{
			"nfs-kernel-server", "nfs-common", "rpcbind", "iproute2", "kmod",
			"rdma-core", "ibverbs-utils", "ibverbs-providers", "libibverbs1",
			// The data checks of both sides (labtest.sh's real_bin):
			// diffutils' cmp, not busybox's byte-at-a-time one.
			"diffutils",
		},
		Layers: map[string][]string{
			"fio": {"fio"},
			"ssh": {"openssh-server"},
			// What fstests' check and its programs run (the built tree
			// itself is an archive of its own: EnsureFstests).
			"fstests": {"bash", "mount", "e2fsprogs", "xfsprogs", "bc", "gawk", "attr", "acl", "psmisc", "perl-base", "coreutils",
				"util-linux", "findutils", "grep", "sed", "procps", "hostname", "libaio1",
				"liburing2", "libcap2", "libacl1", "libuuid1"},
		},
		Skip: []string{
			"perl", "perl-base", "perl-modules-5.36", "libperl5.36", "python3", "python3-minimal",
			"python3.11", "python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib",
			"libpython3-stdlib", "python3-six", "debconf", "cdebconf", "debconf-2.0", "udev", "dpkg",
			"install-info", "adduser", "passwd", "ucf", "sensible-utils", "mailcap", "media-types",
			"libdebian-installer4", "libnewt0.52", "libslang2", "libtextwrap1", "tar",
			"readline-common", "init-system-helpers", "systemd", "systemd-sysv", "libsystemd-shared",
			"runit-helper", "lsb-base", "sysvinit-utils", "libpam-runtime", "libpam-modules",
			"libpam-modules-bin", "debianutils", "base-files", "ceph-common",
		},
	}
}

// recipeVersion changes when the build steps below change meaning (3:
// archives are no longer gzip'ed; 4: a package a layer names is never
// skipped).
const recipeVersion = "rdmabot-guest-image/4"

func (r Recipe) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\npackages: %s\n", recipeVersion, strings.Join(sorted(r.Packages), " "))
	names := make([]string, 0, len(r.Layers))
	for n := range r.Layers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "layer %s: %s\n", n, strings.Join(sorted(r.Layers[n]), " "))
	}
	fmt.Fprintf(&b, "skip: %s\n", strings.Join(sorted(r.Skip), " "))
	return b.String()
}

// Hash identifies the image the recipe builds.
func (r Recipe) Hash() string {
	h := sha256.New()
	io.WriteString(h, r.String())
	h.Write(initScript)
	h.Write(labtestScript)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func sorted(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

// Image is a built guest root: newc cpio archives for -initrd. They are
// not compressed: inflating the 21 MB gzip of the base took the guest 6.5
// of its 8.6 s to /init under TCG (1.3 s of each boot's host time), and
// QEMU reads the 43 MB plain archive from the page cache in no time.
type Image struct {
	Dir   string
	Path  string // the base archive
	Hash  string
	Built bool // built now rather than found in the cache
	Bytes int64
}

// WithLayers returns an initrd of the base plus the named layers, made
// once and kept next to the image.
func (im Image) WithLayers(layers ...string) (string, error) {
	if len(layers) == 0 {
		return im.Path, nil
	}
	sort.Strings(layers)
	out := filepath.Join(im.Dir, "rootfs+"+strings.Join(layers, "+")+".cpio")
	return out, im.compose(out, layerPaths(im.Dir, layers))
}

// withTree is WithLayers with a built tree's archive (EnsureFstests's)
// appended last, made once per tree: its name holds the tree's cache
// key (the directory it lies in).
func (im Image) withTree(layers []string, tree string) (string, error) {
	sort.Strings(layers)
	out := filepath.Join(im.Dir, "rootfs+"+strings.Join(layers, "+")+"+tree-"+filepath.Base(filepath.Dir(tree))+".cpio")
	return out, im.compose(out, append(layerPaths(im.Dir, layers), tree))
}

// compose writes out as the base archive followed by extra, unless it
// exists.
func (im Image) compose(out string, extra []string) error {
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	tmp, err := os.CreateTemp(im.Dir, ".compose-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	for _, p := range append([]string{im.Path}, extra...) {
		f, err := os.Open(p)
		if err != nil {
			tmp.Close()
			return fmt.Errorf("image layer: %w", err)
		}
		_, err = io.Copy(tmp, f)
		f.Close()
		if err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

// dataPath is where the transfer test's file lies in the guests that
// hold it (labtest.sh's RB_DATA).
const dataPath = "usr/lib/rdmabot/data"

// withData writes to dir an initrd of the image at initrd with the
// transfer test's file appended, an archive of its own (the kernel
// unpacks concatenated archives in order): the cached image stays
// shared, and only the guests given this file hold the data.
func withData(dir, initrd string, data []byte) (string, error) {
	out, err := os.CreateTemp(dir, "initrd+data-")
	if err != nil {
		return "", err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	err = func() error {
		in, err := os.Open(initrd)
		if err != nil {
			return err
		}
		defer in.Close()
		if _, err := io.Copy(w, in); err != nil {
			return err
		}
		c := newCpioWriter(w)
		if err := c.file(dataPath, 0o444, data); err != nil {
			return err
		}
		if err := c.close(); err != nil {
			return err
		}
		return w.Flush()
	}()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return "", fmt.Errorf("the guest's test data: %w", err)
	}
	return out.Name(), nil
}

// newTestData is the transfer test's file for one boot: fresh random
// bytes (ChaCha8 under a seed from the system's random source), so no
// kernel can know them without being given them.
func newTestData(mib int) ([]byte, error) {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, err
	}
	b := make([]byte, mib<<20)
	rand.NewChaCha8(seed).Read(b)
	return b, nil
}

func layerPaths(dir string, layers []string) []string {
	var p []string
	for _, l := range layers {
		p = append(p, filepath.Join(dir, "layer-"+l+".cpio"))
	}
	return p
}

// EnsureImage returns the cached image for the recipe, building it when
// the cache has none. dir is the cache (…/lab/images); concurrent callers
// serialize on a lock file and the second finds the first one's image.
func EnsureImage(ctx context.Context, dir string, r Recipe, log *slog.Logger) (Image, error) {
	hash := r.Hash()
	img := Image{Dir: filepath.Join(dir, hash), Path: filepath.Join(dir, hash, "rootfs.cpio"), Hash: hash}
	if fi, err := os.Stat(img.Path); err == nil {
		img.Bytes = fi.Size()
		return img, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Image{}, &InfraError{Op: "image", Err: err}
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return Image{}, &InfraError{Op: "image", Err: err}
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return Image{}, &InfraError{Op: "image lock", Err: err}
	}
	if fi, err := os.Stat(img.Path); err == nil {
		img.Bytes = fi.Size()
		return img, nil
	}
	start := time.Now()
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return Image{}, &InfraError{Op: "image", Err: err}
	}
	defer os.RemoveAll(work)
	if err := buildImage(ctx, work, r, log); err != nil {
		return Image{}, &InfraError{Op: "image build", Err: err}
	}
	if err := os.WriteFile(filepath.Join(work, "recipe.txt"), []byte(r.String()), 0o644); err != nil {
		return Image{}, &InfraError{Op: "image", Err: err}
	}
	for _, d := range []string{"root", "debs"} {
		os.RemoveAll(filepath.Join(work, d))
	}
	if err := os.Chmod(work, 0o755); err != nil {
		return Image{}, &InfraError{Op: "image", Err: err}
	}
	if err := os.Rename(work, img.Dir); err != nil {
		return Image{}, &InfraError{Op: "image", Err: err}
	}
	fi, err := os.Stat(img.Path)
	if err != nil {
		return Image{}, &InfraError{Op: "image", Err: err}
	}
	img.Bytes, img.Built = fi.Size(), true
	log.Info("guest image built", "path", img.Path, "bytes", fi.Size(), "took", time.Since(start).Round(time.Millisecond))
	return img, nil
}

func runCmd(ctx context.Context, dir string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(lastLines(stderr.String(), 5)))
	}
	return out, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// closure is the recipe's packages with their Depends and PreDepends,
// recursively, as apt resolves them on this host, minus the skipped ones
// that pkgs does not name itself (fstests' check needs perl).
func closure(ctx context.Context, r Recipe, pkgs []string) ([]string, error) {
	args := []string{"depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
		"--no-breaks", "--no-replaces", "--no-enhances"}
	out, err := runCmd(ctx, "", "apt-cache", append(args, pkgs...)...)
	if err != nil {
		return nil, err
	}
	skip := map[string]bool{}
	for _, s := range r.Skip {
		skip[s] = true
	}
	for _, p := range pkgs {
		delete(skip, p)
	}
	seen := map[string]bool{}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		// Package lines start in column 0; virtual ones are <bracketed>.
		if l == "" || l[0] == ' ' || l[0] == '<' || l[0] == '|' {
			continue
		}
		name := strings.SplitN(l, ":", 2)[0]
		if skip[name] || seen[name] {
			continue
		}
		seen[name] = true
		names = append(names, name)
	}
	sort.Strings(names)
	return names, sc.Err()
}

// unpack downloads packages and unpacks them into root. Maintainer
// scripts are never run (they need a live system); the init script does
// the little setup the daemons need.
func unpack(ctx context.Context, work, root string, pkgs []string) error {
	debs, err := os.MkdirTemp(work, "debs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(debs)
	if _, err := runCmd(ctx, debs, "apt-get", append([]string{"download", "-q"}, pkgs...)...); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(debs, "*.deb"))
	if err != nil {
		return err
	}
	if len(files) != len(pkgs) {
		return fmt.Errorf("apt-get download fetched %d of %d packages", len(files), len(pkgs))
	}
	for _, f := range files {
		if _, err := runCmd(ctx, "", "dpkg-deb", "-x", f, root); err != nil {
			return err
		}
	}
	for _, d := range []string{"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
		"usr/share/lintian", "usr/share/bug", "usr/share/zoneinfo", "etc/init.d", "lib/systemd", "usr/lib/systemd",
		"usr/lib/x86_64-linux-gnu/gconv"} {
		os.RemoveAll(filepath.Join(root, d))
	}
	return nil
}

// buildImage makes rootfs.cpio and one layer-NAME.cpio per layer in
// work. A layer holds only what its packages add to the base; its
// libraries are found on the loader's default multiarch path.
func buildImage(ctx context.Context, work string, r Recipe, log *slog.Logger) error {
	base, err := closure(ctx, r, r.Packages)
	if err != nil {
		return err
	}
	root := filepath.Join(work, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	log.Info("guest image: base", "packages", len(base))
	if err := unpack(ctx, work, root, base); err != nil {
		return err
	}
	if err := addBusybox(ctx, root); err != nil {
		return err
	}
	if err := addEtc(root); err != nil {
		return err
	}
	if _, err := runCmd(ctx, "", "ldconfig", "-r", root); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "init"), initScript, 0o755); err != nil {
		return err
	}
	lib := filepath.Join(root, "usr/lib/rdmabot")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(lib, "labtest.sh"), labtestScript, 0o644); err != nil {
		return err
	}
	if err := packRoot(root, filepath.Join(work, "rootfs.cpio"), true); err != nil {
		return err
	}
	inBase := map[string]bool{}
	for _, p := range base {
		inBase[p] = true
	}
	for name, pkgs := range r.Layers {
		all, err := closure(ctx, r, pkgs)
		if err != nil {
			return err
		}
		var extra []string
		for _, p := range all {
			if !inBase[p] {
				extra = append(extra, p)
			}
		}
		lroot := filepath.Join(work, "layer-"+name)
		if err := os.MkdirAll(lroot, 0o755); err != nil {
			return err
		}
		log.Info("guest image: layer", "layer", name, "packages", len(extra))
		if err := unpack(ctx, work, lroot, extra); err != nil {
			return fmt.Errorf("layer %s: %w", name, err)
		}
		if err := packRoot(lroot, filepath.Join(work, "layer-"+name+".cpio"), false); err != nil {
			return err
		}
		os.RemoveAll(lroot)
	}
	return nil
}

// addBusybox links busybox's applets where no package put a real tool.
func addBusybox(ctx context.Context, root string) error {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("busybox-static is not installed: %w", err)
	}
	if err := copyFile(bb, filepath.Join(root, "bin/busybox"), 0o755); err != nil {
		return err
	}
	out, err := runCmd(ctx, "", bb, "--list-full")
	if err != nil {
		return err
	}
	for _, a := range strings.Fields(string(out)) {
		p := filepath.Join(root, a)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		// usr-merge: /bin may be a link into /usr/bin already.
		if _, err := os.Lstat(filepath.Join(root, "usr", a)); err == nil && !strings.HasPrefix(a, "usr/") {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Symlink("/bin/busybox", p); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// addEtc writes the accounts and state the daemons expect, which the
// skipped maintainer scripts would have made.
func addEtc(root string) error {
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n" +
			"_rpc:x:100:65534::/run/rpcbind:/usr/sbin/nologin\n" +
			"statd:x:101:65534::/var/lib/nfs:/usr/sbin/nologin\n" +
			"sshd:x:102:65534::/run/sshd:/usr/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"etc/group":         "root:x:0:\nnogroup:x:65534:\n",
		"etc/shadow":        "root:*:1::::::\n",
		"etc/hosts":         "127.0.0.1 localhost\n",
		"etc/exports":       "",
		"var/lib/nfs/etab":  "",
		"var/lib/nfs/rmtab": "",
	}
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			return err
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "run", "tmp", "root/.ssh", "mnt/nfs_test",
		"var/lib/nfs/rpc_pipefs", "var/lib/nfs/v4recovery", "var/lib/nfs/sm", "var/lib/nfs/sm.bak", "var/empty"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// packRoot writes root as a newc cpio. Devices the kernel needs
// before devtmpfs is mounted are added as entries, so no mknod (and no
// root privilege) is needed.
func packRoot(root, out string, devices bool) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	cw := newCpioWriter(bw)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		return cw.addPath(rel, path, fi)
	})
	if err == nil && devices {
		err = errors.Join(cw.device("dev/console", 0o600, 5, 1), cw.device("dev/null", 0o666, 1, 3))
	}
	if err == nil {
		err = cw.close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
