package feed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// archive builds a public-inbox-shaped epoch with the git CLI: one commit
// per message, whose tree holds only `m` (or `d`).
type archive struct {
	t    *testing.T
	dir  string
	tick time.Time
}

func newArchive(t *testing.T, dir string) *archive {
	t.Helper()
	a := &archive{t: t, dir: dir, tick: time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)}
	a.git("", "init", "-q", "--bare", "-b", "master", dir)
	return a
}

func (a *archive) git(stdin string, args ...string) string {
	a.t.Helper()
	cmd := testenv.GitCmd("", nil, args...)
	if args[0] != "init" {
		cmd.Args = append([]string{"git", "--git-dir", a.dir}, args...)
	}
	date := a.tick.Format(time.RFC3339)
	cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org",
		"GIT_COMMITTER_NAME=inbox", "GIT_COMMITTER_EMAIL=list@example.org",
		"GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date, "GIT_CONFIG_GLOBAL=/dev/null")
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		a.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (a *archive) tip() string {
	a.t.Helper()
	return a.git("", "rev-parse", "refs/heads/master")
}

// commit appends a commit holding blob name (m or d) with body on top of
// parent ("" for a root) and moves master there.
func (a *archive) commit(parent, name, body string) string {
	a.t.Helper()
	a.tick = a.tick.Add(time.Minute)
	blob := a.git(body, "hash-object", "-w", "--stdin")
	tree := a.git(fmt.Sprintf("100644 blob %s\t%s\n", blob, name), "mktree")
	args := []string{"commit-tree", tree, "-m", "msg"}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	c := a.git("", args...)
	a.git("", "update-ref", "refs/heads/master", c)
	return c
}

// add appends message n to master.
func (a *archive) add(n int) string {
	parent := ""
	if out, err := testenv.GitCmd("", nil, "--git-dir", a.dir, "rev-parse", "-q", "--verify", "refs/heads/master").Output(); err == nil {
		parent = strings.TrimSpace(string(out))
	}
	return a.commit(parent, "m", testMail(n))
}

func testMail(n int) string {
	return fmt.Sprintf("From: a@example.org\nSubject: message %d\nMessage-ID: <%d@example.org>\n\nbody %d\n", n, n, n)
}

// collector records what a consumer was given.
type collector struct {
	got    []string
	failAt string // return a retryable error for the item with this subject, once
}

func (c *collector) consume(_ context.Context, it Item) error {
	s := subjectOf(it.Raw)
	if it.Deleted {
		s = "deleted " + s
	}
	if s == c.failAt {
		c.failAt = ""
		return errors.New("database down")
	}
	c.got = append(c.got, s)
	return nil
}

func subjectOf(raw []byte) string {
	for _, l := range strings.Split(string(raw), "\n") {
		if s, ok := strings.CutPrefix(l, "Subject: "); ok {
			return strings.TrimSpace(s)
		}
	}
	return "?"
}

// restarted is what a new process finds of cps: every checkpoint saved,
// nothing else.
func restarted(cps *MemCheckpoints) *MemCheckpoints {
	cps.mu.Lock()
	defer cps.mu.Unlock()
	return &MemCheckpoints{cps: maps.Clone(cps.cps)}
}

func pumpAll(t *testing.T, src Source, cps Checkpoints, c *collector) error {
	t.Helper()
	_, err := Pump(context.Background(), src, cps, PumpOptions{}, c.consume)
	return err
}

func wantGot(t *testing.T, c *collector, want ...string) {
	t.Helper()
	if strings.Join(c.got, "|") != strings.Join(want, "|") {
		t.Fatalf("consumer got\n  %q\nwant\n  %q", c.got, want)
	}
	c.got = nil
}

func TestGitIncrementalAndRestart(t *testing.T) {
	a := newArchive(t, filepath.Join(t.TempDir(), "0.git"))
	for i := 1; i <= 3; i++ {
		a.add(i)
	}
	cps := &MemCheckpoints{}
	src := &Git{List: "linux-rdma", Dir: a.dir}
	c := &collector{failAt: "message 2"}
	if err := pumpAll(t, src, cps, c); err == nil {
		t.Fatal("consumer error not returned")
	}
	wantGot(t, c, "message 1")

	// A restart (a new source, a store holding only what was saved)
	// resumes at message 2.
	cps = restarted(cps)
	src = &Git{List: "linux-rdma", Dir: a.dir}
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 2", "message 3")

	a.add(4)
	a.commit(a.tip(), "d", testMail(2))
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 4", "deleted message 2")
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c)
}

