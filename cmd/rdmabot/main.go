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
	"strings"
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
	// help is set when the arguments ask for help (-h, -help, --help):
	// usage then goes to stdout and the exit status is 0.
	help bool
}

// The exit statuses: a contract scripts rely on, written out in
// exitCodes (rdmabot -h) and docs/operating.md's "Command line".
const (
	exitOK        = 0
	exitAttention = 1
	exitUsage     = 2
	exitFailure   = 3
)

const exitCodes = `exit status:
  0  done; with test --wait, the test passed (PASS, IMPROVEMENT)
  1  done, but the answer needs attention: test --wait ended in another verdict, or
     failed or was canceled without one; config check found the config invalid
  2  usage error: unknown command or flag, missing or extra argument, a flag value
     that names nothing (bisect's tree or refs, reproduce's test); nothing was done
  3  the command failed: config not loaded, database, files, network, interrupted`

// errUsage marks a usage error: the message is printed, exit status 2.
var errUsage = errors.New("usage")

// exitError ends a command with code. run prints err unless it is nil:
// what was wrong is already printed (the flag package's message and
// usage, a --json answer).
type exitError struct {
	code int
	err  error
}

func (x *exitError) Error() string {
	if x.err == nil {
		return fmt.Sprintf("exit status %d", x.code)
	}
	return x.err.Error()
}

func (x *exitError) Unwrap() error { return x.err }

// needsAttention ends a command that did its work with an answer that is
// not a pass (exit 1); err says why, nil when the output already does.
func needsAttention(err error) error { return &exitError{code: exitAttention, err: err} }

// exitStatus prints err (unless it is already shown) and maps it to the
// exit status.
func exitStatus(stderr io.Writer, name string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	code := exitFailure
	var x *exitError
	switch {
	case errors.As(err, &x):
		code = x.code
		if x.err == nil {
			return code
		}
	case errors.Is(err, errUsage):
		code = exitUsage
	}
	fmt.Fprintf(stderr, "rdmabot %s: %v\n", name, err)
	return code
}

// parseFlags parses a command's flags; it takes no positional argument,
// so one left over (a typo, or a flag after it, which the flag package
// stops at) is a usage error rather than silently ignored.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (flags go first; rdmabot %s --help)", errUsage, fs.Arg(0), strings.TrimPrefix(fs.Name(), "rdmabot "))
	}
	return nil
}

// parseFlagsArgs parses flags and leaves positional arguments in
// fs.Args(). The flag package has already printed a bad flag with the
// usage, so that error is not printed again.
func parseFlagsArgs(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &exitError{code: exitUsage}
}

func commands() map[string]command {
	return map[string]command{
		"config":    {"check a config file as serve does (exit 1 when it would refuse it): rdmabot config check [--config FILE] [--json]", runConfig},
		"build":     {"build a lab kernel: rdmabot build --repo DIR [--rev REV] [--lab qemu] [--out DIR]", runBuild},
		"tree":      {"import, fetch and list kernel trees: rdmabot tree import|fetch|list [--json]", runTree},
		"apply":     {"apply an mbox with go-git as git am would: rdmabot apply --repo DIR --base REV --mbox FILE", runApply},
		"lab":       {"guest image, pair runs, benchmarks: rdmabot lab image|run|compare|bench|aa|queue", runLab},
		"latency":   {"post seeded series to a running serve and time each one's answer: " + strings.SplitN(latencyUsage, "\n", 2)[0], runLatency},
		"lore":      {"read a mail source and print the series found: rdmabot lore scan --git DIR|--mbox FILE|--eml-dir DIR|--imap URL [--json]", runLore},
		"outbox":    {"replies waiting to be sent: rdmabot outbox list [--all] [--json] | show ID | approve ID... [--config FILE before IDs]", runOutbox},
		"serve":     {"run the pipeline, dashboard and webhook: rdmabot serve [--config FILE] [--role all|ingest|build|lab]", runServe},
		"test":      {"queue a series for a running server: rdmabot test --mbox FILE | --msgid ID [--wait] [--json]", runTest},
		"bisect":    {"queue a bisection of refs checked in the tree store: rdmabot bisect --tree T --good G --bad B [--json]", runBisect},
		"version":   {"print the module version and VCS revision: rdmabot version [--json]", runVersion},
		"reproduce": {"write a test's reproducer, redone without the bot by its run.sh: " + reproduceUsage, runReproduce},
		"status":    {"tests, bisections, queues and leases: rdmabot status [--n 20] [--json]", runStatus},
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
	if len(args) == 0 {
		usage(stderr, cmds)
		return exitUsage
	}
	if isHelp(args[0]) || args[0] == "help" {
		if len(args) > 1 && args[0] == "help" {
			// rdmabot help CMD is rdmabot CMD --help.
			return run(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout, cmds)
		return exitOK
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "rdmabot: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return exitUsage
	}
	e := &env{
		stdout: stdout,
		stderr: stderr,
		log:    slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		help:   wantsHelp(args[1:]),
	}
	if e.help {
		// Asking for help never runs the command: a subcommand that
		// checks its verb before parsing flags would otherwise act.
		return commandHelp(ctx, e, args[0], cmd, args[1:])
	}
	return exitStatus(stderr, args[0], cmd.run(ctx, e, args[1:]))
}

// isHelp reports whether a is one of the help flags.
func isHelp(a string) bool {
	return a == "-h" || a == "-help" || a == "--help" || a == "--h"
}

// wantsHelp reports whether args ask for help before any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelp(a) {
			return true
		}
	}
	return false
}

// commandHelp prints the usage of one command to stdout and returns 0.
// The command runs with e.help set: its FlagSet prints the flags to
// stdout and Parse stops with flag.ErrHelp before anything is done; a
// command that rejects its verb first returns its usage as errUsage.
//
// Only the verb (a first argument that is not a flag) is kept, followed
// by --help: flags and IDs after it are dropped so that nothing after a
// positional argument (outbox approve ID -h) can be acted upon.
func commandHelp(ctx context.Context, e *env, name string, cmd command, args []string) int {
	var help []string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		help = append(help, args[0])
	}
	help = append(help, "--help")
	err := cmd.run(ctx, e, help)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
		fmt.Fprintf(e.stdout, "usage: %s\n", msg)
	default:
		fmt.Fprintf(e.stdout, "usage: %s\n", cmd.summary)
	}
	return 0
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: rdmabot <command> [flags]")
	fmt.Fprintln(w, "  rdmabot <command> --help prints the flags of a command")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, exitCodes)
}

// newFlags makes a FlagSet that reports errors instead of exiting.
func newFlags(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("rdmabot "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	if e.help {
		fs.SetOutput(e.stdout)
	}
	fs.Usage = func() {
		w := fs.Output()
		top, _, _ := strings.Cut(name, " ")
		if c, ok := commands()[top]; ok {
			fmt.Fprintf(w, "rdmabot %s: %s\n", top, c.summary)
		}
		fmt.Fprintf(w, "usage of rdmabot %s:\n", name)
		fs.VisitAll(func(f *flag.Flag) {
			// One style everywhere: --flag (Go's flag package takes
			// -flag too).
			typ, help := flag.UnquoteUsage(f)
			line := "  --" + f.Name
			if typ != "" {
				line += " " + typ
			}
			fmt.Fprintf(w, "%s\n    \t%s", line, help)
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
				if typ == "string" {
					fmt.Fprintf(w, " (default %q)", f.DefValue)
				} else {
					fmt.Fprintf(w, " (default %s)", f.DefValue)
				}
			}
			fmt.Fprintln(w)
		})
	}
	return fs
}
