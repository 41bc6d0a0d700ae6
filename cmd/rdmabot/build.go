package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/rdmabot/rdmabot/builder/kbuild"
	"github.com/rdmabot/rdmabot/internal/safefile"
	"github.com/rdmabot/rdmabot/wire"
)

func runBuild(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "build")
	repoDir := fs.String("repo", "", "git repository holding the kernel (required)")
	rev := fs.String("rev", "HEAD", "revision to build")
	labName := fs.String("lab", "qemu", "lab whose kernel to build (qemu, opa)")
	baseFile := fs.String("base-config", "", "start from this .config instead of the lab's base target")
	out := fs.String("out", "", "also copy the artifacts into this directory")
	cfgPath := fs.String("config", "", "config file (default: built-in defaults)")
	cacheDir := fs.String("cache-dir", "", "cache directory (default: cache_dir from the config)")
	ccacheDir := fs.String("ccache-dir", "", "ccache directory (default: <cache-dir>/ccache; \"none\" disables ccache)")
	ccacheDepend := fs.Bool("ccache-depend", false, "run ccache in depend mode")
	slot := fs.String("slot", "default", "build slot (persistent checkout) to use")
	jobs := fs.Int("jobs", 0, "make -j (default: builder.jobs from the config)")
	timeout := fs.Duration("timeout", time.Hour, "give up on the build after this long")
	configOnly := fs.Bool("config-only", false, "only make and verify the lab's .config (no make)")
	force := fs.Bool("force", false, "build even when the artifact store has this kernel")
	trusted := fs.Bool("trusted", false, "build as a trusted tree (a configured branch): in the slot's own output tree, adding to ccache; without it the build is isolated like a series'")
	lock := fs.String("lock", "", "flock this file around configure and make (e.g. /var/cache/rdmabot/heavy.lock)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *repoDir == "" {
		return fmt.Errorf("%w: rdmabot build --repo DIR [--rev REV] [--lab qemu] [--out DIR]", errUsage)
	}
	cfg := wire.Default()
	if *cfgPath != "" {
		var err error
		if cfg, err = wire.Load(*cfgPath); err != nil {
			return err
		}
	}
	if *cacheDir == "" {
		*cacheDir = cfg.CacheDir
	}
	if *jobs == 0 {
		*jobs = cfg.Builder.Jobs
	}
	switch *ccacheDir {
	case "":
		*ccacheDir = filepath.Join(*cacheDir, "ccache")
	case "none":
		*ccacheDir = ""
	}
	lab, err := kbuild.LookupLab(*labName)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	lab.BaseFile = *baseFile

	repo, commit, err := openCommit(*repoDir, *rev)
	if err != nil {
		return err
	}

	b, err := kbuild.New(ctx, kbuild.Options{
		Dir:          filepath.Join(*cacheDir, "kbuild"),
		CCacheDir:    *ccacheDir,
		CCacheDepend: *ccacheDepend,
		Jobs:         *jobs,
		Timeout:      *timeout,
		HeavyLock:    *lock,
		Log:          e.log,
	})
	if err != nil {
		return err
	}
	req := kbuild.Request{Objects: repo.Storer, Tree: commit.TreeHash, Lab: lab, Slot: *slot, Force: *force, Trusted: *trusted}
	if *configOnly {
		c, err := b.Configure(ctx, req)
		if err != nil {
			printBuildFailure(e, err)
			return err
		}
		fmt.Fprintf(e.stdout, "config     %s\nmodules    %v\nmade       %v\nsync       %v\ntotal      %v\n",
			c.Config, c.Modules, c.Made, c.Sync.Duration.Round(time.Millisecond), c.Took.Round(time.Millisecond))
		return nil
	}
	res, err := b.Build(ctx, req)
	if err != nil {
		printBuildFailure(e, err)
		return err
	}

	printBuildResult(e.stdout, commit, res)
	if *out == "" {
		return nil
	}
	if err := copyArtifacts(res, *out); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "copied to  %s\n", *out)
	return nil
}

// copyArtifacts copies a build's artifacts into dir (--out).
func copyArtifacts(res *kbuild.Result, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range res.Files {
		// The copy is new, as the store's was: what a run before left
		// under the name goes first.
		dst := filepath.Join(dir, name)
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		if err := safefile.CopyTree(res.Path(name), dst, -1, -1); err != nil {
			return err
		}
	}
	return nil
}

// openCommit opens the repository (a worktree's too) and resolves rev.
func openCommit(repoDir, rev string) (*git.Repository, *object.Commit, error) {
	repo, err := git.PlainOpenWithOptions(repoDir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", repoDir, err)
	}
	commitID, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, nil, fmt.Errorf("resolve %s: %w", rev, err)
	}
	commit, err := repo.CommitObject(*commitID)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", rev, err)
	}
	return repo, commit, nil
}

// printBuildResult says what was built, from where, and where the time went.
func printBuildResult(w io.Writer, commit *object.Commit, res *kbuild.Result) {
	fmt.Fprintf(w, "key        %s\n", res.Key)
	fmt.Fprintf(w, "commit     %s\ntree       %s\nlab        %s\n", commit.Hash, res.Tree, res.Lab)
	fmt.Fprintf(w, "reused     %v\n", res.Reused)
	fmt.Fprintf(w, "compiler   %s\nbuild_id   %s\n", res.Compiler, res.BuildID)
	for _, name := range res.Files {
		fmt.Fprintf(w, "%-10s %s\n", name, res.Path(name))
	}
	if !res.Reused {
		mode := "diff"
		if res.Sync.Full {
			mode = "full compare"
		}
		fmt.Fprintf(w, "wait       %v (the slot's and the heavy lock)\n", res.Timings.Wait.Round(time.Millisecond))
		fmt.Fprintf(w, "sync       %v (%s: %d written, %d removed, %d chmod)\n",
			res.Timings.Sync.Round(time.Millisecond), mode, res.Sync.Written, res.Sync.Removed, res.Sync.Chmodded)
		configured := "reused"
		if res.Configured {
			configured = "made"
		}
		fmt.Fprintf(w, "configure  %v (%s)\n", res.Timings.Configure.Round(time.Millisecond), configured)
		fmt.Fprintf(w, "make       %v (ccache %d hits, %d misses)\n", res.Timings.Make.Round(time.Millisecond), res.CCache.Hits, res.CCache.Misses)
		fmt.Fprintf(w, "store      %v\n", res.Timings.Store.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "total      %v\n", res.Timings.Total.Round(time.Millisecond))
}

// printBuildFailure shows what a report would say about a failed build.
func printBuildFailure(e *env, err error) {
	var be *kbuild.BuildError
	var ce *kbuild.ConfigError
	switch {
	case errors.As(err, &be):
		fmt.Fprintf(e.stdout, "build failed: %s (log %s)\n", be.Target, be.Log)
		for _, d := range be.Diagnostics {
			fmt.Fprintf(e.stdout, "  %s\n", d)
		}
	case errors.As(err, &ce):
		for _, l := range ce.Lost {
			fmt.Fprintf(e.stdout, "config lost: %s\n", l)
		}
	}
}
