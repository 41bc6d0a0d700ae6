package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
)

// A series' link is a web archive's page: a local inbox's path or an
// IMAP mailbox gives none rather than a dead one.
func TestConvertLinksOnlyWebArchives(t *testing.T) {
	for url, want := range map[string]string{
		"https://lore.kernel.org/linux-rdma":                 "https://lore.kernel.org/linux-rdma/a@x/",
		"http://127.0.0.1:8080/linux-rdma/":                  "http://127.0.0.1:8080/linux-rdma/a@x/",
		"inbox/local":                                        "",
		"imaps://lore.kernel.org/org.kernel.vger.linux-rdma": "",
	} {
		cfg := lore.Config{Lists: []lore.ListConfig{{Name: "l", Address: "l@x", URL: url}}}
		s := convert(&lore.Series{ID: "a@x", RootMessageID: "a@x", Lists: []string{"l"}}, cfg)
		if s.Link != want || s.List != "l@x" {
			t.Errorf("%s: link %q list %q, want %q", url, s.Link, s.List, want)
		}
	}
}

// The window's mail is parsed once, not once per poll (a mail with
// 40,000 References took seconds each time), and what left the window
// is forgotten.
func TestParsedOnce(t *testing.T) {
	l := &Reader{}
	raw := []byte("From: A <a@x>\nSubject: s\nMessage-ID: <m@x>\n\nbody\n")
	first, err := l.parsed("k", raw)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := l.parsed("k", raw)
	if again != first {
		t.Error("the same mail was parsed again")
	}
	l.forgetParsed(map[string]bool{})
	if after, _ := l.parsed("k", raw); after == first {
		t.Error("mail that left the window was kept")
	}
}

// A list that failed n times in a row is left alone for 30 s, doubling,
// up to an hour.
func TestListBackoff(t *testing.T) {
	for n, want := range map[int]string{0: "0s", 1: "30s", 2: "1m0s", 8: "1h0m0s", 30: "1h0m0s"} {
		if got := listBackoff(n).String(); got != want {
			t.Errorf("listBackoff(%d) = %s, want %s", n, got, want)
		}
	}
}

// stateStore keeps the intake's state in memory, failing as a database
// does once its context ends or it is closed; nothing else is called.
type stateStore struct {
	Store
	closed bool
	state  map[string]string
}

func (s *stateStore) State(ctx context.Context, key string) (string, error) {
	if s.closed {
		return "", errors.New("sql: database is closed")
	}
	return s.state[key], ctx.Err()
}

func (s *stateStore) SetState(ctx context.Context, key, v string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.state[key] = v
	return nil
}

type authFunc func(context.Context, *flow.Message) error

func (f authFunc) Authenticate(ctx context.Context, m *flow.Message) error { return f(ctx, m) }

