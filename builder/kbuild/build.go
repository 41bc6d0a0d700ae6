package kbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/rdmabot/rdmabot/internal/flock"
	"github.com/rdmabot/rdmabot/internal/safefile"
)

// Options configure a Builder.
type Options struct {
	// Dir holds the build slots (checkout, output trees, logs) and the
	// artifact store.
	Dir string
	// CCacheDir is ccache's cache, outside every checkout; "" builds
	// without ccache.
	CCacheDir string
	// CCacheDepend runs ccache in depend mode: a miss does not run the
	// preprocessor a second time; hits come from the compiler's
	// dependency list instead of preprocessed text.
	CCacheDepend bool
	// Jobs is make -j; 0 means the number of CPUs.
	Jobs int
	// Timeout bounds one build (configure and make); 0 means only ctx.
	Timeout time.Duration
	// HeavyLock, when set, is a file flocked around configure and make so
	// that builds and lab runs on one machine take turns.
	HeavyLock string
	// Bwrap is bubblewrap's path; "" looks it up in PATH.
	Bwrap string
	// Limits bound each sandboxed run; zero fields are DefaultLimits.
	Limits Limits
	Log    *slog.Logger
}

// Request is one kernel to build.
type Request struct {
	// Objects is the repository's object store holding Tree.
	Objects storer.EncodedObjectStorer
	Tree    plumbing.Hash
	Lab     Lab
	// Slot names the persistent checkout to build in; one build at a time
	// uses a slot. "" means "default".
	Slot string
	// Force builds even when the store has the kernel, replacing it.
	Force bool
	// Trusted is set for a tree from a configured branch (a base, a
	// mainline head, a bisection step). Every other tree (a series'
	// candidate) is built apart: in a throwaway output directory seeded
	// from the slot's, with the compiler cache read-only, so it cannot
	// affect any later build.
	Trusted bool
}

// Timings are the wall-clock times of a build's steps.
type Timings struct {
	// Seed is an untrusted build's copy of the slot's output tree.
	Sync, Seed, Configure, Make, Store, Total time.Duration
	// Wait is the time spent waiting for the slot's lock and the heavy
	// lock (held by another build or a lab boot): no part of the build,
	// but part of its Total.
	Wait time.Duration
}

// CCacheStats are ccache's counters over one build.
type CCacheStats struct {
	Hits, Misses int
}

// Result is a build's artifact and how it was obtained.
type Result struct {
	*Artifact
	// Reused is set when the store already had the artifact: nothing was
	// synced or built.
	Reused bool
	Sync   SyncStats
	// Configured is false when the previous configuration still held
	// (same lab, and no Kconfig file changed since).
	Configured bool
	Timings    Timings
	CCache     CCacheStats
}

// Builder builds kernels; safe for concurrent use on different slots.
type Builder struct {
	opt        Options
	limits     Limits
	ccacheConf string // the only ccache.conf builds and the host read
	bwrap      string
	toolchain  Toolchain
	store      *Store
	// idle runs a check's compile on idle CPU (idlePrefix).
	idle []string
}

// New checks the toolchain and the sandbox and returns a Builder.
func New(ctx context.Context, opt Options) (*Builder, error) {
	if opt.Dir == "" {
		return nil, errors.New("kbuild: no directory")
	}
	// Every host path the builder opens under Dir is then free of
	// symlinks but those the sandbox planted, which are refused.
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, &InfraError{Op: "dir", Err: err}
	}
	dir, err := filepath.Abs(opt.Dir)
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return nil, &InfraError{Op: "dir", Err: err}
	}
	opt.Dir = dir
	if opt.Jobs == 0 {
		opt.Jobs = runtime.NumCPU()
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	b := &Builder{opt: opt, bwrap: opt.Bwrap, limits: opt.Limits.withDefaults(opt.Jobs)}
	if b.bwrap == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return nil, &InfraError{Op: "sandbox", Err: fmt.Errorf("bubblewrap is not installed: %w", err)}
		}
		b.bwrap = p
	}
	if opt.CCacheDir != "" {
		if _, err := exec.LookPath("ccache"); err != nil {
			return nil, &InfraError{Op: "ccache", Err: err}
		}
		if err := os.MkdirAll(opt.CCacheDir, 0o755); err != nil {
			return nil, &InfraError{Op: "ccache", Err: err}
		}
		b.ccacheConf = filepath.Join(opt.Dir, "ccache.conf")
		if err := writeFileAtomic(b.ccacheConf, []byte("# rdmabot: CCACHE_CONFIGPATH names this file; a ccache.conf in the cache is ignored\n")); err != nil {
			return nil, &InfraError{Op: "ccache", Err: err}
		}
	}
	tc, err := ProbeToolchain(ctx)
	if err != nil {
		return nil, err
	}
	b.toolchain = tc
	if b.store, err = OpenStore(filepath.Join(opt.Dir, "store")); err != nil {
		return nil, err
	}
	sb := &Sandbox{Bwrap: b.bwrap, Src: opt.Dir, Out: opt.Dir}
	if err := sb.Check(ctx); err != nil {
		return nil, err
	}
	b.idle = idlePrefix(ctx, sb.Run, opt.Log)
	return b, nil
}

