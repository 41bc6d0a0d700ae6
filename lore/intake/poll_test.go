package intake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/dkimtest"
	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/lore/feed"
)

// newReader is a Reader as wire.NewLore makes one from cfg: the window
// a month (or four grace periods), DKIM when lore.command_dkim is on.
func newReader(cfg lore.Config, st Store, log *slog.Logger) *Reader {
	window := 30 * 24 * time.Hour
	if g := 4 * cfg.GracePeriod.Duration; g > window {
		window = g
	}
	l := &Reader{St: st, Cfg: cfg, Log: log, Now: time.Now, Window: window, HTTP: &feed.HTTPClient{}}
	if cfg.CommandDKIM {
		l.Auth = &lore.DKIM{Resolver: lore.NewDKIMResolver(cfg.DKIMResolver)}
	}
	return l
}

// memStore keeps the intake's mail, checkpoints, state and list health
// in memory as the bot's store does (bot/store's own tests hold it to
// that): mail once per list, position and deletion, in arrival order; a
// failed read counted until one succeeds, at the store's clock.
type memStore struct {
	mu          sync.Mutex
	now         func() time.Time
	checkpoints map[string]string
	mail        []Mail
	state       map[string]string
	health      map[string]*listHealth
}

// listHealth is a list's last reads and the last error.
type listHealth struct {
	Health
	Err string
}

func newMemStore() *memStore {
	return &memStore{now: time.Now, checkpoints: map[string]string{}, state: map[string]string{}, health: map[string]*listHealth{}}
}

func (m *memStore) Load(_ context.Context, source string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkpoints[source], nil
}

func (m *memStore) Save(_ context.Context, source, v string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checkpoints[source] = v
	return nil
}

func (m *memStore) AddMail(_ context.Context, x Mail) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, y := range m.mail {
		if y.List == x.List && y.Pos == x.Pos && y.Deleted == x.Deleted {
			return nil
		}
	}
	if x.Ingested.IsZero() {
		x.Ingested = x.Received
	}
	m.mail = append(m.mail, x)
	return nil
}

func (m *memStore) MailSince(_ context.Context, t time.Time) ([]Mail, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Mail
	for _, x := range m.mail {
		if !x.Received.Before(t) {
			out = append(out, x)
		}
	}
	return out, nil
}

func (m *memStore) State(ctx context.Context, key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state[key], ctx.Err()
}

func (m *memStore) SetState(ctx context.Context, key, v string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state[key] = v
	return nil
}

func (m *memStore) ListHealth(_ context.Context, list string) (Health, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.health[list]; h != nil {
		return h.Health, nil
	}
	return Health{}, nil
}

func (m *memStore) RecordRead(_ context.Context, list string, _ time.Duration, err error) (Health, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.health[list]
	if h == nil {
		h = &listHealth{}
		m.health[list] = h
	}
	h.At = m.now()
	if err == nil {
		h.OK, h.Failures, h.Err = true, 0, ""
	} else {
		h.OK, h.Err = false, err.Error()
		h.Failures++
	}
	return h.Health, nil
}

// failing are the lists whose last read failed, by name, as the
// dashboard and rdmabot status show them.
func (m *memStore) failing() map[string]listHealth {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]listHealth{}
	for name, h := range m.health {
		if !h.OK {
			out[name] = *h
		}
	}
	return out
}

// inboxEpoch makes a bare git repository in public-inbox layout (one
// commit per message, the message in blob m) holding mails.
func inboxEpoch(t *testing.T, mails ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "0.git")
	if out, err := testenv.GitCmd("", nil, "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	for _, m := range mails {
		postToInbox(t, dir, time.Time{}, m)
	}
	return dir
}

