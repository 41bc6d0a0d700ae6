package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmabot/rdmabot/wire"
)

// runConfig checks a config file with the validation serve runs at
// start (wire.Load): what it refuses, serve refuses.
func runConfig(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("%w: rdmabot config check [--config FILE] [--json]", errUsage)
	}
	fs := newFlags(e, "config check")
	path := fs.String("config", "config.toml", "config file")
	asJSON := fs.Bool("json", false, "print JSON: path, ok and every problem")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	_, err := wire.Load(*path)
	if *asJSON {
		if werr := writeJSON(e, configCheckJSON{Path: *path, OK: err == nil, Problems: problems(err)}); werr != nil {
			return werr
		}
		if err != nil {
			return needsAttention(nil)
		}
		return nil
	}
	if err != nil {
		return needsAttention(err)
	}
	fmt.Fprintf(e.stdout, "%s: ok\n", *path)
	return nil
}

// problems are err's joined errors one by one (the sections' checks),
// or err itself when it is one.
func problems(err error) []string {
	if err == nil {
		return []string{}
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range joined.Unwrap() {
		out = append(out, problems(e)...)
	}
	return out
}