// idlePrefix is the command prefix that runs a program in the sandbox
// on idle CPU only (SCHED_IDLE, nice 19), or none when the sandbox cannot
// run it: a missing chrt must not make every check's compile fail, which
// would blame the series.
func idlePrefix(ctx context.Context, run func(ctx context.Context, w io.Writer, argv ...string) error, log *slog.Logger) []string {
	prefix := []string{"chrt", "--idle", "0", "nice", "-n", "19"}
	var out limitedBuffer
	if err := run(ctx, &out, append(prefix, "true")...); err != nil {
		log.Warn("kbuild: chrt and nice do not run in the sandbox: quick checks compile at normal priority", "err", err, "output", string(out.b))
		return nil
	}
	return prefix
}

// Toolchain is the compiler the Builder uses.
func (b *Builder) Toolchain() Toolchain { return b.toolchain }

// Store is where the artifacts are kept.
func (b *Builder) Store() *Store { return b.store }

// Key is the store key of a request: known before anything is built, so a
// RESEND or an already built base costs nothing.
func (b *Builder) Key(req Request) (string, error) {
	ch, err := req.Lab.ConfigHash()
	if err != nil {
		return "", err
	}
	return ArtifactKey(req.Tree.String(), ch, b.toolchain.ID), nil
}

// Build returns the kernel for req: from the store when it was built
// before (unless req.Force), else built in req's slot. Errors:
// *BuildError (the source does not build), *ConfigError (requested
// options lost), *InfraError (the machine's fault).
func (b *Builder) Build(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	configHash, err := req.Lab.ConfigHash()
	if err != nil {
		return nil, err
	}
	key := ArtifactKey(req.Tree.String(), configHash, b.toolchain.ID)
	if a, ok := b.store.Lookup(key); ok && !req.Force {
		b.opt.Log.Info("kernel reused", "key", key, "tree", req.Tree, "lab", req.Lab.Name)
		return &Result{Artifact: a, Reused: true, Timings: Timings{Total: time.Since(start)}}, nil
	}
	ctx, j, done, err := b.start(ctx, req, configHash)
	if err != nil {
		return nil, err
	}
	defer done()
	res := j.res
	t := time.Now()
	if err := j.configure(ctx); err != nil {
		return nil, j.verdict(err)
	}
	res.Timings.Configure = time.Since(t)

	t = time.Now()
	before := b.ccacheStats(ctx)
	if err := j.make(ctx); err != nil {
		return nil, j.verdict(err)
	}
	if req.Trusted {
		res.CCache = b.ccacheStats(ctx).since(before)
	} else {
		res.CCache = j.ccacheLogStats()
	}
	res.Timings.Make = time.Since(t)

	t = time.Now()
	// What the build left is checked before anything is read or copied:
	// a link, FIFO or oversized file there is the tree's doing.
	if err := j.checkArtifacts(); err != nil {
		return nil, j.sandboxFault("artifacts", err)
	}
	buildID, err := ReadBuildID(filepath.Join(j.out, "vmlinux"))
	if err != nil {
		return nil, j.sandboxFault("build id", err)
	}
	if req.Force {
		if err := b.store.Remove(key); err != nil {
			return nil, err
		}
	}
	a, err := b.store.Put(key, j.artifactFiles(), Artifact{
		Tree: req.Tree.String(), Lab: req.Lab.Name, ConfigHash: configHash,
		Toolchain: b.toolchain.ID, Compiler: b.toolchain.Compiler, BuildID: buildID,
	})
	if err != nil {
		return nil, err
	}
	res.Artifact = a
	res.Timings.Store = time.Since(t)
	res.Timings.Total = time.Since(start)
	b.opt.Log.Info("kernel built", "key", key, "tree", req.Tree, "lab", req.Lab.Name,
		"wait", res.Timings.Wait, "sync", res.Timings.Sync, "configure", res.Timings.Configure, "make", res.Timings.Make,
		"ccache_hits", res.CCache.Hits, "ccache_misses", res.CCache.Misses)
	return res, nil
}

// Configured is the outcome of Configure.
type Configured struct {
	// Config is the path of the verified .config in the slot's output
	// tree; for an untrusted request it was in the build's throwaway
	// copy and is gone.
	Config string
	Sync   SyncStats
	// Made is false when the previous configuration still held.
	Made    bool
	Modules bool
	Took    time.Duration
}