// postToInbox adds one mail to the inbox at dir as public-inbox does, its
// commit dated at (now when zero).
func postToInbox(t *testing.T, dir string, at time.Time, mail string) {
	t.Helper()
	run := func(stdin string, args ...string) string {
		cmd := testenv.GitCmd("", nil, append([]string{"--git-dir", dir}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME=pi", "GIT_AUTHOR_EMAIL=pi@example.org", "GIT_COMMITTER_NAME=pi", "GIT_COMMITTER_EMAIL=pi@example.org")
		if !at.IsZero() {
			d := fmt.Sprintf("%d +0000", at.Unix())
			cmd.Env = append(cmd.Env, "GIT_AUTHOR_DATE="+d, "GIT_COMMITTER_DATE="+d)
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	blob := run(mail, "hash-object", "-w", "--stdin")
	tree := run("100644 blob "+blob+"\tm\n", "mktree")
	args := []string{"commit-tree", tree, "-m", "mail"}
	parent := run("", "for-each-ref", "--format=%(objectname)", "refs/heads/master")
	if parent != "" {
		args = append(args, "-p", parent)
	}
	run("", "update-ref", "refs/heads/master", run("", args...))
}

// svcrdmaMail is a one-hunk svcrdma patch mail to linux-nfs, dated date,
// answering irt when it is not "".
func svcrdmaMail(id, subject, irt string, date time.Time) string {
	h := "From: Dev <dev@example.org>\nTo: linux-nfs@vger.kernel.org\nSubject: " + subject +
		"\nDate: " + date.Format(time.RFC1123Z) + "\nMessage-ID: <" + id + ">\n"
	if irt != "" {
		h += "In-Reply-To: <" + irt + ">\nReferences: <" + irt + ">\n"
	}
	return h + "\nSigned-off-by: Dev <dev@example.org>\n---\n" +
		"diff --git a/net/sunrpc/xprtrdma/svc_rdma.c b/net/sunrpc/xprtrdma/svc_rdma.c\n" +
		"--- a/net/sunrpc/xprtrdma/svc_rdma.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma.c\n@@ -1,1 +1,1 @@\n-a\n+b\n"
}

// The grace period of an incomplete series runs from when the bot first
// read its newest mail, not from the archive's dates: a two-patch series
// dated hours ago and posted one mail at a time is not INCOMPLETE between
// its mails; one whose second patch never comes is, once the grace has
// passed since its first was read. An old epoch read at a first start
// stays quiet: its incomplete series are older than the window, or begin
// at its edge, and are not news.
func TestPollGraceRunsFromIngest(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	const grace = 20 * time.Minute
	const window = 7 * 24 * time.Hour
	old := now.Add(-3 * time.Hour) // the archive's date of the new series' mail
	dir := inboxEpoch(t)
	// The old epoch: a series older than the window, and one cut by its
	// edge (its first patch older than the window).
	postToInbox(t, dir, now.Add(-window-time.Hour), svcrdmaMail("gone1@x", "[PATCH 1/2] svcrdma: gone", "", now.Add(-window-time.Hour)))
	postToInbox(t, dir, now.Add(-window-time.Minute), svcrdmaMail("edge1@x", "[PATCH 1/2] svcrdma: edge", "", now.Add(-window-time.Minute)))
	postToInbox(t, dir, now.Add(-window+2*grace), svcrdmaMail("edge2@x", "[PATCH 2/2] svcrdma: edge", "edge1@x", now.Add(-window+2*grace)))
	postToInbox(t, dir, old, svcrdmaMail("a1@x", "[PATCH 1/2] svcrdma: late", "", old))
	cfg := lore.DefaultConfig()
	cfg.Lists = cfg.Lists[1:2]
	cfg.Lists[0].URL = dir
	cfg.GracePeriod.Duration = grace
	ctx := context.Background()
	st := newMemStore()
	l := newReader(cfg, st, slog.New(slog.DiscardHandler))
	l.Now = func() time.Time { return now }
	l.Window = window
	poll := func(when string) map[string]string {
		t.Helper()
		got, err := l.Poll(ctx)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		out := map[string]string{}
		for _, s := range got {
			out[s.Subject] = "complete"
			if s.Incomplete != "" {
				out[s.Subject] = "incomplete: " + s.Incomplete
			}
		}
		t.Logf("%s: %v", when, out)
		return out
	}
	if got := poll("first patch read"); len(got) != 0 {
		t.Errorf("first patch just read, dated %v ago: %v, want nothing yet", now.Sub(old), got)
	}
	now = now.Add(grace / 2)
	if got := poll("within the grace"); len(got) != 0 {
		t.Errorf("within the grace since it was read: %v, want nothing", got)
	}
	postToInbox(t, dir, old.Add(time.Minute), svcrdmaMail("a2@x", "[PATCH 2/2] svcrdma: late", "a1@x", old.Add(time.Minute)))
	postToInbox(t, dir, old, svcrdmaMail("b1@x", "[PATCH 1/2] svcrdma: lost", "", old))
	if got := poll("second patch read"); len(got) != 1 || got["svcrdma: late"] != "complete" {
		t.Errorf("second patch read: %v, want the late series complete and nothing else", got)
	}
	now = now.Add(grace - time.Second)
	if got := poll("just before the grace"); got["svcrdma: lost"] != "" {
		t.Errorf("%v since the lost series was read: %v, want it waiting", grace-time.Second, got)
	}
	now = now.Add(time.Second)
	got := poll("grace passed")
	if len(got) != 2 || !strings.HasPrefix(got["svcrdma: lost"], "incomplete: patch 2 of 2 missing") {
		t.Errorf("grace passed since the lost series was read: %v, want it INCOMPLETE, and no series of the old epoch", got)
	}
	// Much later still nothing of the old epoch is news.
	now = now.Add(3 * grace)
	if got := poll("later"); got["svcrdma: gone"] != "" || got["svcrdma: edge"] != "" {
		t.Errorf("old epoch: %v", got)
	}
}

// One list that cannot be read (a dead mirror, no network) neither stops
// the others nor is read again before its backoff ends; it is reported.
func TestPollGoesOnWhenOneListFails(t *testing.T) {
	now := time.Now()
	patch := "From: Dev <dev@example.org>\nTo: linux-nfs@vger.kernel.org\nSubject: [PATCH] svcrdma: fix a comment\n" +
		"Date: " + now.Add(-time.Hour).Format(time.RFC1123Z) + "\nMessage-ID: <one@example.org>\n\n" +
		"Signed-off-by: Dev <dev@example.org>\n---\n" +
		"diff --git a/net/sunrpc/xprtrdma/svc_rdma.c b/net/sunrpc/xprtrdma/svc_rdma.c\n" +
		"--- a/net/sunrpc/xprtrdma/svc_rdma.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma.c\n@@ -1,1 +1,1 @@\n-a\n+b\n"
	cfg := lore.DefaultConfig()
	cfg.Lists = cfg.Lists[:2]
	cfg.Lists[0].URL = filepath.Join(t.TempDir(), "no-such-inbox") // linux-rdma: dead
	cfg.Lists[1].URL = inboxEpoch(t, patch)                        // linux-nfs: fine
	ctx := context.Background()
	st := newMemStore()
	l := newReader(cfg, st, slog.New(slog.DiscardHandler))
	l.Now = func() time.Time { return now }
	got, err := l.Poll(ctx)
	if err != nil {
		t.Fatalf("one dead list failed the poll: %v", err)
	}
	if len(got) != 1 || got[0].Subject != "svcrdma: fix a comment" {
		t.Fatalf("%d series, want the linux-nfs patch", len(got))
	}
	failures := func(list string) int {
		return st.failing()[list].Failures
	}
	if f := st.failing(); len(f) != 1 || f["linux-rdma"].Failures != 1 || f["linux-rdma"].Err == "" {
		t.Fatalf("failing lists %+v, want linux-rdma once", f)
	}
	// Within its backoff the dead list is not read again.
	if _, err := l.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := failures("linux-rdma"); n != 1 {
		t.Errorf("dead list read again within its backoff: %d failures", n)
	}
	// After it, it is (counted from when the failure was recorded: the
	// store's clock was the real one, some time after now under load).
	// The first failure's backoff is 30 s.
	now = st.failing()["linux-rdma"].At.Add(31 * time.Second)
	st.now = func() time.Time { return now }
	l.Poll(ctx)
	if n := failures("linux-rdma"); n != 2 {
		t.Errorf("dead list not retried after its backoff: %d failures", n)
	}
	// Every list dead: the poll fails and names them.
	cfg.Lists[1].URL = filepath.Join(t.TempDir(), "gone")
	l2 := newReader(cfg, st, slog.New(slog.DiscardHandler))
	l2.Now = l.Now
	if _, err := l2.Poll(ctx); err == nil || !flow.IsInfra(err) || !strings.Contains(err.Error(), "linux-nfs") {
		t.Errorf("every list dead: %v, want an infra error naming them", err)
	}
}

// "Applied, thanks!" stops a series from being tested only when one of
// the maintainers wrote it, in a mail that proves its From: as a
// command's must (DKIM): anyone may send that line, in anyone's name.
// A signed note whose key cannot be looked up yet holds the series for
// a later poll.
func TestPollAppliedOnlyByMaintainers(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	now := time.Date(2024, 6, 2, 0, 0, 0, 0, time.UTC)
	file := "net/sunrpc/xprtrdma/svc_rdma_rw.c"
	note := func(id string) string {
		return "From: Mallory <mallory@example.org>\nSubject: Re: [PATCH] svcrdma: x\nMessage-ID: <" + id + ">\nIn-Reply-To: <p@example.org>\n" +
			"References: <p@example.org>\nDate: Sat, 1 Jun 2024 13:00:00 +0000\n\nApplied, thanks!\n"
	}
	add := func(pos int, raw string) {
		t.Helper()
		if err := st.AddMail(ctx, Mail{List: "linux-nfs", Pos: fmt.Sprint(pos), Received: now.Add(-time.Hour), Raw: []byte(raw)}); err != nil {
			t.Fatal(err)
		}
	}
	add(0, "From: Dev One <dev@example.org>\nSubject: [PATCH] svcrdma: x\nMessage-ID: <p@example.org>\nDate: Sat, 1 Jun 2024 12:00:00 +0000\n\n"+
		"Change.\n\nSigned-off-by: Dev One <dev@example.org>\n---\ndiff --git a/"+file+" b/"+file+
		"\nindex 1..2 100644\n--- a/"+file+"\n+++ b/"+file+"\n@@ -1 +1 @@\n-a\n+b\n")
	add(1, note("ty-forged@example.org"))
	key := dkimtest.NewKey(t, "example.org", "s1")
	cfg := lore.DefaultConfig()
	cfg.Lists = nil // the mail is stored already: nothing to read
	l := newReader(cfg, st, slog.New(slog.DiscardHandler))
	l.Now = func() time.Time { return now }
	l.Window = 7 * 24 * time.Hour
	l.Auth = &lore.DKIM{Resolver: dkimtest.Publish(key)}
	poll := func(what string, want int) {
		t.Helper()
		if got, err := l.Poll(ctx); err != nil || len(got) != want {
			t.Errorf("%s: %d series, %v; want %d", what, len(got), err, want)
		}
	}
	l.Cfg.Maintainers = []string{"Mallory@example.org"}
	poll(`an unsigned "Applied" in a maintainer's name`, 1)
	l.Cfg.Maintainers = nil
	signedNote := key.Sign(t, []byte(note("ty@example.org")))
	add(2, string(signedNote))
	poll(`a stranger's "Applied"`, 1)
	l.Maintainers = fixedMaintainers{"someone@example.org"}
	poll(`"Applied" from one MAINTAINERS does not list`, 1)
	l.Maintainers = fixedMaintainers{"mallory@example.org"}
	// The poll ends (serve stops) while the key is looked up.
	cctx, cancel := context.WithCancel(ctx)
	l.Auth = &lore.DKIM{Resolver: cancelingResolver(cancel)}
	if got, err := l.Poll(cctx); !errors.Is(err, context.Canceled) || got != nil {
		t.Errorf("a poll ended while a note's key was looked up: %d series, %v", len(got), err)
	}
	l.Auth = &lore.DKIM{Resolver: &dkimtest.Resolver{Err: &net.DNSError{Err: "i/o timeout", Name: key.Name(), IsTimeout: true}}}
	var log bytes.Buffer
	l.Log = slog.New(slog.NewTextHandler(&log, nil))
	poll(`a maintainer's signed "Applied" while its key cannot be looked up`, 0)
	noteMail, err := lore.ParseMessage(signedNote)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := st.State(ctx, DKIMKey(noteMail)); v != "" || !strings.Contains(log.String(), "applied note not decided yet") {
		t.Errorf("a verdict kept while the key could not be looked up: %q; log %s", v, log.String())
	}
	l.Auth = &lore.DKIM{Resolver: dkimtest.Publish(key)}
	poll(`"Applied" from a maintainer MAINTAINERS lists`, 0)
	if v, _ := st.State(ctx, DKIMKey(noteMail)); v != "verified" {
		t.Errorf("the signed note's verdict kept: %q", v)
	}
	l.Maintainers = nil
	l.Cfg.Maintainers = []string{"Mallory@example.org"}
	poll(`a maintainer's "Applied"`, 0)
}

// The error paths of mail commands, read by Poll from a real inbox: a
// line that does not parse and a command on an incomplete series are
// refused with the reason (an unknown tree or branch is passed on: the
// bot refuses it, bot.TestMailCommandsActedOnOnce); a stranger's command
// waits while MAINTAINERS cannot be read here; the author's and an
// allowed address's are done. A list URL that is not a valid imap://
// URL fails that list only, recorded in its health.
func TestPollMailCommandErrors(t *testing.T) {
	now := time.Now()
	date := now.Add(-time.Hour).Format(time.RFC1123Z)
	msg := func(from, id, subject, irt, body string) string {
		h := "From: " + from + "\nTo: linux-nfs@vger.kernel.org\nSubject: " + subject + "\nDate: " + date + "\nMessage-ID: <" + id + ">\n"
		if irt != "" {
			h += "In-Reply-To: <" + irt + ">\nReferences: <" + irt + ">\n"
		}
		return h + "\n" + body
	}
	diff := "Signed-off-by: Dev <dev@example.org>\n---\n" +
		"diff --git a/net/sunrpc/xprtrdma/svc_rdma.c b/net/sunrpc/xprtrdma/svc_rdma.c\n" +
		"--- a/net/sunrpc/xprtrdma/svc_rdma.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma.c\n@@ -1,1 +1,1 @@\n-a\n+b\n"
	re := "Re: [PATCH] svcrdma: fix"
	key := dkimtest.NewKey(t, "example.org", "s1")
	signed := func(m string) string { return string(key.Sign(t, []byte(m))) }
	mails := []string{
		msg("Dev <dev@example.org>", "p@x", "[PATCH] svcrdma: fix", "", diff),
		msg("Half <half@example.org>", "h1@x", "[PATCH 1/2] svcrdma: half", "", diff),
		msg("Dev <dev@example.org>", "c-bad@x", re, "p@x", "#rdmabot frobnicate\n"),
		signed(msg("Dev <dev@example.org>", "c-tree@x", re, "p@x", "#rdmabot test nosuchtree\n")),
		signed(msg("Dev <dev@example.org>", "c-branch@x", re, "p@x", "#rdmabot test rdma nosuchbranch\n")),
		msg("Half <half@example.org>", "c-half@x", "Re: [PATCH 1/2] svcrdma: half", "h1@x", "#rdmabot test\n"),
		msg("Eve <eve@example.org>", "c-eve@x", re, "p@x", "#rdmabot retest\n"),
		signed(msg("Dev <dev@example.org>", "c-author@x", re, "p@x", "#rdmabot test rdma for-rc\n")),
		signed(msg("Ok <ok@example.org>", "c-ok@x", re, "p@x", "#rdmabot retest\n")),
		signed(msg("Dev <dev@example.org>", "c-invalid@x", re, "p@x", "#rdmabot invalid the lab was busy\n")),
		signed(msg("Ok <ok@example.org>", "c-okinvalid@x", re, "p@x", "#rdmabot invalid the lab was busy\n")),
		signed(msg("Half <half@example.org>", "c-halfdup@x", "Re: [PATCH 1/2] svcrdma: half", "h1@x", "#rdmabot dup <older@x>\n")),
		signed(msg("Ok <ok@example.org>", "c-okdup@x", "Re: [PATCH 1/2] svcrdma: half", "h1@x", "#rdmabot dup <older@x>\n")),
	}
	cfg := lore.DefaultConfig()
	cfg.Lists = cfg.Lists[:2]
	cfg.Lists[0].URL = "imap://[::1/nope" // linux-rdma: not a URL
	cfg.Lists[1].URL = inboxEpoch(t, mails...)
	cfg.CommandAllow = []string{"ok@example.org"}
	ctx := context.Background()
	st := newMemStore()
	l := newReader(cfg, st, slog.New(slog.DiscardHandler))
	l.Now = func() time.Time { return now }
	l.Auth = &lore.DKIM{Resolver: dkimtest.Publish(key)}
	got, err := l.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f := st.failing(); !strings.Contains(f["linux-rdma"].Err, "lore.lists linux-rdma") {
		t.Errorf("bad imap URL: %+v", f)
	}
	res := map[string]string{}
	for _, s := range got {
		if c := s.Command; c != nil {
			res[c.MsgID] = c.Verb + " " + c.Tree + "/" + c.Branch
			if c.Verb == flow.CommandInvalid || c.Verb == flow.CommandDup {
				res[c.MsgID] = "dispute " + c.Verb + ": " + c.Note
			}
			if c.Refused != "" {
				res[c.MsgID] = "refused: " + c.Refused
			}
		}
	}
	for id, want := range map[string]string{
		"c-bad@x": `refused: I did not understand that: unknown command "frobnicate"`,
		// Which trees and branches there are, the bot decides
		// (bot.TestMailCommandsActedOnOnce).
		"c-tree@x":   "test nosuchtree/",
		"c-branch@x": "test rdma/nosuchbranch",
		"c-half@x":   "refused: The series is incomplete (patch 2 of 2 missing)",
		"c-author@x": "test rdma/for-rc",
		"c-ok@x":     "retest /",
		// A dispute needs no complete series: it is about the report;
		// nor may the series' author make it.
		"c-okinvalid@x": "dispute invalid: the lab was busy",
		"c-okdup@x":     "dispute dup: <older@x>",
		"c-invalid@x":   "refused: The author of a series may not dispute my report on it",
		"c-halfdup@x":   "refused: The author of a series may not dispute my report on it",
	} {
		if !strings.HasPrefix(res[id], want) {
			t.Errorf("%s: %q, want %q", id, res[id], want)
		}
	}
	if r, ok := res["c-eve@x"]; ok {
		t.Errorf("a stranger's command was decided without MAINTAINERS: %s", r)
	}
}

// A command acts only when its mail proves its From: with DKIM, whoever
// it names: the author, an address MAINTAINERS lists, one in
// lore.command_allow. An unsigned one is refused with why, even while
// the resolver is down; a signed one waits while its key cannot be looked
// up; a stranger is refused for being one. The first verdict is kept, so
// a key rotated (or a signature expired) later, or a restart, changes
// nothing; lore.command_dkim = false takes From: at its word.
func TestPollMailCommandsNeedDKIM(t *testing.T) {
	now := time.Now()
	date := now.Add(-time.Hour).Format(time.RFC1123Z)
	msg := func(from, id, body string) string {
		subject, irt := "Re: [PATCH] svcrdma: fix", "In-Reply-To: <p@x>\nReferences: <p@x>\n"
		if id == "p@x" {
			subject, irt = "[PATCH] svcrdma: fix", ""
		}
		return "From: " + from + "\nTo: linux-nfs@vger.kernel.org\nSubject: " + subject + "\nDate: " + date + "\nMessage-ID: <" + id + ">\n" + irt + "\n" + body
	}
	key := dkimtest.NewKey(t, "example.org", "s1")
	signed := func(m string) string { return string(key.Sign(t, []byte(m))) }
	diff := "Signed-off-by: Dev <dev@example.org>\n---\n" +
		"diff --git a/net/sunrpc/xprtrdma/svc_rdma.c b/net/sunrpc/xprtrdma/svc_rdma.c\n" +
		"--- a/net/sunrpc/xprtrdma/svc_rdma.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma.c\n@@ -1,1 +1,1 @@\n-a\n+b\n"
	cfg := lore.DefaultConfig()
	cfg.Lists = cfg.Lists[1:2]
	author := signed(msg("Dev <dev@example.org>", "c-author@x", "#rdmabot test\n"))
	cfg.Lists[0].URL = inboxEpoch(t,
		msg("Dev <dev@example.org>", "p@x", diff),
		author,
		msg("Dev <dev@example.org>", "c-author-forged@x", "#rdmabot retest\n"),
		signed(msg("Maint <m@example.org>", "c-maint@x", "#rdmabot test\n")),
		msg("Maint <m@example.org>", "c-maint-forged@x", "#rdmabot test\n"),
		msg("Ok <ok@example.org>", "c-allowed-forged@x", "#rdmabot test\n"),
		signed(msg("Eve <eve@example.org>", "c-eve@x", "#rdmabot test\n")),
	)
	cfg.CommandAllow = []string{"ok@example.org"}
	ctx := context.Background()
	st := newMemStore()
	poll := func(cfg lore.Config, r lore.TXTResolver) map[string]string {
		t.Helper()
		l := newReader(cfg, st, slog.New(slog.DiscardHandler))
		l.Now = func() time.Time { return now }
		l.Maintainers = fixedMaintainers{"m@example.org"}
		if r != nil {
			l.Auth.(*lore.DKIM).Resolver = r
		} else if l.Auth != nil {
			t.Fatalf("lore.command_dkim = false, and commands are authenticated")
		}
		got, err := l.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res := map[string]string{}
		for _, s := range got {
			if c := s.Command; c != nil {
				res[c.MsgID] = "do"
				if c.Refused != "" {
					res[c.MsgID] = c.Refused
				}
			}
		}
		return res
	}
	unsigned := func(addr string) string {
		return "I could not verify that this mail comes from " + addr + ": no DKIM signature of example.org verifies (it carries none). " +
			"I act on commands only from mail whose sender's domain signed it."
	}
	check := func(phase string, got, want map[string]string) {
		t.Helper()
		for id, w := range want {
			if got[id] != w {
				t.Errorf("%s: %s: %q, want %q", phase, id, got[id], w)
			}
		}
		for id := range got {
			if _, ok := want[id]; !ok {
				t.Errorf("%s: %s decided: %q", phase, id, got[id])
			}
		}
	}
	want := map[string]string{
		"c-author-forged@x":  unsigned("dev@example.org"),
		"c-maint-forged@x":   unsigned("m@example.org"),
		"c-allowed-forged@x": unsigned("ok@example.org"),
		"c-eve@x":            "Only the series' author, the maintainers and reviewers MAINTAINERS lists for its files, and the addresses the operator allows may ask me to test it; eve@example.org is none of them.",
	}
	down := &dkimtest.Resolver{Err: &net.DNSError{Err: "i/o timeout", Name: key.Name(), IsTimeout: true}}
	check("resolver down", poll(cfg, down), want)

	want["c-author@x"], want["c-maint@x"] = "do", "do"
	check("resolver up", poll(cfg, dkimtest.Publish(key)), want)
	authorMail, err := lore.ParseMessage([]byte(author))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := st.State(ctx, DKIMKey(authorMail)); v != "verified" {
		t.Errorf("kept verdict %q", v)
	}
	// The key is gone from DNS (rotated; or the signature expired):
	// another serve on the same store decides as the first did.
	check("key rotated", poll(cfg, dkimtest.Publish()), want)

	cfg.CommandDKIM = false
	for _, id := range []string{"c-author-forged@x", "c-maint-forged@x", "c-allowed-forged@x"} {
		want[id] = "do"
	}
	check("command_dkim = false", poll(cfg, nil), want)
}

// cancelingResolver ends the context of the poll that looks a key up.
type cancelingResolver func()

func (c cancelingResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	c()
	return nil, ctx.Err()
}

// fixedMaintainers is MAINTAINERS listing the same addresses for every file.
type fixedMaintainers []string

func (f fixedMaintainers) SelectBase(ctx context.Context, s flow.Series) (flow.Base, error) {
	return flow.Base{Tree: "mainline", Commit: strings.Repeat("b", 40)}, nil
}

func (f fixedMaintainers) MaintainersOf(ctx context.Context, commit string, files []string) ([]string, error) {
	return f, nil
}

// A series' Closes: trailers reach the bot as Message-IDs, whether they
// name a lore URL or a bare Message-ID, and its Fixes: as commits; the
// patch's notes, a URL that names no message and a Fixes: that names no
// commit hash do not.
func TestReadMboxCloses(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "sample-series.mbox"))
	if err != nil {
		t.Fatal(err)
	}
	trailers := "Reported-by: rdmabot <rdmabot@rdmabot.invalid>\n" +
		"Closes: https://lore.kernel.org/r/20261130040506.2ce58ffafd08-rdmabot@rdmabot.invalid/\n" +
		"Closes: <second@example.org>\n" +
		"Closes: https://bugzilla.kernel.org/show_bug.cgi?id=1\n" +
		"Closes: https://lore.kernel.org/r/20261130040506.2ce58ffafd08-rdmabot@rdmabot.invalid/\n" +
		"Fixes: 0123456789AB (\"svcrdma: pace Send WRs\")\n" +
		"Fixes: not-a-commit\n" +
		"Fixes: 0123abc (\"too short\")\n"
	mbox := strings.Replace(string(raw), "Signed-off-by: Ada", trailers+"Signed-off-by: Ada", 1)
	mbox = strings.Replace(mbox, " 1 file changed", "Closes: <in-the-notes@example.org>\n 1 file changed", 1)
	st := newMemStore()
	s, err := newReader(lore.DefaultConfig(), st, slog.New(slog.DiscardHandler)).ReadMbox(context.Background(), []byte(mbox))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"20261130040506.2ce58ffafd08-rdmabot@rdmabot.invalid", "second@example.org"}
	if !slices.Equal(s.Closes, want) {
		t.Fatalf("closes %q, want %q", s.Closes, want)
	}
	if s.Root != "20261201100000.4242-1-ada@example.org" {
		t.Errorf("root %q, want the patch's Message-ID", s.Root)
	}
	if want := []string{"0123456789ab"}; !slices.Equal(s.Fixes, want) {
		t.Fatalf("fixes %q, want %q", s.Fixes, want)
	}
}

// A list URL's password is in no error the poll logs, records or
// returns: not for an imap:// URL with a typo, nor for a mirror whose
// fetch error quotes its URL.
func TestPollHidesListPasswords(t *testing.T) {
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer mirror.Close()
	cfg := lore.DefaultConfig()
	cfg.Lists = cfg.Lists[:2]
	cfg.Lists[0].URL = "imap://rdmabot:s3cret@lore.example:99x/org.kernel.vger.linux-rdma"
	cfg.Lists[1].URL = strings.Replace(mirror.URL, "://", "://rdmabot:s3cret@", 1) + "/linux-nfs"
	ctx := context.Background()
	st := newMemStore()
	var logged bytes.Buffer
	l := newReader(cfg, st, slog.New(slog.NewTextHandler(&logged, nil)))
	_, err := l.Poll(ctx)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "rdmabot:xxxxx@") {
		t.Errorf("poll: %v", err)
	}
	if strings.Contains(logged.String(), "s3cret") || !strings.Contains(logged.String(), "rdmabot:xxxxx@") {
		t.Errorf("log:\n%s", logged.String())
	}
	failing := st.failing()
	if len(failing) != 2 {
		t.Fatalf("failing %v", failing)
	}
	for name, h := range failing {
		if strings.Contains(h.Err, "s3cret") {
			t.Errorf("%s: %s", name, h.Err)
		}
	}
}

