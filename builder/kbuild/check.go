package kbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/rdmabot/rdmabot/internal/flock"
)

// CheckTimeout bounds a check's compile (or Options.Timeout, when
// shorter): a file that takes longer alone is the full build's to judge.
const CheckTimeout = 10 * time.Minute

// CheckResult is what a quick check compiled, or why it compiled nothing.
type CheckResult struct {
	// Objects are the objects compiled (make targets), in path order.
	Objects []string
	// Skipped says why nothing was compiled ("" when Objects were).
	Skipped string
	// Timings: Wait (the check lock), Seed (the copy of the slot's
	// output tree), Sync, Make and Total.
	Timings Timings
	// Log is the check's make log.
	Log string
	// Unchanged says the series changes no generated code: every file
	// it changes is a C file compiled into Objects and named by no other
	// build command, and each object is, byte for byte, the one its base
	// compiles to. The kernel is then the base's.
	Unchanged bool
	// Differs says why Unchanged is false once Objects compiled (the
	// series changes another file, an object differs); "" otherwise.
	Differs string
}

// Check compiles, alone, the objects of the C files that req.Tree (an
// untrusted tree: a series applied) changes from base, in a throwaway
// copy of the slot's output tree, and nothing else: a series that does
// not compile is found in seconds, while full builds wait for the heavy
// lock behind lab boots. It takes neither the slot's lock nor the heavy
// lock; checks run one at a time per slot and lab, in a checkout of
// their own.
//
// It compiles only what a full build of req would compile the same way,
// so that a failure here is the full build's failure: nothing when the
// slot's output tree is not configured for req's lab from a tree with
// req's Kconfig files (the full build would configure anew), when a
// trusted build is writing it, when req changes a Kconfig file or a
// makefile, or when
// the configuration builds none of the changed C files (no .o.cmd for
// it in the tree). Errors: *BuildError (the tree does not compile),
// *InfraError.
func (b *Builder) Check(ctx context.Context, req Request, base plumbing.Hash) (*CheckResult, error) {
	start := time.Now()
	res := &CheckResult{}
	if req.Trusted {
		return nil, errors.New("kbuild: Check is for untrusted trees")
	}
	configHash, err := req.Lab.ConfigHash()
	if err != nil {
		return nil, err
	}
	slotDir, err := b.slotDir(req.Slot)
	if err != nil {
		return nil, err
	}
	checkDir := filepath.Join(slotDir, "check-"+req.Lab.Name)
	if err := os.MkdirAll(checkDir, 0o755); err != nil {
		return nil, &InfraError{Op: "check", Err: err}
	}
	unlock, err := lockFile(ctx, filepath.Join(checkDir, "lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	res.Timings.Wait = time.Since(start)
	defer func() { res.Timings.Total = time.Since(start) }()

	// The C files the candidate has and changed; a changed Kconfig or
	// makefile could change what or how the full build compiles. Any
	// other change (a header, a deleted file) may change code the check
	// does not compile.
	var sources, others []string
	var buildFile string
	err = walkDiff(req.Objects, "", base, req.Tree, func(p string, _, cand *object.TreeEntry) error {
		switch name := path.Base(p); {
		case strings.HasPrefix(name, "Kconfig") || name == "Makefile" || name == "Kbuild":
			if buildFile == "" {
				buildFile = p
			}
		case strings.HasSuffix(name, ".c") && cand != nil && cand.Mode.IsFile():
			sources = append(sources, p)
		default:
			others = append(others, p)
		}
		return nil
	})
	if err != nil {
		return nil, &InfraError{Op: "check", Err: err}
	}
	if buildFile != "" {
		res.Skipped = "the series changes " + buildFile
		return res, nil
	}
	if len(sources) == 0 {
		res.Skipped = "the series changes no C file"
		return res, nil
	}

	mainOut := filepath.Join(slotDir, "out-"+req.Lab.Name)
	unlockOut, ok, err := flock.TryShared(mainOut + ".lock")
	if err != nil {
		return nil, &InfraError{Op: "check", Err: err}
	}
	if !ok {
		res.Skipped = "a trusted build is writing the slot's output tree"
		return res, nil
	}
	release := sync.OnceFunc(unlockOut)
	defer release()
	j := &job{b: b, req: req, res: &Result{}, out: mainOut, stamp: mainOut + ".stamp",
		logPath: filepath.Join(checkDir, "check.log"), cfgHash: configHash, parent: ctx}
	if done, err := j.configuredBefore(); err != nil || !done {
		if err != nil {
			return nil, &InfraError{Op: "check", Err: err}
		}
		res.Skipped = "the slot's output tree is not configured for this tree's Kconfig files"
		return res, nil
	}
	for _, src := range sources {
		obj := strings.TrimSuffix(src, ".c") + ".o"
		cmd := filepath.Join(mainOut, filepath.Dir(obj), "."+filepath.Base(obj)+".cmd")
		if st, err := os.Lstat(cmd); err == nil && st.Mode().IsRegular() {
			res.Objects = append(res.Objects, obj)
		}
	}
	if len(res.Objects) == 0 {
		res.Skipped = "the configuration builds none of the C files the series changes"
		return res, nil
	}

	var undo []func()
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}()
	t := time.Now()
	// The copy is the check's own, from here on: the trusted tree may be
	// written again.
	ctx, err = j.isolate(ctx, checkDir, &undo)
	release()
	if err != nil {
		return nil, err
	}
	res.Timings.Seed = time.Since(t)

	t = time.Now()
	if j.co, err = OpenCheckout(checkDir); err != nil {
		return nil, err
	}
	if _, err := j.co.Sync(ctx, req.Objects, req.Tree); err != nil {
		return nil, err
	}
	res.Timings.Sync = time.Since(t)

	closeLog, err := j.openLog()
	if err != nil {
		return nil, err
	}
	defer closeLog()
	res.Log = j.logPath
	// The check lane waits for no build, so nothing may hold it long: a
	// compile past its bound leaves the verdict to the full build.
	limit := CheckTimeout
	if b.opt.Timeout > 0 && b.opt.Timeout < limit {
		limit = b.opt.Timeout
	}
	makeCtx, cancel := context.WithTimeoutCause(ctx, limit, &TimeoutError{Timeout: limit})
	defer cancel()
	t = time.Now()
	// On the CPU only when nothing else wants it (SCHED_IDLE, nice 19):
	// a lab boot beside it, whose guests take about two thirds of the
	// cores, is not slowed into being booted again for contention.
	argv := append(append([]string(nil), b.idle...), j.makeArgs(res.Objects...)...)
	fmt.Fprintf(j.log, "$ %s\n", strings.Join(argv, " "))
	if err := j.sandbox(j.out).Run(makeCtx, j.log, argv...); err != nil {
		var te *TimeoutError
		if ctx.Err() == nil && errors.As(context.Cause(makeCtx), &te) {
			res.Objects = nil
			res.Skipped = fmt.Sprintf("the compile ran past %v", limit)
			return res, nil
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = j.buildError(strings.Join(res.Objects, " "), err)
		}
		return nil, j.verdict(err)
	}
	res.Timings.Make = time.Since(t)
	switch {
	case len(others) > 0:
		res.Differs = "the series changes files other than the C files compiled (" + others[0] + ")"
	case len(res.Objects) < len(sources):
		res.Differs = "the configuration does not build every C file the series changes"
	default:
		// Within what is left of the compile's bound: the base's
		// objects are mostly hits of the trusted build's compiler cache.
		res.Differs, err = j.compareWithBase(makeCtx, res.Objects, sources, base)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			res.Differs = "the base's objects could not be compared: " + err.Error()
		}
		res.Unchanged = res.Differs == ""
	}
	b.opt.Log.Info("kernel checked", "tree", req.Tree, "lab", req.Lab.Name, "objects", res.Objects, "unchanged", res.Unchanged,
		"wait", res.Timings.Wait, "seed", res.Timings.Seed, "sync", res.Timings.Sync, "make", res.Timings.Make)
	return res, nil
}

