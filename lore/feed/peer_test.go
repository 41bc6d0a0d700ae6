package feed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/pitest"
)

// peerMails are the fixture mails in arrival order; late is injected
// while a reader runs.
func peerMails(t *testing.T) (mails [][]byte, late []byte) {
	t.Helper()
	names, err := filepath.Glob("testdata/peer/0*.eml")
	if err != nil || len(names) == 0 {
		t.Fatalf("fixtures: %v", err)
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		mails = append(mails, b)
	}
	late, err = os.ReadFile("testdata/peer/late-patch.eml")
	if err != nil {
		t.Fatal(err)
	}
	return mails, late
}

var peerSubjects = []string{
	"[PATCH v2 0/2] svcrdma: tidy the send path",
	"[PATCH v2 1/2] svcrdma: drop an unused argument",
	"[PATCH v2 2/2] svcrdma: fold two",
	"Re: [PATCH v2 0/2] svcrdma: tidy the send path",
	"RE: rxe: question about soft-RoCE MTU",
}

const lateSubject = "[PATCH] RDMA/core: fix a typo in a comment"

func startPeer(t *testing.T) (*pitest.Server, []byte) {
	mails, late := peerMails(t)
	return pitest.Start(t, pitest.Inbox{Name: "linux-rdma", Messages: mails}), late
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func TestIMAPPeer(t *testing.T) {
	srv, late := startPeer(t)
	src := &IMAP{List: "linux-rdma", Addr: srv.IMAPAddr, Newsgroup: "org.kernel.vger.linux-rdma"}
	cps := &MemCheckpoints{}
	c := &collector{failAt: peerSubjects[3]}
	if err := pumpAll(t, src, cps, c); err == nil {
		t.Fatal("consumer error not returned")
	}
	same(t, "first read", c.got, peerSubjects[:3])
	c.got = nil

	cps = restarted(cps)
	src = &IMAP{List: "linux-rdma", Addr: srv.IMAPAddr, Newsgroup: "org.kernel.vger.linux-rdma"}
	var items []Item
	_, err := Pump(context.Background(), src, cps, PumpOptions{}, func(ctx context.Context, it Item) error {
		items = append(items, it)
		return c.consume(ctx, it)
	})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "after restart", c.got, peerSubjects[3:])
	c.got = nil
	if it := items[0]; it.List != "linux-rdma" || it.Received.IsZero() || it.Pos != "org.kernel.vger.linux-rdma.0/4" ||
		!bytes.Contains(it.Raw, []byte("Acked-by: Björn Reviewer")) {
		t.Fatalf("item %+v", it)
	}

	srv.Add(t, "linux-rdma", late)
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	same(t, "after Add", c.got, []string{lateSubject})
	c.got = nil
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	same(t, "nothing new", c.got, nil)
}

func TestGitPeerOverHTTP(t *testing.T) {
	srv, late := startPeer(t)
	src := &Git{List: "linux-rdma", Dir: filepath.Join(t.TempDir(), "mirror"), URL: srv.InboxURL("linux-rdma")}
	cps := &MemCheckpoints{}
	c := &collector{}
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	same(t, "mirror", c.got, peerSubjects)
	c.got = nil
	srv.Add(t, "linux-rdma", late)
	srv.Remove(t, "linux-rdma", mustRead(t, "testdata/peer/05-other.eml"))
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	same(t, "fetch", c.got, []string{lateSubject, "deleted " + peerSubjects[4]})
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFetchThreadPeer(t *testing.T) {
	srv, _ := startPeer(t)
	hc := &HTTPClient{}
	items, err := hc.FetchThread(context.Background(), srv.InboxURL("linux-rdma"), "linux-rdma", "<20240102090002.2.ada@example.org>")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, subjectOf(it.Raw))
		if it.List != "linux-rdma" {
			t.Fatalf("list %q", it.List)
		}
	}
	same(t, "thread", got, peerSubjects[:4])
	// mboxrd unquoting gives back the archived bytes, >From lines too.
	archived := mustRead(t, "testdata/peer/03-patch2.eml")
	if !bytes.Equal(items[2].Raw, archived) {
		t.Fatalf("patch 2 over HTTP differs from the fixture:\n%s\n---\n%s", items[2].Raw, archived)
	}

	_, err = hc.FetchThread(context.Background(), srv.InboxURL("linux-rdma"), "linux-rdma", "<nope@example.org>")
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 404 {
		t.Fatalf("missing thread: %v", err)
	}
	epochs, err := hc.Epochs(context.Background(), srv.InboxURL("linux-rdma"))
	if err != nil || len(epochs) != 1 || epochs[0] != 0 {
		t.Fatalf("epochs %v %v", epochs, err)
	}
}