// Configure syncs req's slot and makes and verifies the lab's .config
// without building: a cheap check that a tree still has what a lab needs.
func (b *Builder) Configure(ctx context.Context, req Request) (*Configured, error) {
	start := time.Now()
	configHash, err := req.Lab.ConfigHash()
	if err != nil {
		return nil, err
	}
	ctx, j, done, err := b.start(ctx, req, configHash)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := j.configure(ctx); err != nil {
		return nil, j.verdict(err)
	}
	return &Configured{Config: filepath.Join(j.out, ".config"), Sync: j.res.Sync, Made: j.res.Configured,
		Modules: j.modules, Took: time.Since(start)}, nil
}

// start locks req's slot, syncs its checkout to req.Tree, applies the
// timeout, takes the heavy lock and opens the build log. done undoes it.
func (b *Builder) start(ctx context.Context, req Request, configHash string) (_ context.Context, _ *job, _ func(), err error) {
	slotDir, err := b.slotDir(req.Slot)
	if err != nil {
		return nil, nil, nil, err
	}
	var undo []func()
	// release is its own variable, not the named result: an early return
	// sets the results to nil, and the deferred cleanup must still run.
	release := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	if err := os.MkdirAll(slotDir, 0o755); err != nil {
		return nil, nil, nil, &InfraError{Op: "slot", Err: err}
	}
	res := &Result{}
	waitStart := time.Now()
	unlock, err := lockFile(ctx, filepath.Join(slotDir, "lock"))
	if err != nil {
		return nil, nil, nil, err
	}
	undo = append(undo, unlock)
	res.Timings.Wait = time.Since(waitStart)
	co, err := OpenCheckout(slotDir)
	if err != nil {
		return nil, nil, nil, err
	}
	res.Sync, err = co.Sync(ctx, req.Objects, req.Tree)
	res.Timings.Sync = res.Sync.Duration
	if err != nil {
		return nil, nil, nil, err
	}
	parent := ctx
	if b.opt.HeavyLock != "" {
		waitStart := time.Now()
		unlockHeavy, err := b.lockHeavy(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		undo = append(undo, unlockHeavy)
		res.Timings.Wait += time.Since(waitStart)
	}
	if b.opt.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, b.opt.Timeout, &TimeoutError{Timeout: b.opt.Timeout})
		undo = append(undo, cancel)
	}
	j := &job{b: b, req: req, co: co, res: res,
		out:     filepath.Join(slotDir, "out-"+req.Lab.Name),
		cfgDir:  filepath.Join(slotDir, "config-"+req.Lab.Name),
		stamp:   filepath.Join(slotDir, "out-"+req.Lab.Name+".stamp"),
		logPath: filepath.Join(slotDir, "build-"+req.Lab.Name+".log"),
		cfgHash: configHash,
	}
	j.parent = parent
	if req.Trusted {
		for _, d := range []string{j.out, j.cfgDir} {
			if err := ownSlot(d); err != nil {
				return nil, nil, nil, err
			}
		}
		// A quick check copies the slot's output tree without the slot's
		// lock (Check): it must not copy one half written.
		unlockOut, err := lockFile(ctx, j.out+".lock")
		if err != nil {
			return nil, nil, nil, err
		}
		undo = append(undo, unlockOut)
	} else {
		if ctx, err = j.isolate(ctx, slotDir, &undo); err != nil {
			return nil, nil, nil, err
		}
	}
	closeLog, err := j.openLog()
	if err != nil {
		return nil, nil, nil, err
	}
	undo = append(undo, closeLog)
	return ctx, j, release, nil
}

// slotDir is the directory of the slot named slot ("" is "default").
func (b *Builder) slotDir(slot string) (string, error) {
	if slot == "" {
		slot = "default"
	}
	if strings.ContainsAny(slot, "/\x00") || slot == "." || slot == ".." {
		return "", fmt.Errorf("kbuild: bad slot name %q", slot)
	}
	return filepath.Join(b.opt.Dir, "slots", slot), nil
}

// lockHeavy takes the heavy lock. The wait for the lab is bounded by the
// timeout too, but it is no part of the build's own time: a build cannot
// be blamed for a lock held by others.
func (b *Builder) lockHeavy(ctx context.Context) (func(), error) {
	if b.opt.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opt.Timeout)
		defer cancel()
	}
	return lockFile(ctx, b.opt.HeavyLock)
}

// isolate has an untrusted tree build in a copy of the slot's output
// tree, thrown away after (undo): nothing it leaves there (an object with
// a future mtime, a planted link) reaches a later build. Its disk use is
// watched when limited: the returned context ends when it is exceeded.
func (j *job) isolate(ctx context.Context, slotDir string, undo *[]func()) (context.Context, error) {
	t := time.Now()
	cand := filepath.Join(slotDir, "cand-"+j.req.Lab.Name)
	*undo = append(*undo, func() { os.RemoveAll(cand) })
	if err := j.seed(ctx, cand); err != nil {
		return ctx, err
	}
	j.res.Timings.Seed = time.Since(t)
	j.own = cand
	if l := j.b.limits; l.Disk > 0 || l.Files > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		*undo = append(*undo, func() { cancel(nil) })
		go watchDisk(ctx, cand, l.Disk, l.Files, cancel, diskPoll)
	}
	return ctx, nil
}

