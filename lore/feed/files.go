package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
// zero when absent or a placeholder: the epoch public-inbox writes, or
// the fixed date of every `git format-patch` mail ("From <commit> Mon
// Sep 17 00:00:00 2001"), which would date each series 2001.
func fromLineTime(from []byte) time.Time {
	f := strings.Fields(string(from))
	if len(f) < 7 {
		return time.Time{}
	}
	t, err := time.Parse("Mon Jan 2 15:04:05 2006", strings.Join(f[2:7], " "))
	if err != nil || t.Year() < 1990 || t.Equal(time.Date(2001, 9, 17, 0, 0, 0, 0, time.UTC)) {
		return time.Time{}
	}
	return t
}

// fileEntry is one message file of a directory source.
type fileEntry struct {
	path  string // absolute
	id    string // stable name: the path relative to the directory
	mtime time.Time
}

// fileCheckpoint orders a directory's files by (mtime, id): new files
// have newer mtimes, so they come after everything delivered. Files
// written in one clock tick share an mtime, and one may land after a read
// in that tick with a smaller name: so the checkpoint lists every id
// delivered at its mtime, rather than only the last.
type fileCheckpoint struct {
	MTime int64    `json:"mtime"` // Unix nanoseconds
	IDs   []string `json:"ids"`
}

func (c fileCheckpoint) String() string {
	b, _ := json.Marshal(c)
	return "files1 " + string(b)
}

// delivered says whether e is at or before the checkpoint.
func (c fileCheckpoint) delivered(e fileEntry) bool {
	t := e.mtime.UnixNano()
	if t != c.MTime {
		return t < c.MTime
	}
	return slices.Contains(c.IDs, e.id)
}

func parseFileCheckpoint(s string) (fileCheckpoint, error) {
	var c fileCheckpoint
	js, ok := strings.CutPrefix(s, "files1 ")
	if !ok || json.Unmarshal([]byte(js), &c) != nil {
		return c, fmt.Errorf("bad file checkpoint %q", s)
	}
	return c, nil
}

// readFiles delivers the entries after the checkpoint in (mtime, id)
// order.
func readFiles(ctx context.Context, key, list, after string, entries []fileEntry, yield func(Item) error) (string, error) {
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
		if after != "" && cp.delivered(e) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		raw, err := readCapped(e.path)
		if errors.Is(err, fs.ErrNotExist) {
			break // moved or removed: list again next time
		}
		if err != nil {
			return "", &SourceError{Source: key, Err: err}
		}
		next := fileCheckpoint{MTime: e.mtime.UnixNano(), IDs: []string{e.id}}
		if next.MTime == cp.MTime {
			next.IDs = append(slices.Clone(cp.IDs), e.id)
		}
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
// next Read.
type EMLDir struct {
	List string
	Dir  string
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
	return readFiles(ctx, d.Key(), d.List, after, entries, yield)
}

func logOrDiscard(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
