// Command rdmabot is the one binary of the bot: it serves the pipeline
// and offers each stage on its own for maintainers and tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand: it parses its own flags from args.
type command struct {
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env is what every subcommand gets: where to write and how to log.
type env struct {
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
}

// errUsage marks a usage error: the message is printed, exit status 2.
var errUsage = errors.New("usage")

func commands() map[string]command {
	return map[string]command{
		"config": {"check a config file: rdmabot config check [-config FILE]", runConfig},
		"build":  {"build a lab kernel: rdmabot build --repo DIR [--rev REV] [--lab qemu] [--out DIR]", runBuild},
		"tree":   {"import, fetch and list kernel trees: rdmabot tree import|fetch|list", runTree},
		"apply":  {"apply an mbox with go-git as git am would: rdmabot apply --repo DIR --base REV --mbox FILE", runApply},
		"lab":    {"guest image, pair runs, benchmark: rdmabot lab image|run|bench", runLab},
		"lore":   {"read a mail source and print the series found: rdmabot lore scan --git DIR|--mbox FILE|--eml-dir DIR|--imap URL [--json]", runLore},
		"outbox": {"replies waiting to be sent: rdmabot outbox list [-all] | show ID | approve ID... [-config FILE before IDs]", runOutbox},
		"serve":  {"run the pipeline, dashboard and webhook: rdmabot serve [-config FILE] [-role all|ingest|build|lab]", runServe},
		"test":   {"queue a series for a running server: rdmabot test --mbox FILE | --msgid ID [--wait]", runTest},
		"bisect": {"queue a bisection: rdmabot bisect --tree T --good G --bad B", runBisect},
		"status": {"tests, bisections, queues and leases: rdmabot status [-n 20]", runStatus},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		return 2
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "rdmabot: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	e := &env{
		stdout: stdout,
		stderr: stderr,
		log:    slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if err := cmd.run(ctx, e, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintf(stderr, "rdmabot %s: %v\n", args[0], err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: rdmabot <command> [flags]")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
}

// newFlags makes a FlagSet that reports errors instead of exiting.
func newFlags(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("rdmabot "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}
