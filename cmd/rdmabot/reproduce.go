package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/wire"
)

const reproduceUsage = "rdmabot reproduce --test ID [--out DIR] [--config FILE]"

// runReproduce writes a test's reproducer bundle, the same the dashboard
// serves at /tests/ID/reproducer.tar.gz, into a directory.
func runReproduce(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "reproduce")
	path := fs.String("config", "config.toml", "config file")
	test := fs.String("test", "", "the test's id (rdmabot status, the dashboard)")
	out := fs.String("out", ".", "directory to write the bundle's directory (rdmabot-test-ID) into")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id, err := strconv.ParseInt(*test, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s", errUsage, reproduceUsage)
	}
	cfg, st, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := wire.NewReproducer(cfg, st, readVersion().String())
	if err != nil {
		return err
	}
	b, err := r.Bundle(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		// --test names no test, or one with no reproducer: the caller's
		// to fix, as any usage error.
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if err != nil {
		return err
	}
	dir, err := b.WriteDir(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s: run %s/run.sh to redo test %d without rdmabot's server or database\n", dir, dir, id)
	return nil
}
