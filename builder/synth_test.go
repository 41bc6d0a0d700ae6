package builder

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/bluekeyes/go-gitdiff/gitdiff"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
)

// synthSlot is a line of a file as the series sees it: which base line
// it is (-1 for a line a patch added) and its text.
type synthSlot struct {
	base int
	text string
}

// synthFile rebuilds the part of one base file a series needs.
type synthFile struct {
	base  []string // the base's lines; "" while no patch needs the line
	image []synthSlot
	end   int // the base ends after this many lines; -1 while unknown
}

// synthBase rebuilds, from the series alone, base files on which every
// patch applies at its stated lines: each line a hunk's pre-image needs
// is traced back through the earlier patches to the base line it was,
// and lines no patch needs are filler. This is how a series older than
// any tree at hand gets a base: its real pre-image blobs are not
// available, only what the patches quote of them. An error means the
// patches contradict each other about the base.
func synthBase(msgs []*flow.Message) (map[string][]byte, error) {
	files := map[string]*synthFile{}
	created := map[string]bool{}
	for k, m := range msgs {
		diffs, _, err := gitdiff.Parse(strings.NewReader(parseMailInfo(m, false).patch))
		if err != nil {
			return nil, fmt.Errorf("patch %d: %w", k+1, err)
		}
		for _, d := range diffs {
			if d.IsBinary || d.IsRename || d.IsCopy {
				return nil, fmt.Errorf("patch %d: %s: renames, copies and binary files are not rebuilt", k+1, d.NewName)
			}
			if d.IsNew {
				created[d.NewName] = true
				continue
			}
			if created[d.OldName] {
				continue // the series made it: no base needed
			}
			f := files[d.OldName]
			if f == nil {
				f = &synthFile{end: -1}
				for i := range 1 << 16 {
					f.image = append(f.image, synthSlot{base: i})
				}
				f.base = make([]string, 1<<16)
				files[d.OldName] = f
			}
			offset := 0
			for _, h := range d.TextFragments {
				pos := int(h.OldPosition) - 1 + offset
				if h.OldLines == 0 {
					pos = int(h.OldPosition) + offset
				}
				var post []synthSlot
				lastPre := "\n"
				i := pos
				for _, l := range h.Lines {
					if l.Op == gitdiff.OpAdd {
						post = append(post, synthSlot{base: -1, text: l.Line})
						continue
					}
					if i >= len(f.image) {
						return nil, fmt.Errorf("patch %d: %s: line %d past the rebuilt end", k+1, d.OldName, i+1)
					}
					s := f.image[i]
					if s.base >= 0 {
						switch f.base[s.base] {
						case "":
							f.base[s.base] = l.Line
						case l.Line:
						default:
							return nil, fmt.Errorf("patch %d: %s: base line %d quoted two ways", k+1, d.OldName, s.base+1)
						}
						s.text = l.Line
					} else if s.text != l.Line {
						return nil, fmt.Errorf("patch %d: %s: line %d differs from what an earlier patch wrote", k+1, d.OldName, i+1)
					}
					if l.Op == gitdiff.OpContext {
						post = append(post, s)
					}
					lastPre = l.Line
					i++
				}
				// A hunk without trailing context ends the file, and so
				// does a line without a newline.
				if h.TrailingContext == 0 || !strings.HasSuffix(lastPre, "\n") {
					if i < len(f.image) {
						next := f.image[i].base
						if next < 0 || (f.end >= 0 && f.end != next) {
							return nil, fmt.Errorf("patch %d: %s: the end of the file moved", k+1, d.OldName)
						}
						f.end = next
					}
				}
				f.image = append(f.image[:pos], append(post, f.image[i:]...)...)
				offset += int(h.NewLines - h.OldLines)
			}
		}
	}
	out := map[string][]byte{}
	for name, f := range files {
		n := f.end
		if n < 0 {
			n = 0
			for i, l := range f.base {
				if l != "" {
					n = i + 1
				}
			}
		}
		var b strings.Builder
		for i, l := range f.base[:n] {
			if l == "" {
				l = fmt.Sprintf("/* rdmabot: line %d of the rebuilt base */\n", i+1)
			}
			b.WriteString(l)
		}
		out[name] = []byte(b.String())
	}
	return out, nil
}

// threadPatches reads the patches of a corpus thread directory, in
// series order, leaving out the cover letter and replies.
func threadPatches(t testing.TB, dir string) []*flow.Message {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*flow.Message
	for _, n := range names {
		raw, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := lore.ParseMessage(raw)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		s := lore.ParseSubject(m.Subject)
		if s.Patch && !s.IsReply && (s.Index > 0 || s.Total == 0) && strings.Contains(m.Body, "\ndiff --git ") {
			msgs = append(msgs, m)
		}
	}
	sort.SliceStable(msgs, func(i, j int) bool {
		return lore.ParseSubject(msgs[i].Subject).Index < lore.ParseSubject(msgs[j].Subject).Index
	})
	return msgs
}

// TestOlderSeriesLikeGitAm applies real series older than the 6.12 tree
// (2021 and 2024 threads of the corpus) on a base rebuilt from what
// their patches quote, with git am and with the builder: the commits
// must be identical.
func TestOlderSeriesLikeGitAm(t *testing.T) {
	shared := sharedDir(t)
	for _, thread := range []string{"relaxed-ordering-v0", "relaxed-ordering-v1", "relaxed-ordering-v2",
		"svcrdma-v1", "svcrdma-v2", "qib-truncation-2024", "regression-218743-revert"} {
		t.Run(thread, func(t *testing.T) {
			msgs := threadPatches(t, filepath.Join(shared, "corpus", "threads", thread))
			if len(msgs) == 0 {
				t.Fatal("no patches in the thread")
			}
			files, err := synthBase(msgs)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			gitT(t, dir, "init", "-q")
			for name, content := range files {
				writeFile(t, filepath.Join(dir, name), string(content), 0o644)
			}
			gitT(t, dir, "add", "-A")
			gitT(t, dir, "commit", "-q", "-m", "rebuilt base")
			gitT(t, dir, "tag", "base")
			var mbox strings.Builder
			for _, m := range msgs {
				mbox.WriteString("From rdmabot Mon Sep 17 00:00:00 2001\n")
				mbox.WriteString(strings.ReplaceAll(string(m.Raw), "\r\n", "\n"))
				mbox.WriteString("\n")
			}
			mboxFile := filepath.Join(t.TempDir(), "series.mbox")
			os.WriteFile(mboxFile, []byte(mbox.String()), 0o644)
			got := compareWithGitAm(t, dir, "base", mboxFile, false)
			t.Logf("%d patches, %d base files rebuilt: identical commits", len(got.Commits), len(files))
		})
	}
}
