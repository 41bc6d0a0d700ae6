package main

import (
	"context"
	"fmt"

	"github.com/rdmabot/rdmabot/wire"
)

func runConfig(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("%w: rdmabot config check [--config FILE]", errUsage)
	}
	fs := newFlags(e, "config check")
	path := fs.String("config", "config.toml", "config file")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if _, err := wire.Load(*path); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s: ok\n", *path)
	return nil
}
