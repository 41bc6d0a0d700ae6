package feed

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// mboxrdQuote writes msg as one mboxrd entry, as public-inbox does.
func mboxrdQuote(from, msg string) string {
	var b bytes.Buffer
	b.WriteString(from + "\n")
	for _, l := range bytes.SplitAfter([]byte(msg), []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimLeft(l, ">"), []byte("From ")) {
			b.WriteByte('>')
		}
		b.Write(l)
	}
	b.WriteString("\n")
	return b.String()
}

func readAll(t *testing.T, src Source, after string) ([]Item, string) {
	t.Helper()
	var items []Item
	cp, err := src.Read(context.Background(), after, func(it Item) error {
		items = append(items, it)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return items, cp
}

func TestMbox(t *testing.T) {
	msgs := []string{
		"Subject: one\nMessage-ID: <1@x>\n\nFrom the start\n>From quoted once\n>>From twice\n",
		"Subject: two\r\nMessage-ID: <2@x>\r\n\r\nCRLF body\r\nFrom me\r\n",
		"Subject: three\n\nno final newline",
	}
	p := filepath.Join(t.TempDir(), "a.mbox")
	content := "junk before the first From line\n" +
		mboxrdQuote("From mboxrd@z Thu Jan  1 00:00:00 1970", msgs[0]) +
		mboxrdQuote("From ann@example.org Tue Jan  2 09:00:00 2024", msgs[1])
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	src := &Mbox{List: "l", Path: p}
	items, cp := readAll(t, src, "")
	if len(items) != 2 {
		t.Fatalf("%d items", len(items))
	}
	for i, it := range items {
		if string(it.Raw) != msgs[i] {
			t.Errorf("message %d:\n got %q\nwant %q", i, it.Raw, msgs[i])
		}
	}
	fi, _ := os.Stat(p)
	if !items[0].Received.Equal(fi.ModTime()) || !items[1].Received.Equal(time.Date(2024, 1, 2, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("received %v %v", items[0].Received, items[1].Received)
	}

	// Appending is read incrementally.
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("From x Wed Jan  3 10:00:00 2024\n" + msgs[2])
	f.Close()
	items, cp2 := readAll(t, src, cp)
	if len(items) != 1 || string(items[0].Raw) != msgs[2] {
		t.Fatalf("appended: %q", subjects(items))
	}
	if items, _ := readAll(t, src, cp2); len(items) != 0 {
		t.Fatalf("repeated %d", len(items))
	}

	// A replaced, shorter file is read from its start.
	os.WriteFile(p, []byte(mboxrdQuote("From mboxrd@z Thu Jan  1 00:00:00 1970", msgs[2])), 0o644)
	if items, _ := readAll(t, src, cp2); len(items) != 1 {
		t.Fatalf("replaced file: %d items", len(items))
	}
	if _, err := src.Read(context.Background(), "nonsense", func(Item) error { return nil }); err == nil {
		t.Fatal("bad checkpoint accepted")
	}
}

// A `git format-patch` mbox carries one fixed date on every From line:
// it is no delivery time, so the file's mtime stands in (and the
// assembler keeps each mail's Date, which is older).
func TestMboxGitFormatPatch(t *testing.T) {
	p := filepath.Join(t.TempDir(), "series.mbox")
	mtime := time.Date(2025, 9, 10, 22, 0, 0, 0, time.UTC)
	writeAged(t, p, "From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n"+
		"From: A <a@example.org>\nDate: Wed, 10 Sep 2025 14:49:27 -0700\nSubject: [PATCH] x\n\nbody\n", mtime)
	items, _ := readAll(t, &Mbox{List: "l", Path: p}, "")
	if len(items) != 1 {
		t.Fatalf("%d items", len(items))
	}
	if !items[0].Received.Equal(mtime) {
		t.Errorf("received %v, want the mtime %v", items[0].Received, mtime)
	}
}

func writeAged(t *testing.T, p, body string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func subjects(items []Item) []string {
	var s []string
	for _, it := range items {
		s = append(s, subjectOf(it.Raw))
	}
	return s
}

func TestEMLDir(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	writeAged(t, filepath.Join(dir, "b.eml"), "Subject: b\n\n", t0)
	writeAged(t, filepath.Join(dir, "a.eml"), "Subject: a\n\n", t0)
	writeAged(t, filepath.Join(dir, "sub", "c.eml"), "Subject: c\n\n", t0.Add(time.Second))
	writeAged(t, filepath.Join(dir, "notes.txt"), "Subject: not mail\n\n", t0)
	src := &EMLDir{List: "l", Dir: dir}
	items, cp := readAll(t, src, "")
	same(t, "first", subjects(items), []string{"a", "b", "c"})
	if items[2].Pos != filepath.Join(dir, "sub", "c.eml") || !items[2].Received.Equal(t0.Add(time.Second)) {
		t.Fatalf("item %+v", items[2])
	}

	// Files that share the last delivered file's mtime (one clock tick)
	// are read even when their names sort first; older ones are not.
	writeAged(t, filepath.Join(dir, "0-same-tick.eml"), "Subject: same tick\n\n", t0.Add(time.Second))
	writeAged(t, filepath.Join(dir, "d.eml"), "Subject: d\n\n", t0.Add(time.Minute))
	items, cp = readAll(t, src, cp)
	same(t, "second", subjects(items), []string{"same tick", "d"})
	writeAged(t, filepath.Join(dir, "e.eml"), "Subject: e\n\n", t0.Add(time.Minute))
	items, cp = readAll(t, src, cp)
	same(t, "third", subjects(items), []string{"e"})
	items, _ = readAll(t, src, cp)
	same(t, "again", subjects(items), nil)
}
