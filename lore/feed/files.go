package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// maxFileRead bounds what is read of one file or message; Pump's size cap
// then rejects anything this long, so a huge file costs no more memory.
const maxFileRead = 256 << 20

// Mbox reads an mbox file in mboxrd form (lore's /t.mbox.gz, `b4 mbox`,
// `git format-patch --stdout`): messages start at "From <addr> <date>"
// lines and one `>` is removed from quoted ">From " lines. The checkpoint
// is the byte offset after the last delivered message, so a growing mbox
// is read incrementally; if the file shrank below it, it was replaced and
// is read again from the start (with a warning). Received is the date of
// the From line when it is a real delivery time, else the file's mtime.
type Mbox struct {
	List string
	Path string
	Log  *slog.Logger
}

// Key implements Source.
func (m *Mbox) Key() string { return "mbox " + m.Path }

// Read implements Source.
func (m *Mbox) Read(ctx context.Context, after string, yield func(Item) error) (string, error) {
	var off int64
	if after != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(after, "mbox1 "), 10, 64)
		if err != nil || !strings.HasPrefix(after, "mbox1 ") || n < 0 {
			return "", fmt.Errorf("bad mbox checkpoint %q", after)
		}
		off = n
	}
	f, err := os.Open(m.Path)
	if err != nil {
		return "", &SourceError{Source: m.Key(), Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", &SourceError{Source: m.Key(), Err: err}
	}
	if fi.Size() < off {
		logOrDiscard(m.Log).Warn("feed: mbox is shorter than the checkpoint; it was replaced, reading it again",
			"source", m.Key(), "size", fi.Size(), "checkpoint", off)
		off = 0
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return "", &SourceError{Source: m.Key(), Err: err}
	}
	last := off
	var yieldErr error
	err = splitMbox(f, off, func(start, end int64, from, raw []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		recv := fromLineTime(from)
		if recv.IsZero() {
			recv = fi.ModTime()
		}
		yieldErr = yield(Item{
			List:       m.List,
			Raw:        raw,
			Received:   recv,
			Pos:        fmt.Sprintf("%s@%d", m.Path, start),
			Checkpoint: fmt.Sprintf("mbox1 %d", end),
		})
		if yieldErr != nil {
			return yieldErr
		}
		last = end
		return nil
	})
	if err != nil {
		if err == yieldErr || ctx.Err() != nil {
			return "", err
		}
		return "", &SourceError{Source: m.Key(), Err: err}
	}
	return fmt.Sprintf("mbox1 %d", last), nil
}

// fromLineTime parses the date of "From addr Mon Jan  2 15:04:05 2006";
// zero when absent or the epoch placeholder public-inbox writes.
func fromLineTime(from []byte) time.Time {
	f := strings.Fields(string(from))
	if len(f) < 7 {
		return time.Time{}
	}
	t, err := time.Parse("Mon Jan 2 15:04:05 2006", strings.Join(f[2:7], " "))
	if err != nil || t.Year() < 1990 {
		return time.Time{}
	}
	return t
}

// fileEntry is one message file of a directory source.
type fileEntry struct {
	path  string // absolute
	id    string // stable name: relative path (EML), unique part (Maildir)
	mtime time.Time
}

// fileCheckpoint orders a directory's files by (mtime, id): new files
// have newer mtimes, so they come after everything delivered.
type fileCheckpoint struct {
	mtime time.Time
	id    string
}

func (c fileCheckpoint) String() string {
	return fmt.Sprintf("files1 %d %s", c.mtime.UnixNano(), c.id)
}

func (c fileCheckpoint) before(e fileEntry) bool {
	if !c.mtime.Equal(e.mtime) {
		return c.mtime.Before(e.mtime)
	}
	return c.id < e.id
}

func parseFileCheckpoint(s string) (fileCheckpoint, error) {
	f := strings.SplitN(s, " ", 3)
	if len(f) != 3 || f[0] != "files1" {
		return fileCheckpoint{}, fmt.Errorf("bad file checkpoint %q", s)
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return fileCheckpoint{}, fmt.Errorf("bad file checkpoint %q", s)
	}
	return fileCheckpoint{time.Unix(0, ns), f[2]}, nil
}