// openLog creates the build log, bounded by the log limit (none when it
// is negative); the func returned closes it.
func (j *job) openLog() (func(), error) {
	logFile, err := os.Create(j.logPath)
	if err != nil {
		return nil, &InfraError{Op: "log", Err: err}
	}
	j.logFile = logFile
	j.log = &limitedLog{f: logFile, max: j.b.limits.Log}
	if j.b.limits.Log < 0 {
		j.log = logFile
	}
	return func() { logFile.Close() }, nil
}

// ownSlot says whether a trusted build may write the slot's directory
// dir: the sandbox runs as this process's user and maps no other, so a
// tree another user built (cache_dir shared by a serve run as another
// user) is an operator's gap, said as such, not a build that fails.
func ownSlot(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &InfraError{Op: "slot", Err: err}
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || int(sys.Uid) == os.Geteuid() {
		return nil
	}
	return &InfraError{Op: "slot", Err: fmt.Errorf("%s belongs to uid %d, and this process runs as uid %d: "+
		"is cache_dir shared with a serve run as another user? Give each its own cache_dir, or chown it", dir, sys.Uid, os.Geteuid())}
}

// job is one build in a slot.
type job struct {
	b   *Builder
	req Request
	co  *Checkout
	res *Result
	out string // O= of the build
	// own is an untrusted build's own directory, which its disk limits
	// bound ("" for a trusted build).
	own    string
	cfgDir string // O= of the configuration runs
	stamp  string // the configuration out holds (configStamp)
	// statsDir is an untrusted build's ccache statistics log directory.
	statsDir string
	logPath  string
	logFile  *os.File
	log      io.Writer
	// parent is the caller's context: when it has ended, a failure is
	// not the tree's.
	parent  context.Context
	cfgHash string
	modules bool
}

func (j *job) sandbox(out string) *Sandbox {
	env := []string{
		"PATH=/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=/tmp",
		"TMPDIR=/tmp",
		"LC_ALL=C",
		// Fixed build metadata: the same source gives the same kernel, and
		// ccache hits across trees (init/version.c sees no date or host).
		"KBUILD_BUILD_TIMESTAMP=Thu Jan  1 00:00:00 UTC 2026",
		"KBUILD_BUILD_USER=rdmabot",
		"KBUILD_BUILD_HOST=rdmabot",
		"KBUILD_BUILD_VERSION=1",
		"SOURCE_DATE_EPOCH=1767225600",
	}
	lim := j.b.limits
	sb := &Sandbox{Bwrap: j.b.bwrap, Src: j.co.Dir(), Out: out, Limits: &lim}
	if j.b.opt.CCacheDir != "" {
		sb.CCache = j.b.opt.CCacheDir
		sb.CCacheConf = j.b.ccacheConf
		env = append(env, "CCACHE_DIR="+sandboxCCache, "CCACHE_BASEDIR="+sandboxRoot,
			"CCACHE_CONFIGPATH="+sandboxCCacheConf)
		if j.b.opt.CCacheDepend {
			env = append(env, "CCACHE_DEPEND=1")
		}
		if !j.req.Trusted {
			// Hits from the trusted builds' results; nothing added, and
			// the counters go to a log of this build's own.
			sb.CCacheRO = true
			sb.Stats = j.statsDir
			env = append(env, "CCACHE_READONLY=1", "CCACHE_TEMPDIR=/tmp", "CCACHE_STATSLOG="+sandboxStats+"/ccache.log")
		}
	}
	sb.Env = env
	return sb
}

// seed makes dir an untrusted build's private copy of the slot's trusted
// output tree and configuration stamp (reflinked where the file system
// can) and points the job at it.
func (j *job) seed(ctx context.Context, dir string) error {
	if err := resetDir(dir); err != nil {
		return &InfraError{Op: "seed", Err: err}
	}
	out, stamp := filepath.Join(dir, "out"), filepath.Join(dir, "out.stamp")
	j.cfgDir, j.statsDir = filepath.Join(dir, "config"), filepath.Join(dir, "stats")
	for _, d := range []string{out, j.statsDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return &InfraError{Op: "seed", Err: err}
		}
	}
	b, err := os.ReadFile(j.stamp)
	if _, serr := os.Stat(j.out); err == nil && serr == nil {
		// Only trusted builds wrote the slot's tree: copying it follows
		// nothing a hostile build left.
		// The copy is this process's, whoever built the slot: the
		// sandbox's user namespace maps no other owner, so files kept
		// as another user's (a serve run as rdmabot beside tests run as
		// root, sharing cache_dir) could not be written by the build.
		cmd := exec.CommandContext(ctx, "cp", "-a", "--no-preserve=ownership", "--reflink=auto", "--", j.out+"/.", out)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return &InfraError{Op: "seed", Err: fmt.Errorf("cp %s: %v: %s", j.out, err, msg)}
		}
		if err := writeFileAtomic(stamp, b); err != nil {
			return &InfraError{Op: "seed", Err: err}
		}
	}
	j.out, j.stamp = out, stamp
	return nil
}

