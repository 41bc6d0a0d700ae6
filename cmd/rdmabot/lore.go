package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/lore/feed"
	"github.com/rdmabot/rdmabot/wire"
)

const loreUsage = "rdmabot lore scan (--git DIR | --mbox FILE | --eml-dir DIR | --imap URL) [--list NAME] [--json] [--relevant] [--window DUR] [--config FILE]"

// runLore is "rdmabot lore scan": read one source from its beginning,
// assemble every series and print what the bot would see.
func runLore(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "scan" {
		return fmt.Errorf("%w: %s", errUsage, loreUsage)
	}
	fs := newFlags(e, "lore scan")
	gitDir := fs.String("git", "", "public-inbox archive: inbox dir (every epoch) or bare epoch repository")
	mbox := fs.String("mbox", "", "mbox (mboxrd) file")
	emlDir := fs.String("eml-dir", "", "directory of .eml files (searched recursively)")
	imapURL := fs.String("imap", "", "imap://host:port/mailbox of a public-inbox-imapd")
	list := fs.String("list", "", "list name the mail came from (default: guessed from the source)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	relevant := fs.Bool("relevant", false, "print only series touching lore.paths")
	cfgPath := fs.String("config", "", "config file (default: built-in defaults)")
	window := fs.Duration("window", 30*24*time.Hour, "assembly window: a series is printed and forgotten once no mail came for it this long (0: hold the whole archive)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	cfg := wire.Default()
	if *cfgPath != "" {
		c, err := wire.Load(*cfgPath)
		if err != nil {
			return err
		}
		cfg = c
	}
	src, err := scanSource(*gitDir, *mbox, *emlDir, *imapURL, *list, e)
	if err != nil {
		return err
	}
	asm, err := lore.NewAssembler(cfg.Lore.Assembler(nil))
	if err != nil {
		return err
	}
	out := &scanPrinter{w: e.stdout, json: *asJSON, relevant: *relevant}
	// The scan streams: the series settled a window ago are printed and
	// forgotten as archive time passes, so memory holds the window, not
	// the archive.
	stream := &lore.Stream{A: asm, Window: *window}
	start := time.Now()
	st, err := feed.Pump(ctx, src, &feed.MemCheckpoints{}, feed.PumpOptions{Log: e.log}, func(_ context.Context, it feed.Item) error {
		settled, err := stream.Add(it.Raw, it.Received, it.Deleted)
		if settled != nil {
			if err := out.print(settled); err != nil {
				return err
			}
		}
		if err != nil {
			return feed.Skip(err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := out.print(stream.Close()); err != nil {
		return err
	}
	if err := out.finish(st); err != nil {
		return err
	}
	elapsed := time.Since(start)
	if *asJSON {
		return nil
	}
	fmt.Fprintf(e.stdout, "%d messages read, %d skipped, %d unreadable; %d series (%d complete, %d touching lore.paths) in %s\n",
		st.Delivered, st.Skipped, st.Unreadable, out.total, out.complete, out.rel, elapsed.Round(time.Millisecond))
	return nil
}

// scanPrinter prints the series and commands of each flush as they
// come: text, or one JSON object {"series": [...], "commands": [...],
// "messages": {...}} written piecewise.
type scanPrinter struct {
	w                    io.Writer
	json, relevant       bool
	total, complete, rel int
	series               int // printed, for the JSON commas
	commands             []lore.Command
}

func (p *scanPrinter) print(asm *lore.Assembly) error {
	for _, s := range asm.Series {
		p.total++
		if s.Complete {
			p.complete++
		}
		if s.Relevant() {
			p.rel++
		}
		if p.relevant && !s.Relevant() {
			continue
		}
		if !p.json {
			printSeries(p.w, s)
			continue
		}
		b, err := json.MarshalIndent(s, "    ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n    "
		if p.series == 0 {
			sep = "{\n  \"series\": [\n    "
		}
		p.series++
		if _, err := fmt.Fprintf(p.w, "%s%s", sep, b); err != nil {
			return err
		}
	}
	if p.json {
		p.commands = append(p.commands, asm.Commands...)
		return nil
	}
	for _, c := range asm.Commands {
		state := c.Verb + " " + strings.TrimSpace(c.Tree+" "+c.Branch)
		if c.Err != "" {
			state = "invalid: " + c.Err
		}
		fmt.Fprintf(p.w, "command from %s in <%s> (series %s): %s\n", c.From, c.MessageID, orDash(c.SeriesID), state)
	}
	return nil
}

// scanCounts are the JSON's "messages": what the text's last line
// says, so a reader of the JSON knows what the scan could not read.
type scanCounts struct {
	Read       int `json:"read"`
	Skipped    int `json:"skipped"`
	Unreadable int `json:"unreadable"`
}

func (p *scanPrinter) finish(st feed.PumpStats) error {
	if !p.json {
		return nil
	}
	if p.series == 0 {
		fmt.Fprint(p.w, "{\n  \"series\": [")
	} else {
		fmt.Fprint(p.w, "\n  ")
	}
	cmds, err := json.MarshalIndent(p.commands, "  ", "  ")
	if err != nil {
		return err
	}
	counts, err := json.MarshalIndent(scanCounts{Read: st.Delivered, Skipped: st.Skipped, Unreadable: st.Unreadable}, "  ", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.w, "],\n  \"commands\": %s,\n  \"messages\": %s\n}\n", cmds, counts)
	return err
}

// scanSource builds the one source the flags name.
func scanSource(gitDir, mbox, emlDir, imapURL, list string, e *env) (feed.Source, error) {
	n := 0
	for _, v := range []string{gitDir, mbox, emlDir, imapURL} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%w: give exactly one source: %s", errUsage, loreUsage)
	}
	if list == "" {
		list = "scan"
	}
	switch {
	case gitDir != "":
		// A scan reads the whole archive, every epoch.
		return &feed.Git{List: list, Dir: gitDir, AllEpochs: true, Log: e.log}, nil
	case mbox != "":
		return &feed.Mbox{List: list, Path: mbox, Log: e.log}, nil
	case emlDir != "":
		return &feed.EMLDir{List: list, Dir: emlDir}, nil
	}
	return imapSource(imapURL, list, e)
}

// imapSource reads imap[s]://[user:pass@]host:port/<newsgroup>.
func imapSource(raw, list string, e *env) (feed.Source, error) {
	src, err := feed.ParseIMAPURL(raw, list, e.log)
	if err != nil {
		return nil, fmt.Errorf("%w: --imap: %v", errUsage, err)
	}
	return src, nil
}

func printSeries(w io.Writer, s *lore.Series) {
	state := "complete"
	if !s.Complete {
		state = fmt.Sprintf("missing %s", joinInts(s.Missing))
		if s.Incomplete != "" {
			state = "INCOMPLETE: " + s.Incomplete
		}
	}
	tags := ""
	if s.RFC {
		tags += " RFC"
	}
	if s.Resend {
		tags += " RESEND"
	}
	if s.TreeTag != "" {
		tags += " " + s.TreeTag
	}
	fmt.Fprintf(w, "%s v%d%s %d/%d %s: %s\n", s.ID, s.Version, tags, len(s.Patches), s.Total, state, s.Subject)
	fmt.Fprintf(w, "  author %s, %s, lists %s, root <%s>\n", s.Author, s.Date.UTC().Format("2006-01-02 15:04Z"), orDash(strings.Join(s.Lists, " ")), s.RootMessageID)
	if len(s.MatchedPaths) > 0 {
		fmt.Fprintf(w, "  matched %s\n", strings.Join(s.MatchedPaths, " "))
	}
	base := "base: not given"
	if s.BaseCommit != "" {
		base = "base-commit " + s.BaseCommit
	}
	if s.ChangeID != "" {
		base += ", change-id " + s.ChangeID
	}
	fmt.Fprintf(w, "  %s\n", base)
	if len(s.Versions) > 0 {
		fmt.Fprintf(w, "  other versions %s\n", strings.Join(s.Versions, " "))
	}
	for _, t := range s.Trailers {
		fmt.Fprintf(w, "  all patches: %s\n", t)
	}
	for _, p := range s.Patches {
		for _, t := range p.Trailers {
			fmt.Fprintf(w, "  patch %d: %s\n", p.Index, t)
		}
	}
	for _, a := range s.Applied {
		fmt.Fprintf(w, "  applied by %s <%s> %s\n", a.By, a.MessageID, strings.Join(a.Commits, " "))
	}
	if len(s.Duplicates) > 0 {
		fmt.Fprintf(w, "  duplicates ignored: %s\n", strings.Join(s.Duplicates, " "))
	}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