// public-inbox-imapd splits a newsgroup into mailboxes of 50,000 UIDs;
// numbering the archive from 49,999 puts the third message in .1.
func TestIMAPPeerFollowsSlices(t *testing.T) {
	mails, late := peerMails(t)
	srv := pitest.Start(t, pitest.Inbox{Name: "linux-rdma", Messages: mails[:2], SkipArtnum: 49998})
	src := &IMAP{List: "linux-rdma", Addr: srv.IMAPAddr, Newsgroup: "org.kernel.vger.linux-rdma"}
	cps := &MemCheckpoints{}
	var pos []string
	consume := func(_ context.Context, it Item) error {
		pos = append(pos, it.Pos+" "+subjectOf(it.Raw))
		return nil
	}
	if _, err := Pump(context.Background(), src, cps, PumpOptions{}, consume); err != nil {
		t.Fatal(err)
	}
	for _, m := range append(mails[2:], late) {
		srv.Add(t, "linux-rdma", m)
	}
	if _, err := Pump(context.Background(), src, cps, PumpOptions{}, consume); err != nil {
		t.Fatal(err)
	}
	same(t, "positions", pos, []string{
		"org.kernel.vger.linux-rdma.0/49999 " + peerSubjects[0],
		"org.kernel.vger.linux-rdma.0/50000 " + peerSubjects[1],
		"org.kernel.vger.linux-rdma.1/50001 " + peerSubjects[2],
		"org.kernel.vger.linux-rdma.1/50002 " + peerSubjects[3],
		"org.kernel.vger.linux-rdma.1/50003 " + peerSubjects[4],
		"org.kernel.vger.linux-rdma.1/50004 " + lateSubject,
	})
	// Without a checkpoint a reader starts at the newest slice.
	pos = nil
	if _, err := Pump(context.Background(), src, &MemCheckpoints{}, PumpOptions{}, consume); err != nil {
		t.Fatal(err)
	}
	if len(pos) != 4 {
		t.Fatalf("fresh reader read %q", pos)
	}
}

// A real public-inbox epoch rollover (epochs made tiny), followed both in
// a go-git mirror over HTTP and in the inbox directory itself.
func TestGitPeerEpochRollover(t *testing.T) {
	mails, late := peerMails(t)
	srv := pitest.Start(t, pitest.Inbox{Name: "linux-rdma", Messages: mails[:1], RotateBytes: 3000})
	mirror := &Git{List: "linux-rdma", Dir: filepath.Join(t.TempDir(), "mirror"), URL: srv.InboxURL("linux-rdma")}
	local := &Git{List: "linux-rdma", Dir: srv.InboxDir("linux-rdma")}
	mc, lc := &collector{}, &collector{}
	mcp, lcp := &MemCheckpoints{}, &MemCheckpoints{}
	for _, step := range []func(){
		func() {},
		func() {
			for _, m := range append(mails[1:], late) {
				srv.Add(t, "linux-rdma", m)
			}
		},
	} {
		step()
		if err := pumpAll(t, mirror, mcp, mc); err != nil {
			t.Fatal(err)
		}
		if err := pumpAll(t, local, lcp, lc); err != nil {
			t.Fatal(err)
		}
	}
	epochs, _ := filepath.Glob(filepath.Join(srv.InboxDir("linux-rdma"), "git", "*.git"))
	if len(epochs) < 3 {
		t.Fatalf("public-inbox made %d epochs; the test needs a rollover", len(epochs))
	}
	want := append(append([]string{}, peerSubjects...), lateSubject)
	same(t, "mirror", mc.got, want)
	same(t, "local", lc.got, want)
	cp, _ := mcp.Load(context.Background(), mirror.Key())
	if !strings.HasPrefix(cp, fmt.Sprintf("git1 %d ", len(epochs)-1)) {
		t.Fatalf("checkpoint %q is not in the newest of %d epochs", cp, len(epochs))
	}

	// A fresh mirror of every epoch reads the whole archive.
	scan := &Git{List: "linux-rdma", Dir: filepath.Join(t.TempDir(), "scan"), URL: srv.InboxURL("linux-rdma"), AllEpochs: true}
	sc := &collector{}
	if err := pumpAll(t, scan, &MemCheckpoints{}, sc); err != nil {
		t.Fatal(err)
	}
	same(t, "scan", sc.got, want)
}