// A command's DKIM verdict that cannot be read or kept is the bot's
// failure (Infra), and decides nothing.
func TestDKIMVerdictStoreErrors(t *testing.T) {
	ctx := context.Background()
	m, err := lore.ParseMessage([]byte("From: Dev <dev@example.org>\nMessage-ID: <c@x>\n\n#rdmabot test\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := &stateStore{state: map[string]string{}}
	l := &Reader{St: st}
	// The verdict is reached, but the poll ends before it is kept.
	cctx, cancel := context.WithCancel(ctx)
	l.Auth = authFunc(func(context.Context, *flow.Message) error { cancel(); return nil })
	why, err := l.authenticate(cctx, m)
	if !flow.IsInfra(err) || why != "" || len(st.state) != 0 {
		t.Errorf("verdict not kept: %q, %v, state %v; want an Infra error", why, err, st.state)
	}
	st.closed = true
	why, err = l.authenticate(ctx, m)
	if !flow.IsInfra(err) || why != "" {
		t.Errorf("closed store: %q, %v; want an Infra error", why, err)
	}
	// Kept, it is the answer from then on, whatever DKIM says later.
	st.closed = false
	if why, err := l.authenticate(ctx, m); err != nil || why != "" || st.state[DKIMKey(m)] != "verified" {
		t.Fatalf("verified: %q, %v, state %v", why, err, st.state)
	}
	l.Auth = authFunc(func(context.Context, *flow.Message) error { return &lore.UnverifiedError{Addr: "dev@example.org"} })
	if why, err := l.authenticate(ctx, m); err != nil || why != "" {
		t.Errorf("a kept verdict decided again: %q, %v", why, err)
	}
	// Another mail under the same Message-ID (a forgery beside the
	// signed one) is decided on its own bytes.
	twin, err := lore.ParseMessage([]byte("From: Dev <dev@example.org>\nMessage-ID: <c@x>\n\n#rdmabot invalid\n"))
	if err != nil {
		t.Fatal(err)
	}
	if why, err := l.authenticate(ctx, twin); err != nil || why == "" {
		t.Errorf("a forged twin of a verified mail: %q, %v; want it refused", why, err)
	}
	// What an older bot kept per Message-ID is still that mail's answer.
	old, err := lore.ParseMessage([]byte("From: Dev <dev@example.org>\nMessage-ID: <old@x>\n\n#rdmabot test\n"))
	if err != nil {
		t.Fatal(err)
	}
	st.state["dkim:old@x"] = "verified"
	if why, err := l.authenticate(ctx, old); err != nil || why != "" {
		t.Errorf("a verdict an older bot kept: %q, %v", why, err)
	}
}

// A series an older bot stored with its mails raw is read as intake
// reads a new one: each mail parsed, its diffs' lines and files, its
// root. One already read is left alone, and a mail that no longer
// parses leaves the series as it was.
func TestReread(t *testing.T) {
	patch := []byte("From: Dev <dev@x>\nSubject: [PATCH] svcrdma: x\nMessage-ID: <p@x>\n\n---\n" +
		"diff --git a/net/sunrpc/xprtrdma/svc_rdma_sendto.c b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n" +
		"--- a/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n" +
		"@@ -1,2 +1,2 @@ int svc_rdma_sendto(void)\n a\n-b\n+c\n")
	cover := []byte("From: Dev <dev@x>\nSubject: [PATCH 0/1] svcrdma\nMessage-ID: <c@x>\n\nwhy\n")
	s := flow.Series{MsgID: "c@x", Cover: &flow.Message{Raw: cover}, Patches: []*flow.Message{{Raw: patch}}}
	changed, err := Reread(&s)
	if err != nil || !changed {
		t.Fatalf("Reread: %v %v", changed, err)
	}
	if !s.Cover.Parsed() || s.Patches[0].Subject != "[PATCH] svcrdma: x" || s.Root != "c@x" ||
		len(s.Changes) != 3 || s.Changes[0].File != "net/sunrpc/xprtrdma/svc_rdma_sendto.c" ||
		len(s.Files) != 1 || string(s.Patches[0].Raw) != string(patch) {
		t.Errorf("reread: root %q, patch %+v, changes %+v, files %v", s.Root, s.Patches[0], s.Changes, s.Files)
	}
	if changed, err := Reread(&s); changed || err != nil {
		t.Errorf("a series already read: changed %v, %v", changed, err)
	}
	bad := flow.Series{MsgID: "b@x", Patches: []*flow.Message{{Raw: patch}, {Raw: []byte("\n\nno header")}}}
	if changed, err := Reread(&bad); changed || err == nil || bad.Patches[0].Parsed() || bad.Changes != nil {
		t.Errorf("a mail that does not parse: changed %v, %v, series %+v", changed, err, bad)
	}
}

// A maintainer's applied note counts once its mail is proven: one not
// proven yet (no DNS answer) holds the series unless another is proven;
// one that is not proven, or a stranger's, counts for nothing. The
// series waits for a later poll only when its answer may still change.
func TestAppliedNeedsProof(t *testing.T) {
	ctx := context.Background()
	note := func(id, from string) lore.Applied {
		m, err := lore.ParseMessage([]byte("From: " + from + "\nMessage-ID: <" + id + ">\n\nApplied, thanks!\n"))
		if err != nil {
			t.Fatal(err)
		}
		return lore.Applied{By: m.From, MessageID: id, Mail: m}
	}
	answers := map[string]error{
		"later@x":    flow.MarkInfra(errors.New("i/o timeout")),
		"unsigned@x": &lore.UnverifiedError{Addr: "m@x", Why: "it carries none"},
		"signed@x":   nil,
		"stranger@x": nil,
	}
	l := &Reader{St: &stateStore{state: map[string]string{}}, Log: slog.New(slog.DiscardHandler),
		Auth: authFunc(func(_ context.Context, m *flow.Message) error { return answers[m.MessageID] })}
	l.Cfg.Maintainers = []string{"m@x"}
	for _, c := range []struct {
		notes []lore.Applied
		want  bool
		infra bool
	}{
		{nil, false, false},
		{[]lore.Applied{note("stranger@x", "Eve <eve@x>")}, false, false},
		{[]lore.Applied{note("unsigned@x", "M <m@x>")}, false, false},
		{[]lore.Applied{note("later@x", "M <m@x>")}, false, true},
		{[]lore.Applied{note("later@x", "M <m@x>"), note("signed@x", "M <m@x>")}, true, false},
		{[]lore.Applied{note("later@x", "M <m@x>"), note("unsigned@x", "M <m@x>")}, false, true},
	} {
		got, err := l.applied(ctx, &lore.Series{ID: "s@x", Applied: c.notes})
		if got != c.want || flow.IsInfra(err) != c.infra {
			ids := []string{}
			for _, n := range c.notes {
				ids = append(ids, n.MessageID)
			}
			t.Errorf("notes %v: applied %v, %v; want %v, infra %v", ids, got, err, c.want, c.infra)
		}
	}
}

// A series carries what lore read of its base: the base-commit line by
// b4's rule (7 to 40 hex digits, any case; lower-cased) and its
// subjects' tags, from a poll's assembly and from a row an older bot
// stored without them.
func TestSeriesCarriesBaseHints(t *testing.T) {
	cover := "From: Dev <dev@x>\nSubject: [PATCH rdma-next v2 0/1] svcrdma\nMessage-ID: <c@x>\n\nwhy\n\nbase-commit: ABCDEF1234 (rdma/for-next)\n"
	patch := "From: Dev <dev@x>\nSubject: [PATCH rdma-next v2 1/1] svcrdma: x\nIn-Reply-To: <c@x>\nMessage-ID: <p@x>\n\n---\n" +
		"diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n-a\n+b\n"
	asm, err := lore.NewAssembler(lore.AssemblerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{cover, patch} {
		if err := asm.AddRaw([]byte(raw), time.Unix(1, 0)); err != nil {
			t.Fatal(err)
		}
	}
	found := asm.Assemble().Series
	if len(found) != 1 {
		t.Fatalf("%d series assembled", len(found))
	}
	s := convert(found[0], lore.Config{})
	if s.BaseHint != "abcdef1234" || !slices.Equal(s.Tags, []string{"rdma-next"}) || s.Subject != "svcrdma" {
		t.Errorf("converted: base hint %q, tags %q, subject %q", s.BaseHint, s.Tags, s.Subject)
	}

	old := s
	old.BaseHint, old.Tags = "", nil
	if changed, err := Reread(&old); !changed || err != nil || old.BaseHint != s.BaseHint || !slices.Equal(old.Tags, s.Tags) {
		t.Errorf("a stored row without hints: changed %v, %v, hint %q, tags %q", changed, err, old.BaseHint, old.Tags)
	}
	if changed, err := Reread(&old); changed || err != nil {
		t.Errorf("a row with its hints: changed %v, %v", changed, err)
	}
}

// baseLookup is MAINTAINERS listing m@x at commit "c1" only, on a tree
// whose head moves on every choice: c1, then c2, ...
type baseLookup struct {
	chosen int
	err    error
	cancel func() // ends the poll while a base is chosen
}

func (b *baseLookup) SelectBase(context.Context, flow.Series) (flow.Base, error) {
	if b.cancel != nil {
		b.cancel()
	}
	if b.err != nil {
		return flow.Base{}, b.err
	}
	b.chosen++
	return flow.Base{Tree: "mainline", Commit: fmt.Sprintf("c%d", b.chosen)}, nil
}

func (b *baseLookup) MaintainersOf(_ context.Context, commit string, files []string) ([]string, error) {
	if commit == "c1" && slices.Equal(files, []string{"f.c"}) {
		return []string{"m@x"}, nil
	}
	return nil, nil
}

// The base that decides who may give a command (or an applied note) is
// chosen once per series and kept: a later poll, after the tree moved,
// decides on the same base without choosing again. A series still
// missing patches keeps none; a choice not known yet (Infra) or not
// kept decides nothing.
func TestAuthorisationBaseChosenOnce(t *testing.T) {
	ctx := context.Background()
	series := func(id string, complete bool) *lore.Series {
		return &lore.Series{ID: id, Complete: complete, Patches: []*lore.Patch{{Index: 1, Files: []string{"f.c"}}}}
	}
	st := &stateStore{state: map[string]string{}}
	lookup := &baseLookup{}
	l := &Reader{St: st, Log: slog.New(slog.DiscardHandler), Maintainers: lookup}
	s := series("s@x", true)
	for poll := 1; poll <= 2; poll++ {
		why, err := l.maintainerOnly(ctx, flow.Series{MsgID: s.ID}, s, "m@x")
		if why != "" || err != nil || lookup.chosen != 1 || st.state["authbase:s@x"] != "c1" {
			t.Errorf("poll %d: %q, %v; %d bases chosen, kept %q", poll, why, err, lookup.chosen, st.state["authbase:s@x"])
		}
	}

	inc := series("inc@x", false)
	for poll := 1; poll <= 2; poll++ {
		_, err := l.maintainerOnly(ctx, flow.Series{MsgID: inc.ID}, inc, "m@x")
		if _, kept := st.state["authbase:inc@x"]; err != nil || kept || lookup.chosen != 1+poll {
			t.Errorf("incomplete, poll %d: %v; kept %v, %d bases chosen", poll, err, kept, lookup.chosen)
		}
	}

	other := series("o@x", true)
	lookup.err = flow.MarkInfra(errors.New("mainline/master is not in the tree store"))
	if _, err := l.maintainerOnly(ctx, flow.Series{MsgID: other.ID}, other, "m@x"); !flow.IsInfra(err) || st.state["authbase:o@x"] != "" {
		t.Errorf("no base yet: %v, kept %q", err, st.state["authbase:o@x"])
	}
	lookup.err = nil
	cctx, cancel := context.WithCancel(ctx)
	lookup.cancel = cancel
	if _, err := l.maintainerOnly(cctx, flow.Series{MsgID: other.ID}, other, "m@x"); !flow.IsInfra(err) || st.state["authbase:o@x"] != "" {
		t.Errorf("a choice not kept: %v, kept %q", err, st.state["authbase:o@x"])
	}
	lookup.cancel = nil
	st.closed = true
	if _, err := l.maintainerOnly(ctx, flow.Series{MsgID: s.ID}, s, "m@x"); !flow.IsInfra(err) {
		t.Errorf("the kept base unreadable: %v", err)
	}
}

// A list url is one of what the sources read; a mistyped https URL is
// not taken for a local inbox path that never gets mail.
func TestCheckListURL(t *testing.T) {
	for _, u := range []string{"htps:/lore kernel.org/linux-rdma", "https:/lore.kernel.org/linux-rdma", "https://lore kernel.org/linux-rdma",
		"ftp://lore.kernel.org/linux-rdma", "https:///linux-rdma", "imap://[::1/nope", "imaps://lore.kernel.org/", "file://", ""} {
		if err := CheckListURL(u); err == nil {
			t.Errorf("%q taken", u)
		}
	}
	for _, u := range []string{"https://lore.kernel.org/linux-rdma", "http://127.0.0.1:8080/x", "imaps://lore.kernel.org/org.kernel.vger.linux-rdma",
		"inbox/local", "/srv/inbox", "file:///srv/inbox"} {
		if err := CheckListURL(u); err != nil {
			t.Errorf("%q: %v", u, err)
		}
	}
}

// A series read from a local inbox, addressed To a list with a web
// archive, links to no archive page (the mail was never there) and is
// filed under the inbox it was posted to. Read from that archive (or
// from an mbox, where nobody knows), it links there and is the list's.
func TestLocalInboxSeriesLinksNowhere(t *testing.T) {
	patch := "From: Dev <dev@x>\nTo: linux-nfs@vger.kernel.org\nSubject: [PATCH] svcrdma: x\nMessage-ID: <p@x>\n" +
		"Date: Thu, 01 Jan 1970 00:00:01 +0000\n\n---\ndiff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n-a\n+b\n"
	cfg := lore.Config{Lists: []lore.ListConfig{
		{Name: "linux-nfs", Address: "linux-nfs@vger.kernel.org", URL: "https://lore.kernel.org/linux-nfs"},
		{Name: "local", Address: "local@rdmabot.invalid", URL: "inbox/local"},
	}}
	for list, want := range map[string]struct{ link, list string }{
		"local":     {"", "local@rdmabot.invalid"},
		"linux-nfs": {"https://lore.kernel.org/linux-nfs/p@x/", "linux-nfs@vger.kernel.org"},
	} {
		st := newMemStore()
		if err := st.AddMail(context.Background(), Mail{List: list, Pos: "1", Received: time.Unix(1, 0), Raw: []byte(patch)}); err != nil {
			t.Fatal(err)
		}
		l := newReader(cfg, st, slog.New(slog.DiscardHandler))
		asm, err := l.assemble(context.Background(), time.Time{})
		if err != nil || len(asm.Series) != 1 {
			t.Fatalf("read from %s: %v, %d series", list, err, len(asm.Series))
		}
		s := convert(asm.Series[0], cfg)
		if s.Link != want.link || s.List != want.list || !slices.Equal(asm.Series[0].ReadFrom, []string{list}) {
			t.Errorf("read from %s: link %q, list %q, read from %q; want link %q, list %q", list, s.Link, s.List, asm.Series[0].ReadFrom, want.link, want.list)
		}
	}
}
