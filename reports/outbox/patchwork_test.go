package outbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/fakepatchwork"
)

func pwOutbox(t *testing.T, f *fakepatchwork.Server, token string) (*Outbox, *clock) {
	t.Helper()
	db := databases(t)["sqlite"](t)
	l, err := OpenLedger(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
	// Mail off and moderated: checks go out all the same.
	o, err := New(l, t.TempDir(), Policy{Moderate: true, DailyLimit: 1}, map[string]Sender{
		"patchwork": &Patchwork{URL: f.URL, Token: token, HTTP: f.Client()},
		"email":     &recorder{},
	}, c.Now, quiet())
	if err != nil {
		t.Fatal(err)
	}
	return o, c
}

func enqueueCheck(t *testing.T, o *Outbox, msgid, phase, state string) *Entry {
	t.Helper()
	r, err := FromCheck(msgid, "<cover@x>", 2, phase, "cel@kernel.org",
		Check{State: state, TargetURL: "http://bot/tests/9", Context: "rdmabot", Description: "PASS: copy +0.3 %"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := o.Enqueue(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestPatchworkChecks(t *testing.T) {
	ctx := context.Background()
	f := fakepatchwork.New(t, "s3cret")
	f.AddPatch("<p1@x>", 101)
	f.AddPatch("<p2@x>", 102, 202) // cross-posted: two projects
	o, c := pwOutbox(t, f, "s3cret")

	enqueueCheck(t, o, "<p1@x>", "pending", CheckPending)
	enqueueCheck(t, o, "p2@x", "pending", CheckPending)
	if n, err := o.Deliver(ctx); err != nil || n != 2 {
		t.Fatalf("deliver: %d %v", n, err)
	}
	c.Advance(time.Minute)
	e1 := enqueueCheck(t, o, "<p1@x>", "final", CheckSuccess)
	f.FailPosts(1)
	if n, err := o.Deliver(ctx); err != nil || n != 0 {
		t.Fatalf("deliver with 502: %d %v", n, err)
	}
	if e, _ := o.Ledger().Get(ctx, e1.MessageID); e.State != Ready {
		t.Fatalf("after 502: %s (%s), want ready", e.State, e.Reason)
	}
	if n, err := o.Deliver(ctx); err != nil || n != 1 {
		t.Fatalf("retry: %d %v", n, err)
	}
	// Posted once, in order; nothing sent twice on further delivers or
	// a second enqueue of the same check.
	o.Deliver(ctx)
	r, _ := FromCheck("<p1@x>", "<cover@x>", 2, "final", "", Check{State: CheckFail})
	if _, err := o.Enqueue(ctx, r); err == nil {
		t.Fatal("second final check on one version accepted")
	}
	got := func(n int) (s []string) {
		for _, c := range f.Checks(n) {
			s = append(s, c["state"].(string)+" "+c["context"].(string)+" "+c["target_url"].(string))
		}
		return s
	}
	want := map[int]string{
		101: "[pending rdmabot http://bot/tests/9 success rdmabot http://bot/tests/9]",
		102: "[pending rdmabot http://bot/tests/9]",
		202: "[pending rdmabot http://bot/tests/9]",
	}
	for n, w := range want {
		if g := fmt.Sprint(got(n)); g != w {
			t.Errorf("patch %d checks %s, want %s", n, g, w)
		}
	}
	// Checks do not eat the mail daily limit (1 here).
	if n, err := o.Ledger().SentSince(ctx, c.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Errorf("SentSince counts checks: %d %v", n, err)
	}
}

func TestPatchworkStalePending(t *testing.T) {
	// A pending check retried after the final one went out is dropped.
	f := fakepatchwork.New(t, "s3cret")
	f.AddPatch("<p1@x>", 101)
	f.AddCheck(101, map[string]any{"state": "success", "context": "rdmabot", "target_url": "http://bot/tests/9"})
	o, _ := pwOutbox(t, f, "s3cret")
	enqueueCheck(t, o, "<p1@x>", "pending", CheckPending)
	if n, err := o.Deliver(context.Background()); err != nil || n != 1 {
		t.Fatalf("deliver: %d %v", n, err)
	}
	if len(f.Checks(101)) != 1 {
		t.Fatalf("pending posted over the final check: %v", f.Checks(101))
	}
}

func TestPatchworkFailures(t *testing.T) {
	ctx := context.Background()
	f := fakepatchwork.New(t, "s3cret")
	f.AddPatch("<p1@x>", 101)
	o, _ := pwOutbox(t, f, "wrong")
	missing := enqueueCheck(t, o, "<nowhere@x>", "final", CheckFail)
	denied := enqueueCheck(t, o, "<p1@x>", "final", CheckFail)
	// Neither is fatal to the delivery.
	if n, err := o.Deliver(ctx); err != nil || n != 0 {
		t.Fatalf("deliver: %d %v", n, err)
	}
	for _, c := range []struct {
		id, reason string
	}{{missing.MessageID, "no patch with this Message-ID"}, {denied.MessageID, "403 Forbidden"}} {
		e, err := o.Ledger().Get(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if e.State != Failed || !strings.Contains(e.Reason, c.reason) {
			t.Errorf("%s: %s %q, want failed with %q", c.id, e.State, e.Reason, c.reason)
		}
	}
	if len(f.Checks(101)) != 0 {
		t.Errorf("checks posted without auth: %v", f.Checks(101))
	}
}

// Patchwork pages its lists: our check behind two pages of other CIs'
// checks is found (not posted again), and a patch in more projects than
// fit a page gets the check in each.
func TestPatchworkPages(t *testing.T) {
	ctx := context.Background()
	f := fakepatchwork.New(t, "s3cret")
	f.AddPatch("<p1@x>", 101)
	f.AddPatch("<p2@x>", 102, 202, 302)
	for i := range 65 {
		f.AddCheck(101, map[string]any{"id": 1000 + i, "state": "success", "context": fmt.Sprintf("other-ci-%d", i),
			"target_url": "http://ci/" + fmt.Sprint(i), "description": "build ok", "date": "2024-05-01T10:30:00"})
	}
	f.AddCheck(101, map[string]any{"id": 2000, "state": "success", "context": "rdmabot",
		"target_url": "http://bot/tests/9", "description": "PASS: copy +0.3 %", "date": "2024-05-01T11:00:00"})
	f.SetPerPage(30)
	o, _ := pwOutbox(t, f, "s3cret")
	enqueueCheck(t, o, "<p1@x>", "final", CheckSuccess)
	if n, err := o.Deliver(ctx); err != nil || n != 1 {
		t.Fatalf("deliver: %d %v", n, err)
	}
	if len(f.Checks(101)) != 66 || f.Gets() != 4 {
		t.Errorf("our check on page 3: %d checks after delivery (want 66, none posted), %d list pages read (want 1+3)", len(f.Checks(101)), f.Gets())
	}
	f.SetPerPage(2)
	enqueueCheck(t, o, "<p2@x>", "final", CheckSuccess)
	if n, err := o.Deliver(ctx); err != nil || n != 1 {
		t.Fatalf("deliver: %d %v", n, err)
	}
	for _, n := range f.Patches("<p2@x>") {
		if len(f.Checks(n)) != 1 {
			t.Errorf("patch %d on the second page of the msgid list: %d checks, want 1", n, len(f.Checks(n)))
		}
	}
}

func TestNextLink(t *testing.T) {
	for h, want := range map[string]string{
		`<https://pw/api/patches/?page=3>; rel="next", <https://pw/api/patches/?page=1>; rel="prev"`: "https://pw/api/patches/?page=3",
		`<https://pw/api/patches/>; rel="prev"`:                                                      "",
		`<https://pw/a?x=1,2>; rel=next`:                                                             "https://pw/a?x=1,2",
		`<https://pw/p>; rel="prev", <https://pw/n>; rel="next"`:                                     "https://pw/n",
		`<https://pw/b>; title="x"; rel="next"`:                                                      "https://pw/b",
		``:                                                                                           "",
	} {
		if got := nextLink([]string{h}); got != want {
			t.Errorf("nextLink(%q) = %q, want %q", h, got, want)
		}
	}
}

// A server whose pages never end (each names a next one) is not read
// forever: the check waits for a retry, as for any server fault.
func TestPatchworkEndlessPages(t *testing.T) {
	var gets int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets++
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s?page=%d>; rel="next"`, r.Host, r.URL.Path, gets+1))
		w.Write([]byte(`[]`))
	}))
	defer srv.Close()
	p := &Patchwork{URL: srv.URL, HTTP: srv.Client()}
	r, err := FromCheck("<p1@x>", "<cover@x>", 2, "final", "", Check{State: CheckSuccess, Context: "rdmabot"})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Send(context.Background(), &Entry{Raw: r.Raw})
	var rej *Rejected
	if err == nil || errors.As(err, &rej) || !errors.Is(err, ErrNotDelivered) || gets != maxPages {
		t.Fatalf("endless pages: %v after %d pages, want a retriable error after %d", err, gets, maxPages)
	}
}

// A final check is posted after its pending one: while the pending one
// waits for a retry (patchwork answered 502) the final one waits too,
// even when it sorts first in the ledger (same second); then both go in
// one delivery, in order.
func TestPatchworkFinalAfterPending(t *testing.T) {
	ctx := context.Background()
	f := fakepatchwork.New(t, "s3cret")
	f.AddPatch("<p1@x>", 101)
	o, _ := pwOutbox(t, f, "s3cret")
	f.FailPosts(1)
	pending := enqueueCheck(t, o, "<p1@x>", PhasePending, CheckPending)
	final := enqueueCheck(t, o, "<p1@x>", PhaseFinal, CheckSuccess) // same time: "|final" sorts before "|pending"
	if n, err := o.Deliver(ctx); err != nil || n != 0 {
		t.Fatalf("deliver with 502: %d %v", n, err)
	}
	for _, id := range []string{pending.MessageID, final.MessageID} {
		if e, _ := o.Ledger().Get(ctx, id); e.State != Ready {
			t.Fatalf("%s after 502: %s, want ready", id, e.State)
		}
	}
	if len(f.Checks(101)) != 0 {
		t.Fatalf("final posted while its pending waits: %v", f.Checks(101))
	}
	if n, err := o.Deliver(ctx); err != nil || n != 2 {
		t.Fatalf("retry: %d %v, want the pending check, then the final one", n, err)
	}
	o.Deliver(ctx)
	var got []string
	for _, c := range f.Checks(101) {
		got = append(got, c["state"].(string))
	}
	if fmt.Sprint(got) != "[pending success]" {
		t.Errorf("checks posted %v, want pending then success, once each", got)
	}
	// A pending check that failed for good holds nothing up.
	f.AddPatch("<p2@x>", 102)
	p2 := enqueueCheck(t, o, "<p2@x>", PhasePending, CheckPending)
	if ok, err := o.Ledger().transition(ctx, p2.MessageID, Ready, Failed, "refused", 0, time.Time{}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	enqueueCheck(t, o, "<p2@x>", PhaseFinal, CheckFail)
	if n, err := o.Deliver(ctx); err != nil || n != 1 || len(f.Checks(102)) != 1 {
		t.Errorf("final after a failed pending: %d sent %v, checks %v", n, err, f.Checks(102))
	}
}