// public-inbox-purge rewrites the epoch's history (the purged message's
// commit keeps an empty blob) and prunes the inbox: readers of a go-git
// mirror and of the inbox itself read on without repeating anything.
func TestGitPeerPurgeRewrite(t *testing.T) {
	srv, late := startPeer(t)
	mirror := &Git{List: "linux-rdma", Dir: filepath.Join(t.TempDir(), "mirror"), URL: srv.InboxURL("linux-rdma")}
	local := &Git{List: "linux-rdma", Dir: srv.InboxDir("linux-rdma")}
	mc, lc := &collector{}, &collector{}
	mcp, lcp := &MemCheckpoints{}, &MemCheckpoints{}
	for _, step := range []func(){
		func() {},
		func() {
			srv.Purge(t, "linux-rdma", mustRead(t, "testdata/peer/02-patch1.eml"))
			srv.Add(t, "linux-rdma", late)
		},
	} {
		step()
		if err := pumpAll(t, mirror, mcp, mc); err != nil {
			t.Fatal(err)
		}
		if err := pumpAll(t, local, lcp, lc); err != nil {
			t.Fatal(err)
		}
	}
	// The mirror still holds the old history and names the purged
	// message; purge pruned the inbox's own, so its reader can only go on
	// after the last message it delivered (and logs that).
	same(t, "mirror", mc.got, append(append([]string{}, peerSubjects...), "deleted "+peerSubjects[1], lateSubject))
	same(t, "local", lc.got, append(append([]string{}, peerSubjects...), lateSubject))
}

// The last UID of a slice removed before anyone read it: the reader
// still moves on to the next slice when mail arrives there.
func TestIMAPPeerSliceGap(t *testing.T) {
	mails, late := peerMails(t)
	srv := pitest.Start(t, pitest.Inbox{Name: "linux-rdma", Messages: mails[:2], SkipArtnum: 49998})
	srv.Remove(t, "linux-rdma", mails[1]) // UID 50000
	src := &IMAP{List: "linux-rdma", Addr: srv.IMAPAddr, Newsgroup: "org.kernel.vger.linux-rdma"}
	cps := &MemCheckpoints{}
	c := &collector{}
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, peerSubjects[0])
	srv.Add(t, "linux-rdma", late)
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	wantGot(t, c, lateSubject)
	if cp, _ := cps.Load(context.Background(), src.Key()); !strings.HasPrefix(cp, "imap1 1 ") {
		t.Fatalf("checkpoint %q is not in slice 1", cp)
	}
}

// The newest message removed: IMAP's UIDNEXT stays past the last UID a
// reader can see. The next poll reads nothing new, and the one after a
// new message reads that message.
func TestIMAPPeerRemovedTail(t *testing.T) {
	srv, late := startPeer(t)
	mails, _ := peerMails(t)
	srv.Remove(t, "linux-rdma", mails[4])
	src := &IMAP{List: "linux-rdma", Addr: srv.IMAPAddr, Newsgroup: "org.kernel.vger.linux-rdma"}
	cps := &MemCheckpoints{}
	c := &collector{}
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	same(t, "first pass", c.got, peerSubjects[:4])
	c.got = nil
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	same(t, "nothing new", c.got, nil)
	srv.Add(t, "linux-rdma", late)
	if err := pumpAll(t, src, cps, c); err != nil {
		t.Fatal(err)
	}
	same(t, "after Add", c.got, []string{lateSubject})
}