// compareWithBase compiles objects again from the base tree, in the
// check's copy, and says which one differs from the candidate's ("" when
// none does). A source some other build command names (a C file another
// one includes, a file compiled twice) differs too: its other users are
// not compiled here.
func (j *job) compareWithBase(ctx context.Context, objects, sources []string, base plumbing.Hash) (string, error) {
	if who, err := otherUsers(j.out, objects, sources); err != nil || who != "" {
		return who, err
	}
	cand := make([][]byte, len(objects))
	for i, obj := range objects {
		b, err := os.ReadFile(filepath.Join(j.out, obj))
		if err != nil {
			return "", err
		}
		cand[i] = b
		// Gone, so make compiles the base's: the candidate's is never
		// compared with itself.
		if err := os.Remove(filepath.Join(j.out, obj)); err != nil {
			return "", err
		}
	}
	if _, err := j.co.Sync(ctx, j.req.Objects, base); err != nil {
		return "", err
	}
	argv := append(append([]string(nil), j.b.idle...), j.makeArgs(objects...)...)
	fmt.Fprintf(j.log, "# the base's objects, to compare\n$ %s\n", strings.Join(argv, " "))
	if err := j.sandbox(j.out).Run(ctx, j.log, argv...); err != nil {
		return "", fmt.Errorf("make: %w", err)
	}
	for i, obj := range objects {
		b, err := os.ReadFile(filepath.Join(j.out, obj))
		if err != nil {
			return "", err
		}
		if !bytes.Equal(b, cand[i]) {
			return obj + " differs from the base's", nil
		}
	}
	return "", nil
}

// otherUsers says which build command other than an object's own names
// one of sources ("" when none does), from the .cmd files kbuild keeps
// in out: such a command compiles or includes it, and would change with
// it unseen.
func otherUsers(out string, objects, sources []string) (string, error) {
	own := map[string]bool{}
	for _, obj := range objects {
		own[filepath.Join(filepath.Dir(obj), "."+filepath.Base(obj)+".cmd")] = true
	}
	var who string
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), ".") || !strings.HasSuffix(d.Name(), ".cmd") {
			return nil
		}
		rel, err := filepath.Rel(out, p)
		if err != nil || own[rel] {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, src := range sources {
			if bytes.Contains(b, []byte(src)) {
				who = src + " is named by " + rel + " too"
				return fs.SkipAll
			}
		}
		return nil
	})
	return who, err
}