// makeArgs is the make command line shared by configuration and build:
// the compiler must be the same in both or kbuild reconfigures.
func (j *job) makeArgs(targets ...string) []string {
	cc := "CC=gcc"
	if j.b.opt.CCacheDir != "" {
		cc = "CC=ccache gcc"
	}
	a := []string{"make", "-C", sandboxSrc, "O=" + sandboxOut, "ARCH=" + j.req.Lab.Arch, cc,
		"-j" + strconv.Itoa(j.b.opt.Jobs)}
	return append(a, targets...)
}

// configStamp records which configuration the build directory holds and
// whether it is modular. It is kept in the slot, outside every directory
// the sandbox can write, so a build cannot forge or redirect it.
func (j *job) configStamp(modules bool) string {
	m := "n"
	if modules {
		m = "y"
	}
	return j.cfgHash + " " + j.req.Tree.String() + " " + m
}

// maxConfig bounds a .config the host reads back from the sandbox.
const maxConfig = 16 << 20

// configure makes the lab's .config for this tree and verifies it. It is
// skipped when the build directory was configured for the same lab from a
// tree whose Kconfig files equal this one's. The configuration is made in
// its own directory, emptied first, and copied into the build only when
// it differs, so an unchanged .config keeps its mtime and nothing is
// rebuilt for it. Nothing the configuration runs leave behind is
// followed: files are read only when regular, written only anew.
func (j *job) configure(ctx context.Context) error {
	if done, err := j.configuredBefore(); done || err != nil {
		return err
	}
	j.res.Configured = true
	if err := os.Remove(j.stamp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &InfraError{Op: "configure", Err: err}
	}
	if err := os.MkdirAll(j.out, 0o755); err != nil {
		return &InfraError{Op: "configure", Err: err}
	}
	// A previous configuration (perhaps a hostile tree's) may have left
	// anything in the configuration directory.
	if err := resetDir(j.cfgDir); err != nil {
		return &InfraError{Op: "configure", Err: err}
	}
	if err := j.makeConfig(ctx); err != nil {
		return err
	}
	lab := j.req.Lab
	final, err := readRegular(filepath.Join(j.cfgDir, ".config"), maxConfig)
	if err != nil {
		return j.sandboxFault("configure", err)
	}
	lost, err := lab.VerifyConfig(final)
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return &ConfigError{Lab: lab.Name, Lost: lost}
	}
	dst := filepath.Join(j.out, ".config")
	if cur, err := readRegular(dst, maxConfig); err != nil || !bytes.Equal(cur, final) {
		if err := writeFileAtomic(dst, final); err != nil {
			return j.sandboxFault("configure", err)
		}
	}
	j.modules = ParseConfig(final)["CONFIG_MODULES"] == "y"
	if err := writeFileAtomic(j.stamp, []byte(j.configStamp(j.modules)+"\n")); err != nil {
		return &InfraError{Op: "configure", Err: err}
	}
	return nil
}

// configuredBefore says whether the build directory was configured for
// the same lab from a tree whose Kconfig files equal this one's (its
// stamp says so), and takes whether it has modules from the stamp.
func (j *job) configuredBefore() (bool, error) {
	stamp, err := os.ReadFile(j.stamp)
	if err != nil {
		return false, nil
	}
	f := strings.Fields(string(stamp))
	if len(f) != 3 || f[0] != j.cfgHash || !plumbing.IsHash(f[1]) {
		return false, nil
	}
	same, err := sameKconfig(j.req.Objects, plumbing.NewHash(f[1]), j.req.Tree)
	if err != nil || !same {
		return false, err
	}
	j.modules = f[2] == "y"
	return true, nil
}