func TestGitFromTip(t *testing.T) {
	a := newArchive(t, filepath.Join(t.TempDir(), "0.git"))
	a.add(1)
	a.add(2)
	src := &Git{List: "linux-rdma", Dir: a.dir, FromTip: true}
	cps := &MemCheckpoints{}
	c := &collector{}
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c)
	a.add(3)
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 3")
}

func TestGitItemFields(t *testing.T) {
	a := newArchive(t, filepath.Join(t.TempDir(), "0.git"))
	c1 := a.add(1)
	src := &Git{List: "linux-nfs", Dir: a.dir}
	var items []Item
	if _, err := src.Read(context.Background(), "", func(it Item) error { items = append(items, it); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 {
		t.Fatalf("%d items", len(items))
	}
	it := items[0]
	if it.List != "linux-nfs" || string(it.Raw) != testMail(1) || it.Deleted || it.Pos != "0:"+c1 ||
		!it.Received.Equal(time.Date(2024, 3, 1, 10, 1, 0, 0, time.UTC)) ||
		it.Checkpoint != "git1 0 "+c1+" "+a.git(testMail(1), "hash-object", "--stdin") {
		t.Fatalf("item %+v", it)
	}
}

func TestGitEpochRollover(t *testing.T) {
	inbox := t.TempDir()
	e0 := newArchive(t, filepath.Join(inbox, "git", "0.git"))
	e0.add(1)
	e0.add(2)
	src := &Git{List: "linux-rdma", Dir: inbox}
	cps := &MemCheckpoints{}
	c := &collector{}
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 1", "message 2")

	// The last mail of epoch 0 and the first ones of epoch 1 arrive
	// between two polls: all of them are read, in order.
	e0.add(3)
	e1 := newArchive(t, filepath.Join(inbox, "git", "1.git"))
	e1.add(4)
	e1.add(5)
	c.failAt = "message 5"
	if err := pumpAll(t, src, cps, c); err == nil {
		t.Fatal("consumer error not returned")
	}
	wantGot(t, c, "message 3", "message 4")
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 5")

	// A new, still empty epoch does not move the checkpoint back or
	// forward: the next message of epoch 1 is read exactly once.
	newArchive(t, filepath.Join(inbox, "git", "2.git"))
	e1.add(6)
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 6")
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c)

	// Without a checkpoint a reader starts at the newest epoch.
	c2 := &collector{}
	if err := pumpAll(t, src, &MemCheckpoints{}, c2); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c2, "message 4", "message 5", "message 6")

	// A scan reads every epoch.
	c3 := &collector{}
	all := &Git{List: "linux-rdma", Dir: inbox, AllEpochs: true}
	if err := pumpAll(t, all, &MemCheckpoints{}, c3); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c3, "message 1", "message 2", "message 3", "message 4", "message 5", "message 6")
}

func TestGitHistoryRewrite(t *testing.T) {
	a := newArchive(t, filepath.Join(t.TempDir(), "0.git"))
	var h []string
	for i := 1; i <= 4; i++ {
		h = append(h, a.add(i))
	}
	src := &Git{List: "linux-rdma", Dir: a.dir}
	cps := &MemCheckpoints{}
	c := &collector{}
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 1", "message 2", "message 3", "message 4")

	// public-inbox-purge drops message 2 and rewrites everything after
	// it; message 5 arrives on the new history. The rewritten commits
	// differ (new parents) but hold the same blobs.
	a.tick = a.tick.Add(time.Hour)
	p := a.commit(h[0], "m", testMail(3))
	p = a.commit(p, "m", testMail(4))
	p = a.commit(p, "m", testMail(5))
	a.commit(p, "m", testMail(6))

	c.failAt = "message 5" // crash in the middle of the rewrite
	if err := pumpAll(t, src, cps, c); err == nil {
		t.Fatal("consumer error not returned")
	}
	wantGot(t, c, "deleted message 2")
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 5", "message 6")
	a.add(7)
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 7")
}