// settle is how old a file must be before it is read: files written in
// the same clock tick share an mtime, and one that lands after a read in
// that tick with a smaller name would otherwise sort before the
// checkpoint and never be read.
const settle = 2 * time.Second

// readFiles delivers the entries after the checkpoint in (mtime, id)
// order; files younger than settle wait for the next read.
func readFiles(ctx context.Context, key, list, after string, now time.Time, entries []fileEntry, yield func(Item) error) (string, error) {
	var cp fileCheckpoint
	if after != "" {
		var err error
		if cp, err = parseFileCheckpoint(after); err != nil {
			return "", err
		}
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if !a.mtime.Equal(b.mtime) {
			return a.mtime.Before(b.mtime)
		}
		return a.id < b.id
	})
	for _, e := range entries {
		if after != "" && !cp.before(e) {
			continue
		}
		if now.Sub(e.mtime) < settle {
			break
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		raw, err := readCapped(e.path)
		if errors.Is(err, fs.ErrNotExist) {
			break // moved (new/ to cur/) or removed: list again next time
		}
		if err != nil {
			return "", &SourceError{Source: key, Err: err}
		}
		next := fileCheckpoint{e.mtime, e.id}
		if err := yield(Item{List: list, Raw: raw, Received: e.mtime, Pos: e.path, Checkpoint: next.String()}); err != nil {
			return "", err
		}
		cp, after = next, next.String()
	}
	return after, nil
}

func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxFileRead))
}

// EMLDir reads every *.eml file under Dir (recursively), oldest mtime
// first and by path among equal mtimes; files added later are read by the
// next Read. A file younger than two seconds waits for the next Read.
type EMLDir struct {
	List string
	Dir  string
	// Now is the clock for the settle delay; nil means time.Now.
	Now func() time.Time
}

// Key implements Source.
func (d *EMLDir) Key() string { return "eml " + d.Dir }

// Read implements Source.
func (d *EMLDir) Read(ctx context.Context, after string, yield func(Item) error) (string, error) {
	var entries []fileEntry
	err := filepath.WalkDir(d.Dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() || !strings.HasSuffix(de.Name(), ".eml") {
			return nil
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.Dir, p)
		entries = append(entries, fileEntry{path: p, id: filepath.ToSlash(rel), mtime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return "", &SourceError{Source: d.Key(), Err: err}
	}
	return readFiles(ctx, d.Key(), d.List, after, nowOf(d.Now), entries, yield)
}

// Maildir reads a Maildir's new/ and cur/ without changing it (a mail
// reader may own it). A message keeps its unique name (the part before
// ':') and its mtime when a reader moves it from new/ to cur/, so the move
// neither repeats nor loses it.
type Maildir struct {
	List string
	Dir  string
	// Now is the clock for the settle delay; nil means time.Now.
	Now func() time.Time
}

// Key implements Source.
func (m *Maildir) Key() string { return "maildir " + m.Dir }

// Read implements Source.
func (m *Maildir) Read(ctx context.Context, after string, yield func(Item) error) (string, error) {
	var entries []fileEntry
	seen := map[string]bool{}
	for _, sub := range []string{"cur", "new"} {
		des, err := os.ReadDir(filepath.Join(m.Dir, sub))
		if err != nil {
			return "", &SourceError{Source: m.Key(), Err: fmt.Errorf("not a Maildir: %w", err)}
		}
		for _, de := range des {
			if de.IsDir() || strings.HasPrefix(de.Name(), ".") {
				continue
			}
			id, _, _ := strings.Cut(de.Name(), ":")
			fi, err := de.Info()
			if err != nil || seen[id] {
				continue // moved while listing: listed under its other name
			}
			seen[id] = true
			entries = append(entries, fileEntry{path: filepath.Join(m.Dir, sub, de.Name()), id: id, mtime: fi.ModTime()})
		}
	}
	return readFiles(ctx, m.Key(), m.List, after, nowOf(m.Now), entries, yield)
}

func nowOf(f func() time.Time) time.Time {
	if f != nil {
		return f()
	}
	return time.Now()
}

func logOrDiscard(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