// makeConfig runs the tree's config machinery in the sandbox: the lab's
// base (a file, or a make target), the tree's fragments, then the lab's
// fragments merged, into the configuration directory's .config.
func (j *job) makeConfig(ctx context.Context) error {
	sb := j.sandbox(j.cfgDir)
	lab := j.req.Lab
	run := func(argv ...string) error {
		fmt.Fprintf(j.log, "$ %s\n", strings.Join(argv, " "))
		err := sb.Run(ctx, j.log, argv...)
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			// The tree's own config machinery failed: its fault, like a
			// compile error (a broken Kconfig).
			return j.buildError("config", err)
		}
		return err
	}
	if lab.BaseFile != "" {
		b, err := os.ReadFile(lab.BaseFile)
		if err != nil {
			return fmt.Errorf("kbuild: base config: %w", err)
		}
		if err := writeNewFile(filepath.Join(j.cfgDir, ".config"), b, 0o644); err != nil {
			return &InfraError{Op: "configure", Err: err}
		}
		if err := run(j.makeArgs("olddefconfig")...); err != nil {
			return err
		}
	} else if err := run(j.makeArgs(lab.Base)...); err != nil {
		return err
	}
	for _, f := range lab.TreeFragments {
		if err := run(j.makeArgs(f)...); err != nil {
			return err
		}
	}
	if len(lab.Fragments) > 0 {
		merge := []string{"sh", sandboxSrc + "/scripts/kconfig/merge_config.sh", "-m", "-O", sandboxOut, sandboxOut + "/.config"}
		for _, f := range lab.Fragments {
			b, err := Fragment(f)
			if err != nil {
				return err
			}
			// The runs before may have planted a symlink at this name.
			if err := writeNewFile(filepath.Join(j.cfgDir, f), b, 0o644); err != nil {
				return j.sandboxFault("configure", err)
			}
			merge = append(merge, sandboxOut+"/"+f)
		}
		if err := run(merge...); err != nil {
			return err
		}
		if err := run(j.makeArgs("olddefconfig")...); err != nil {
			return err
		}
	}
	return nil
}

// sandboxFault is a host file operation on something the build left that
// failed: a symlink or FIFO where a file belongs, a file too big. The
// tree did it, so it is a failed build, not the machine's fault.
func (j *job) sandboxFault(step string, err error) error {
	fmt.Fprintf(j.log, "rdmabot: %s: %v\n", step, err)
	return &BuildError{Tree: j.req.Tree.String(), Target: step, Tail: err.Error(), Log: j.logPath}
}

// sameKconfig says whether trees a and b cannot configure differently:
// no Kconfig file, config target or kconfig tool differs between them.
func sameKconfig(objs storer.EncodedObjectStorer, a, b plumbing.Hash) (bool, error) {
	if a == b {
		return true, nil
	}
	// A directory added or removed whole is listed once; a Kconfig in it
	// only counts when a listed Kconfig sources it.
	changed, err := ChangedPaths(objs, a, b)
	if err != nil {
		return false, err
	}
	for _, p := range changed {
		base := p[strings.LastIndexByte(p, '/')+1:]
		if strings.HasPrefix(base, "Kconfig") ||
			strings.HasPrefix(p, "scripts/kconfig/") || strings.HasPrefix(p, "kernel/configs/") ||
			strings.HasPrefix(p, "arch/x86/configs/") || p == "Makefile" || p == "scripts/Makefile.compiler" {
			return false, nil
		}
	}
	return true, nil
}

// make runs the build proper and, for a modular kernel, installs the
// modules into the output directory.
func (j *job) make(ctx context.Context) error {
	targets := []string{"bzImage"}
	if j.modules {
		targets = append(targets, "modules")
	}
	sb := j.sandbox(j.out)
	argv := j.makeArgs(targets...)
	fmt.Fprintf(j.log, "$ %s\n", strings.Join(argv, " "))
	err := sb.Run(ctx, j.log, argv...)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return j.buildError(strings.Join(targets, " "), err)
		}
		return err
	}
	if !j.modules {
		return nil
	}
	modDir := filepath.Join(j.out, ".rdmabot-modules")
	if err := os.RemoveAll(modDir); err != nil {
		return &InfraError{Op: "modules", Err: err}
	}
	argv = j.makeArgs("modules_install", "INSTALL_MOD_PATH="+sandboxOut+"/.rdmabot-modules", "INSTALL_MOD_STRIP=1")
	fmt.Fprintf(j.log, "$ %s\n", strings.Join(argv, " "))
	if err := sb.Run(ctx, j.log, argv...); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return j.buildError("modules_install", err)
		}
		return err
	}
	return nil
}