func TestGitRewriteAgainWhileInterrupted(t *testing.T) {
	a := newArchive(t, filepath.Join(t.TempDir(), "0.git"))
	var h []string
	for i := 1; i <= 3; i++ {
		h = append(h, a.add(i))
	}
	src := &Git{List: "linux-rdma", Dir: a.dir}
	cps := &MemCheckpoints{}
	c := &collector{}
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 1", "message 2", "message 3")

	// Rewrite 1: message 3 edited (3 is gone, 30 and 4 are new).
	p := a.commit(h[1], "m", strings.Replace(testMail(3), "body", "edited body", 1))
	p = a.commit(p, "m", testMail(30))
	a.commit(p, "m", testMail(4))
	c.failAt = "message 4"
	if err := pumpAll(t, src, cps, c); err == nil {
		t.Fatal("consumer error not returned")
	}
	wantGot(t, c, "deleted message 3", "message 3", "message 30")

	// Rewrite 2 before the restart: message 1 purged as well.
	p = a.commit("", "m", testMail(2))
	p = a.commit(p, "m", strings.Replace(testMail(3), "body", "edited body", 1))
	p = a.commit(p, "m", testMail(30))
	a.commit(p, "m", testMail(4))
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "deleted message 1", "message 4")
}

// public-inbox-purge rewrites and prunes its own repositories: a reader
// of the inbox itself finds its place again by the blobs it delivered last.
func TestGitRewriteAndPrune(t *testing.T) {
	a := newArchive(t, filepath.Join(t.TempDir(), "0.git"))
	var h []string
	for i := 1; i <= 4; i++ {
		h = append(h, a.add(i))
	}
	src := &Git{List: "linux-rdma", Dir: a.dir}
	cps := &MemCheckpoints{}
	c := &collector{}
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 1", "message 2", "message 3", "message 4")
	prune := func() {
		a.git("", "reflog", "expire", "--expire=now", "--all")
		a.git("", "gc", "-q", "--prune=now")
	}

	// Message 2 purged; 5 arrives.
	a.tick = a.tick.Add(time.Hour)
	p := a.commit(h[0], "m", testMail(3))
	p = a.commit(p, "m", testMail(4))
	a.commit(p, "m", testMail(5))
	prune()
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 5")

	// The newest message itself (5) purged, 6 and 7 arrive.
	a.tick = a.tick.Add(time.Hour)
	p = a.commit(h[0], "m", testMail(3))
	p = a.commit(p, "m", testMail(4))
	p = a.commit(p, "m", testMail(6))
	a.commit(p, "m", testMail(7))
	prune()
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 6", "message 7")
}

func TestGitCheckpointLost(t *testing.T) {
	a := newArchive(t, filepath.Join(t.TempDir(), "0.git"))
	a.add(1)
	src := &Git{List: "l", Dir: a.dir}
	cp := "git1 0 " + strings.Repeat("ab", 20) + " -"
	_, err := src.Read(context.Background(), cp, func(Item) error { return nil })
	if !errors.Is(err, ErrCheckpointLost) {
		t.Fatalf("got %v, want ErrCheckpointLost", err)
	}
	if _, err := src.Read(context.Background(), "bogus", func(Item) error { return nil }); err == nil {
		t.Fatal("bad checkpoint accepted")
	}
}

func TestGitSkipsBadItems(t *testing.T) {
	a := newArchive(t, filepath.Join(t.TempDir(), "0.git"))
	a.add(1)
	a.commit(a.tip(), "x", "not a public-inbox commit")
	a.commit(a.tip(), "m", "Subject: huge\n\n"+strings.Repeat("x", 2000))
	a.add(2)
	a.commit(a.tip(), "m", "Subject: panics\n\n")
	a.add(3)
	src := &Git{List: "l", Dir: a.dir}
	c := &collector{}
	consume := func(ctx context.Context, it Item) error {
		switch subjectOf(it.Raw) {
		case "panics":
			panic("parser bug")
		case "message 2":
			if err := c.consume(ctx, it); err != nil {
				return err
			}
			return Skip(errors.New("no Message-ID")) // counted as skipped
		}
		return c.consume(ctx, it)
	}
	cps := &MemCheckpoints{}
	st, err := Pump(context.Background(), src, cps, PumpOptions{MaxSize: 1000}, consume)
	if err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 1", "message 2", "message 3")
	if st.Delivered != 2 || st.Skipped != 3 {
		t.Fatalf("stats %+v", st)
	}
	if cp, _ := cps.Load(context.Background(), src.Key()); !strings.HasPrefix(cp, "git1 0 "+a.tip()+" ") {
		t.Fatalf("checkpoint %q, want the tip", cp)
	}
}

