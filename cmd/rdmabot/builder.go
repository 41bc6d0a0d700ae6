package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/internal/config"
)

// loadConfigOrDefault reads path, or returns the built-in defaults when
// path is empty.
func loadConfigOrDefault(path string) (config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}

const treeUsage = `rdmabot tree import --tarball FILE --name NAME [--data-dir DIR] [--config FILE]
rdmabot tree fetch [--name NAME] [--data-dir DIR] [--config FILE]
rdmabot tree list [--data-dir DIR] [--config FILE]`

func runTree(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, treeUsage)
	}
	fs := newFlags(e, "tree "+args[0])
	cfgPath := fs.String("config", "", "config file (default: built-in defaults)")
	dataDir := fs.String("data-dir", "", "data directory (default: data_dir of the config)")
	var tarball, name *string
	switch args[0] {
	case "import":
		tarball = fs.String("tarball", "", "kernel source tarball (.tar, .tar.gz, .tar.xz)")
		name = fs.String("name", "", "tree name")
	case "fetch":
		name = fs.String("name", "", "only this configured tree")
	case "list":
	default:
		return fmt.Errorf("%w: %s", errUsage, treeUsage)
	}
	if err := fs.Parse(args[1:]); err != nil {
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
			start := time.Now()
			if err := st.Fetch(ctx, t); err != nil {
				return err
			}
			e.log.Info("fetched", "tree", t.Name, "url", t.URL, "elapsed", time.Since(start).Round(time.Millisecond))
		}
		fallthrough
	case "list":
		bs, err := st.Branches()
		if err != nil {
			return err
		}
		for _, b := range bs {
			fmt.Fprintf(e.stdout, "%s %s/%s\n", b.Commit, b.Tree, b.Branch)
		}
	}
	return nil
}
