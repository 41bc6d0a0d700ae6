package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/redact"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/lore/feed"
	"github.com/rdmabot/rdmabot/wire"
)

// loadConfigOrDefault reads path, or returns the built-in defaults when
// path is empty.
func loadConfigOrDefault(path string) (wire.Config, error) {
	if path == "" {
		return wire.Default(), nil
	}
	return wire.Load(path)
}

const treeUsage = `rdmabot tree import --tarball FILE --name NAME [--data-dir DIR] [--config FILE]
rdmabot tree fetch [--name NAME] [--data-dir DIR] [--config FILE]
rdmabot tree list [--json] [--data-dir DIR] [--config FILE]`

func runTree(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, treeUsage)
	}
	fs := newFlags(e, "tree "+args[0])
	cfgPath := fs.String("config", "", "config file (default: built-in defaults)")
	dataDir := fs.String("data-dir", "", "data directory (default: data_dir of the config)")
	var tarball, name *string
	asJSON := new(bool)
	switch args[0] {
	case "import":
		tarball = fs.String("tarball", "", "kernel source tarball (.tar, .tar.gz, .tar.xz)")
		name = fs.String("name", "", "tree name")
	case "fetch":
		name = fs.String("name", "", "only this configured tree")
	case "list":
		asJSON = fs.Bool("json", false, "print JSON")
	default:
		return fmt.Errorf("%w: %s", errUsage, treeUsage)
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	cfg, err := loadConfigOrDefault(*cfgPath)
	if err != nil {
		return err
	}
	if *dataDir == "" {
		*dataDir = cfg.DataDir
	}
	st, err := builder.OpenStore(builder.StorePath(*dataDir))
	if err != nil {
		return err
	}
	switch args[0] {
	case "import":
		if *tarball == "" || *name == "" {
			return fmt.Errorf("%w: %s", errUsage, treeUsage)
		}
		start := time.Now()
		imp, err := st.ImportTarball(ctx, *tarball, *name, cfg.Builder.Committer)
		if err != nil {
			return err
		}
		e.log.Info("imported", "tarball", *tarball, "files", imp.Files, "elapsed", time.Since(start).Round(time.Millisecond))
		fmt.Fprintf(e.stdout, "repo %s\nref %s\ntag %s\ncommit %s\ntree %s\n", st.Dir, imp.Ref, imp.Tag, imp.Commit, imp.Tree)
	case "fetch":
		for _, t := range cfg.Builder.Trees {
			if *name != "" && t.Name != *name {
				continue
			}
			if t.URL == "" {
				e.log.Info("not fetched: no url (an imported tree)", "tree", t.Name)
				continue
			}
			start := time.Now()
			if err := st.Fetch(ctx, t); err != nil {
				return err
			}
			e.log.Info("fetched", "tree", t.Name, "url", redact.URLs(t.URL), "elapsed", time.Since(start).Round(time.Millisecond))
		}
		fallthrough
	case "list":
		bs, err := st.Branches()
		if err != nil {
			return err
		}
		if *asJSON {
			out := []branchJSON{}
			for _, b := range bs {
				out = append(out, toBranchJSON(b))
			}
			return writeJSON(e, out)
		}
		for _, b := range bs {
			fmt.Fprintf(e.stdout, "%s %s/%s\n", b.Commit, b.Tree, b.Branch)
		}
	}
	return nil
}

const applyUsage = `rdmabot apply --repo DIR --base REV --mbox FILE [--ref NAME] [--scissors] [--committer-date RFC3339] [--config FILE]`

func runApply(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "apply")
	cfgPath := fs.String("config", "", "config file (default: built-in defaults)")
	repo := fs.String("repo", "", "git repository (bare or not)")
	base := fs.String("base", "", "base revision")
	mbox := fs.String("mbox", "", "mbox with the patches, in order")
	ref := fs.String("ref", "", "ref to point at the last commit (e.g. refs/rdmabot/<series>/v1)")
	scissors := fs.Bool("scissors", false, `honour "-- >8 --" lines as git am --scissors`)
	date := fs.String("committer-date", "", "committer date (RFC 3339), to compare commit ids with git am; default now")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *repo == "" || *base == "" || *mbox == "" {
		return fmt.Errorf("%w: %s", errUsage, applyUsage)
	}
	cfg, err := loadConfigOrDefault(*cfgPath)
	if err != nil {
		return err
	}
	now := time.Now
	if *date != "" {
		t, err := time.Parse(time.RFC3339, *date)
		if err != nil {
			return fmt.Errorf("%w: --committer-date: %v", errUsage, err)
		}
		now = func() time.Time { return t }
	}
	var msgs []*flow.Message
	src := &feed.Mbox{Path: *mbox, Log: e.log}
	if _, err := src.Read(ctx, "", func(it feed.Item) error {
		m, err := lore.ParseMessage(it.Raw)
		if err != nil {
			return fmt.Errorf("%s: message %d: %w", *mbox, len(msgs)+1, err)
		}
		msgs = append(msgs, m)
		return nil
	}); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return fmt.Errorf("%s: no messages", *mbox)
	}
	st, err := builder.OpenRepo(*repo)
	if err != nil {
		return err
	}
	c, err := st.Resolve(*base)
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := st.Apply(ctx, c.Hash, msgs, builder.ApplyOptions{
		Committer: cfg.Builder.Committer,
		Now:       now,
		Scissors:  *scissors,
		Ref:       plumbing.ReferenceName(*ref),
	})
	if err != nil {
		return err
	}
	e.log.Info("applied", "patches", len(res.Commits), "elapsed", time.Since(start).Round(time.Millisecond))
	for i, id := range res.Commits {
		fmt.Fprintf(e.stdout, "commit %s %s\n", id, msgs[i].Subject)
	}
	fmt.Fprintf(e.stdout, "tree %s\n", res.Tree)
	return nil
}
