package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rdmabot/rdmabot/reports/outbox"
)

const outboxUsage = "rdmabot outbox list [--all] [--json] | show ID | approve ID... (flags such as --config FILE go before the IDs)"

// runOutbox lets an operator see and release the replies the bot wants
// to send (moderation: they wait until approved).
func runOutbox(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, outboxUsage)
	}
	verb := args[0]
	switch verb {
	case "list", "show", "approve":
	default:
		return fmt.Errorf("%w: %s", errUsage, outboxUsage)
	}
	fs := newFlags(e, "outbox "+verb)
	path := fs.String("config", "config.toml", "config file")
	all := fs.Bool("all", false, "list sent, failed and suppressed replies too")
	asJSON := fs.Bool("json", false, "list: print JSON")
	if err := parseFlagsArgs(fs, args[1:]); err != nil {
		return err
	}
	// The IDs are checked before anything is opened: a usage error does nothing.
	if n := fs.NArg(); verb == "list" && n != 0 || verb == "show" && n != 1 || verb == "approve" && n == 0 {
		return fmt.Errorf("%w: %s", errUsage, outboxUsage)
	}
	cfg, st, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer st.Close()
	ob, err := outbox.Open(ctx, st.DB, &cfg.Reports, cfg.DataDir, nil, time.Now, e.log)
	if err != nil {
		return err
	}
	l := ob.Ledger()
	switch verb {
	case "list":
		states := []outbox.State{outbox.Held, outbox.Ready, outbox.Sending}
		if *all {
			states = nil
		}
		es, err := l.List(ctx, states...)
		if err != nil {
			return err
		}
		if *asJSON {
			out := []outboxJSON{}
			for _, x := range es {
				out = append(out, toOutboxJSON(x))
			}
			return writeJSON(e, out)
		}
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "STATE\tCREATED\tOUTCOME\tCHANNEL\tTO\tMESSAGE-ID\tREASON")
		for _, x := range es {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.State, x.Created.Format("2006-01-02 15:04"),
				x.Outcome, x.Channel, x.Recipient, x.MessageID, x.Reason)
		}
		return w.Flush()
	case "show":
		x, err := l.Get(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "state: %s (%d attempts) %s\nenvelope: %s\n\n", x.State, x.Attempts, x.Reason, strings.Join(x.Envelope, ", "))
		_, err = e.stdout.Write(x.Raw)
		return err
	case "approve":
		for _, id := range fs.Args() {
			if err := ob.Approve(ctx, id); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "approved %s\n", id)
		}
		if !cfg.Reports.Mail {
			fmt.Fprintln(e.stdout, "note: reports.mail is off: approved mail stays in the outbox until it is enabled (GitHub comments go out)")
		}
		return nil
	}
	return fmt.Errorf("%w: %s", errUsage, outboxUsage)
}