// buildError turns a failed make (err holds its *exec.ExitError) into
// the right typed error. The machine's fault is decided from the host:
// its disk nearly full, or, for a trusted tree only, a compiler killed
// or the log's word for it; an untrusted tree's failure is the tree's,
// whatever it prints or however it dies (the memory limit included:
// its base built within it).
func (j *job) buildError(target string, err error) error {
	var ee *exec.ExitError
	errors.As(err, &ee)
	var oom *OOMError
	isOOM := errors.As(err, &oom)
	// A build that filled the host's disk between two looks of the
	// watch is over its own limit: its doing, not the host's.
	if j.own != "" {
		if de := overDisk(j.own, j.b.limits.Disk, j.b.limits.Files); de != nil {
			return &BuildError{Tree: j.req.Tree.String(), Target: "disk", Tail: de.Error(), Log: j.logPath}
		}
	}
	if hostDiskLow(j.b.opt.Dir) {
		return &InfraError{Op: "make", Err: fmt.Errorf("make %s failed with the host's disk nearly full (%s)", target, j.b.opt.Dir)}
	}
	signaled := false
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signaled = true
		if j.req.Trusted {
			return &InfraError{Op: "make", Err: fmt.Errorf("make %s killed by %v", target, ws.Signal())}
		}
	}
	if isOOM && j.req.Trusted {
		return &InfraError{Op: "make", Err: fmt.Errorf("make %s: %w", target, oom)}
	}
	if j.logFile != nil {
		j.logFile.Sync()
	}
	logText, rerr := readRegular(j.logPath, j.b.limits.Log+4096)
	if rerr != nil && j.b.limits.Log < 0 {
		logText, rerr = os.ReadFile(j.logPath)
	}
	if rerr != nil {
		return &InfraError{Op: "make", Err: rerr}
	}
	if j.req.Trusted {
		for _, sign := range []string{"No space left on device", "Cannot allocate memory", "Killed signal terminated program", "virtual memory exhausted"} {
			if bytes.Contains(logText, []byte(sign)) {
				return &InfraError{Op: "make", Err: fmt.Errorf("make %s: %s (see %s)", target, sign, j.logPath)}
			}
		}
	}
	tail := logText
	if len(tail) > 4096 {
		tail = tail[len(tail)-4096:]
	}
	if isOOM {
		tail = append(tail, "\nrdmabot: "+oom.Error()+"\n"...)
	} else if signaled {
		tail = append(tail, "\nrdmabot: "+ee.String()+"\n"...)
	}
	// ccache's base_dir makes the compiler see the source relative to
	// the output directory: ../src/...
	errs, warnings := ParseLog(bytes.NewReader(logText), sandboxSrc+"/", "../src/")
	return &BuildError{
		Tree:        j.req.Tree.String(),
		Target:      target,
		Diagnostics: errs,
		Warnings:    warnings,
		Tail:        string(tail),
		Log:         j.logPath,
	}
}

// TimeoutError is the cause of a build that ran past Options.Timeout.
type TimeoutError struct{ Timeout time.Duration }

func (e *TimeoutError) Error() string { return fmt.Sprintf("build timeout %v", e.Timeout) }

// diskPoll is how often an untrusted build's disk use is measured.
var diskPoll = 5 * time.Second

// verdict gives an untrusted tree's timeout or disk overrun as what it
// is, a build that failed (a hang, a runaway), not the machine's fault,
// unless the caller gave up first. A trusted tree's stay infrastructure:
// the tree is known to build.
func (j *job) verdict(err error) error {
	if err == nil || j.req.Trusted || j.parent.Err() != nil {
		return err
	}
	var te *TimeoutError
	var de *diskLimitError
	switch {
	case errors.As(err, &te):
		return &BuildError{Tree: j.req.Tree.String(), Target: "timeout", Tail: te.Error(), Log: j.logPath}
	case errors.As(err, &de):
		return &BuildError{Tree: j.req.Tree.String(), Target: "disk", Tail: de.Error(), Log: j.logPath}
	}
	return err
}

// artifactFiles names what the store keeps, by store name.
func (j *job) artifactFiles() map[string]string {
	f := map[string]string{
		"bzImage":    filepath.Join(j.out, "arch", archDir(j.req.Lab.Arch), "boot", "bzImage"),
		"System.map": filepath.Join(j.out, "System.map"),
		"config":     filepath.Join(j.out, ".config"),
		"build.log":  j.logPath,
	}
	if j.modules {
		f["modules"] = filepath.Join(j.out, ".rdmabot-modules")
	}
	if j.req.Lab.DebugInfo() {
		// Its line tables decode the crashes of the kernel's boots.
		f["vmlinux"] = filepath.Join(j.out, "vmlinux")
	}
	return f
}

// checkArtifacts refuses artifacts the store must not copy: a kernel
// image that is not one, anything not a regular file, too big, or
// reached through a symlink; in the modules tree, FIFOs and devices; and
// sparse files (see maxArtifactHoles).
func (j *job) checkArtifacts() error {
	var holes holeTally
	for name, p := range j.artifactFiles() {
		if name == "bzImage" {
			if err := CheckKernelImage(p); err != nil {
				return err
			}
		}
		if name == "modules" {
			if err := checkModulesTree(p, &holes); err != nil {
				return err
			}
			continue
		}
		if err := holes.add(p, name); err != nil {
			return err
		}
	}
	return holes.check()
}