// UnreadLocal names a local inbox while it holds mail no poll has read,
// and never one whose inbox does not exist yet, nor a list read over the
// network (its mirror is fetched only by a poll).
func TestUnreadLocal(t *testing.T) {
	ctx := context.Background()
	cfg := lore.DefaultConfig()
	inbox := inboxEpoch(t)
	cfg.Lists[2].URL = inbox                                            // local: a path
	cfg.Lists[1].URL = filepath.Join(t.TempDir(), "nothing-posted-yet") // linux-nfs, as a path
	cfg.Lists[0].URL = "imap://127.0.0.1:1/linux-rdma"                  // never dialled but by a poll
	st := newMemStore()
	l := newReader(cfg, st, slog.New(slog.DiscardHandler))
	unread := func() []string {
		t.Helper()
		got, err := l.UnreadLocal(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := unread(); len(got) != 0 {
		t.Fatalf("an empty inbox: %q", got)
	}
	postToInbox(t, inbox, time.Time{}, "From: a@example.org\nSubject: hello\nMessage-ID: <h@example.org>\n\nhi\n")
	tip := strings.TrimSpace(testenv.Git(t, "", "--git-dir", inbox, "rev-parse", "refs/heads/master"))
	if got := unread(); len(got) != 1 || got[0] != "local 0:"+tip {
		t.Fatalf("after a posting: %q, want local at %s", got, tip)
	}
	// A poll reads it (and fails on the other two lists).
	if _, err := l.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := unread(); len(got) != 0 {
		t.Fatalf("after the poll: %q", got)
	}
	cfg.Lists[2].URL = t.TempDir() // a folder that is no inbox
	l2 := newReader(cfg, st, slog.New(slog.DiscardHandler))
	if _, err := l2.UnreadLocal(ctx); err == nil || !strings.Contains(err.Error(), "local") {
		t.Fatalf("a folder that is no inbox: %v", err)
	}
}

// Series read in one poll come out in the order the archive received
// them whole, whatever their Date headers say: a backdated posting does
// not jump the queue. Series that arrived in the same second keep their
// Date order.
func TestPollOrdersSeriesByArrival(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	dir := inboxEpoch(t)
	// first: posted first, dated last. backdated: posted second, dated
	// a day before. Its second patch comes last, so it is whole last.
	// same1 and same2 arrive in one second, dated in that order.
	at := now.Add(-10 * time.Minute)
	postToInbox(t, dir, at, svcrdmaMail("back1@x", "[PATCH 1/2] svcrdma: backdated", "", now.Add(-24*time.Hour)))
	postToInbox(t, dir, at.Add(time.Minute), svcrdmaMail("first@x", "[PATCH] svcrdma: first", "", now))
	postToInbox(t, dir, at.Add(2*time.Minute), svcrdmaMail("same2@x", "[PATCH] svcrdma: same second, dated later", "", now.Add(-time.Hour)))
	postToInbox(t, dir, at.Add(2*time.Minute), svcrdmaMail("same1@x", "[PATCH] svcrdma: same second, dated earlier", "", now.Add(-2*time.Hour)))
	postToInbox(t, dir, at.Add(3*time.Minute), svcrdmaMail("back2@x", "[PATCH 2/2] svcrdma: backdated", "back1@x", now.Add(-24*time.Hour)))
	cfg := lore.DefaultConfig()
	cfg.Lists = cfg.Lists[1:2]
	cfg.Lists[0].URL = dir
	l := newReader(cfg, newMemStore(), slog.New(slog.DiscardHandler))
	l.Now = func() time.Time { return now }
	got, err := l.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, s := range got {
		order = append(order, s.Subject)
	}
	want := []string{"svcrdma: first", "svcrdma: same second, dated earlier", "svcrdma: same second, dated later", "svcrdma: backdated"}
	if !slices.Equal(order, want) {
		t.Errorf("series in the order\n%q\nwant the archive's\n%q", order, want)
	}
}