// sharedCorpus returns ../shared/corpus/<name> seen from the module root,
// or skips.
func sharedCorpus(t testing.TB, name string) string {
	return testenv.Shared(t, "the real 2024 archive is not read", "corpus", name)
}

func TestGitCorpus(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int
	}{{"linux-rdma-2024.git", 6263}, {"linux-nfs-2024.git", 8008}} {
		t.Run(tc.name, func(t *testing.T) {
			src := &Git{List: strings.TrimSuffix(tc.name, "-2024.git"), Dir: sharedCorpus(t, tc.name)}
			cps := &MemCheckpoints{}
			n, withID := 0, 0
			st, err := Pump(context.Background(), src, cps, PumpOptions{}, func(_ context.Context, it Item) error {
				n++
				if strings.Contains(strings.ToLower(string(headerOf(it.Raw))), "\nmessage-id:") || strings.HasPrefix(strings.ToLower(string(it.Raw)), "message-id:") {
					withID++
				}
				if it.Deleted || it.Received.IsZero() {
					return fmt.Errorf("item %s: deleted=%v received=%v", it.Pos, it.Deleted, it.Received)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.want || st.Delivered != tc.want || withID != tc.want {
				t.Fatalf("read %d messages (%d delivered, %d with a Message-ID), want %d", n, st.Delivered, withID, tc.want)
			}
			st, err = Pump(context.Background(), src, cps, PumpOptions{}, func(context.Context, Item) error {
				return errors.New("a restart repeated a message")
			})
			if err != nil || st.Delivered != 0 {
				t.Fatalf("second pump: %+v %v", st, err)
			}
		})
	}
}

func headerOf(raw []byte) []byte {
	if i := strings.Index(string(raw), "\n\n"); i >= 0 {
		return raw[:i+1]
	}
	return raw
}

// looseObject is the file of a loose object in the archive.
func (a *archive) looseObject(h string) string {
	return filepath.Join(a.dir, "objects", h[:2], h[2:])
}

// blobOf is the blob commit c holds.
func (a *archive) blobOf(c string) string {
	return a.git("", "rev-parse", c+":m")
}

func TestGitMissingAndCorruptObjects(t *testing.T) {
	a := newArchive(t, filepath.Join(t.TempDir(), "0.git"))
	var commits []string
	for i := 1; i <= 5; i++ {
		commits = append(commits, a.add(i))
	}
	// Message 2's blob is gone from the object store, message 4's is
	// garbage: neither may stop the read.
	missing := a.blobOf(commits[1])
	if err := os.Remove(a.looseObject(missing)); err != nil {
		t.Fatal(err)
	}
	corrupt := a.looseObject(a.blobOf(commits[3]))
	os.Chmod(corrupt, 0o644)
	if err := os.WriteFile(corrupt, []byte("not zlib at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := &Git{List: "l", Dir: a.dir}
	cps := &MemCheckpoints{}
	c := &collector{}
	st, err := Pump(context.Background(), src, cps, PumpOptions{}, c.consume)
	if err != nil {
		t.Fatalf("a missing object was fatal: %v", err)
	}
	wantGot(t, c, "message 1", "message 3", "message 5")
	if st.Delivered != 3 || st.Unreadable != 2 || st.Skipped != 0 {
		t.Fatalf("stats %+v, want 3 delivered, 2 unreadable", st)
	}
	cp, _ := cps.Load(context.Background(), src.Key())
	if !strings.HasPrefix(cp, "git1 0 "+a.tip()+" ") || !strings.Contains(cp, " retry=0:"+commits[1]+",0:"+commits[3]) {
		t.Fatalf("checkpoint %q: want the tip and both unreadable commits to retry", cp)
	}

	// Nothing new, nothing readable again: nothing delivered, nothing
	// counted twice.
	if st, err = Pump(context.Background(), src, cps, PumpOptions{}, c.consume); err != nil || st != (PumpStats{}) {
		t.Fatalf("second pump: %+v %v", st, err)
	}
	// The mirror gets the missing blob back: the next read delivers it,
	// with the new mail, and keeps retrying only the corrupt one.
	a.git(testMail(2), "hash-object", "-w", "--stdin")
	a.add(6)
	if st, err = Pump(context.Background(), src, cps, PumpOptions{}, c.consume); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 2", "message 6")
	if st.Delivered != 2 || st.Unreadable != 0 {
		t.Fatalf("stats %+v", st)
	}
	if cp, _ = cps.Load(context.Background(), src.Key()); !strings.HasSuffix(cp, " retry=0:"+commits[3]) {
		t.Fatalf("checkpoint %q: only the corrupt commit is left to retry", cp)
	}
}

func TestGitMissingCommit(t *testing.T) {
	a := newArchive(t, filepath.Join(t.TempDir(), "0.git"))
	var commits []string
	for i := 1; i <= 4; i++ {
		commits = append(commits, a.add(i))
	}
	// A commit of the history itself is lost: what is older cannot be
	// reached, what is newer is still read, and the break is counted.
	if err := os.Remove(a.looseObject(commits[1])); err != nil {
		t.Fatal(err)
	}
	src := &Git{List: "l", Dir: a.dir}
	cps := &MemCheckpoints{}
	c := &collector{}
	st, err := Pump(context.Background(), src, cps, PumpOptions{}, c.consume)
	if err != nil {
		t.Fatalf("a missing commit was fatal: %v", err)
	}
	wantGot(t, c, "message 3", "message 4")
	if st.Delivered != 2 || st.Unreadable != 1 {
		t.Fatalf("stats %+v", st)
	}
	if cp, _ := cps.Load(context.Background(), src.Key()); !strings.HasPrefix(cp, "git1 0 "+a.tip()+" ") {
		t.Fatalf("checkpoint %q, want the tip", cp)
	}
}

func TestGitCheckpointRetryRoundTrip(t *testing.T) {
	h := strings.Repeat("ab", 20)
	for _, s := range []string{
		"git1 0 " + h + " - retry=0:" + h,
		"git1 2 " + h + " " + h + " " + h + " 3 retry=1:" + h + ",2:" + h,
	} {
		c, err := parseGitCheckpoint(s)
		if err != nil {
			t.Fatal(err)
		}
		if c.String() != s {
			t.Errorf("round trip %q -> %q", s, c.String())
		}
	}
	for _, bad := range []string{"git1 0 " + h + " - retry=x:" + h, "git1 0 " + h + " - retry=0:zz"} {
		if _, err := parseGitCheckpoint(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Unread tells, from the refs alone, whether a pump would find mail: in
// an inbox nothing was posted to yet, after each read, when mail comes,
// and across an epoch's rollover (an empty new epoch holds none).
func TestGitUnread(t *testing.T) {
	inbox := filepath.Join(t.TempDir(), "local")
	src := &Git{List: "local", Dir: inbox}
	cps := &MemCheckpoints{}
	c := &collector{}
	unread := func(want bool, wantTip string) {
		t.Helper()
		after, err := cps.Load(context.Background(), src.Key())
		if err != nil {
			t.Fatal(err)
		}
		tip, got, err := src.Unread(after)
		if err != nil || got != want || tip != wantTip {
			t.Fatalf("Unread(%q) = %q, %v, %v; want %q, %v", after, tip, got, err, wantTip, want)
		}
	}
	unread(false, "")
	e0 := newArchive(t, filepath.Join(inbox, "git", "0.git"))
	unread(false, "")
	e0.add(1)
	c2 := e0.add(2)
	unread(true, "0:"+c2)
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 1", "message 2")
	unread(false, "0:"+c2)
	c3 := e0.add(3)
	unread(true, "0:"+c3)
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	unread(false, "0:"+c3)
	e1 := newArchive(t, filepath.Join(inbox, "git", "1.git"))
	unread(false, "0:"+c3)
	c4 := e1.add(4)
	unread(true, "1:"+c4)
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, "message 3", "message 4")
	unread(false, "1:"+c4)

	if _, _, err := src.Unread("git1 zero"); err == nil {
		t.Fatal("a bad checkpoint read as no mail")
	}
	if _, _, err := (&Git{List: "x", Dir: t.TempDir()}).Unread(""); err == nil {
		t.Fatal("a folder that is no inbox read as no mail")
	}
}