// checkModulesTree accepts a directory holding directories, symlinks
// (copied only when local) and regular files, whose holes it tallies.
func checkModulesTree(dir string, holes *holeTally) error {
	fd, err := safefile.OpenDirNoFollow(dir)
	if err != nil {
		return err
	}
	syscall.Close(fd)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		t := d.Type()
		if t&^(fs.ModeDir|fs.ModeSymlink) != 0 {
			return fmt.Errorf("%s: %w", p, safefile.ErrNotRegular)
		}
		if t.IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			return holes.add(p, filepath.Join("modules", rel))
		}
		return nil
	})
}

// maxArtifactHoles bounds the holes in one artifact's files together.
// The build's disk limit counts the blocks it wrote, but the store's
// copy writes a file's every byte: a file truncated to 600 MiB costs
// the build nothing and the store 600 MiB. A kernel's stored files have
// none (the lab kernel's bzImage, System.map and .config; only vmlinux,
// which is not stored, has ld's alignment gaps, 4.7 MiB of its 19), so
// little is allowed: what a file system that stores zeros as holes
// might make of a kernel's few runs of zeros.
const maxArtifactHoles = 16 << 20

// holeTally adds up the holes of an artifact's files.
type holeTally struct {
	total       int64
	worst       string // the store name of the file with the most
	worstHoles  int64
	worstLength int64
}

// add opens p, stored as name, as safefile.OpenRegular does (at most
// maxArtifactFile bytes) and counts its holes.
func (h *holeTally) add(p, name string) error {
	f, fi, err := safefile.OpenRegular(p, maxArtifactFile)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := holeBytes(f, fi.Size())
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	h.total += n
	if n > h.worstHoles {
		h.worst, h.worstHoles, h.worstLength = name, n, fi.Size()
	}
	return nil
}

func (h *holeTally) check() error {
	if h.total <= maxArtifactHoles {
		return nil
	}
	return fmt.Errorf("%s is a sparse file: %d bytes long, %d of them never written (holes); an artifact may hold at most %d MiB of holes, since the store would write them out",
		h.worst, h.worstLength, h.worstHoles, maxArtifactHoles>>20)
}

// lseek's whence values that find a file's data and holes (Linux).
const (
	seekData = 3
	seekHole = 4
)

// holeBytes counts the bytes of f, size bytes long, that lie in holes:
// read as zeros, never stored. The file's data extents are asked for
// (SEEK_DATA, SEEK_HOLE) rather than its allocated blocks compared with
// its size, which a compressing file system makes smaller than the size
// of a file without a hole.
func holeBytes(f *os.File, size int64) (int64, error) {
	var holes, off int64
	for off < size {
		data, err := f.Seek(off, seekData)
		if errors.Is(err, syscall.ENXIO) { // no data past off
			return holes + size - off, nil
		}
		if err != nil {
			return 0, err
		}
		holes += data - off
		if off, err = f.Seek(data, seekHole); err != nil {
			return 0, err
		}
	}
	return holes, nil
}

// archDir maps make's ARCH to its arch/ directory.
func archDir(arch string) string {
	switch arch {
	case "x86_64", "i386":
		return "x86"
	}
	return arch
}

// ccacheStats reads ccache's counters; zero without ccache.
func (b *Builder) ccacheStats(ctx context.Context) CCacheStats {
	if b.opt.CCacheDir == "" {
		return CCacheStats{}
	}
	cmd := exec.CommandContext(ctx, "ccache", "--print-stats")
	cmd.Env = append(os.Environ(), "CCACHE_DIR="+b.opt.CCacheDir, "CCACHE_CONFIGPATH="+b.ccacheConf)
	out, err := cmd.Output()
	if err != nil {
		return CCacheStats{}
	}
	var s CCacheStats
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(strings.TrimSpace(v))
		switch k {
		case "direct_cache_hit", "preprocessed_cache_hit":
			s.Hits += n
		case "cache_miss":
			s.Misses += n
		}
	}
	return s
}

// ccacheLogStats counts an untrusted build's hits and misses in its
// ccache statistics log (one counter name a line), read within bounds.
func (j *job) ccacheLogStats() CCacheStats {
	var s CCacheStats
	if j.statsDir == "" {
		return s
	}
	b, err := readRegular(filepath.Join(j.statsDir, "ccache.log"), 64<<20)
	if err != nil {
		return s
	}
	for _, line := range strings.Split(string(b), "\n") {
		switch line {
		case "direct_cache_hit", "preprocessed_cache_hit":
			s.Hits++
		case "cache_miss":
			s.Misses++
		}
	}
	return s
}

func (s CCacheStats) since(before CCacheStats) CCacheStats {
	return CCacheStats{Hits: s.Hits - before.Hits, Misses: s.Misses - before.Misses}
}

// lockFile takes an exclusive lock on path, waiting while ctx allows; a
// lock that cannot be had is the machine's fault, not the series'.
func lockFile(ctx context.Context, path string) (func(), error) {
	release, err := flock.Exclusive(ctx, path)
	if err != nil {
		return nil, &InfraError{Op: "lock", Err: err}
	}
	return release, nil
}
