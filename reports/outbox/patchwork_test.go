package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePatchwork serves patchwork's REST payload shapes: the patch list
// filtered by msgid (a JSON list of patch objects) and check creation
// (201 with the check object). Lists are paged as patchwork pages them:
// perPage items (its default 30), the next and previous pages in a Link
// header.
type fakePatchwork struct {
	mu      sync.Mutex
	srv     *httptest.Server
	token   string
	patches map[string][]int // msgid (with <>) -> patch ids
	checks  map[int][]map[string]any
	fail5xx int // POSTs answered 502 before one is taken
	posts   int
	perPage int
	gets    int // list pages served
}

func newFakePatchwork(t *testing.T) *fakePatchwork {
	f := &fakePatchwork{token: "s3cret", patches: map[string][]int{}, checks: map[int][]map[string]any{}, perPage: 30}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakePatchwork) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/api/patches/" && r.Method == http.MethodGet {
		id := r.URL.Query().Get("msgid")
		if !strings.HasPrefix(id, "<") {
			id = "<" + id + ">"
		}
		list := []map[string]any{}
		for _, n := range f.patches[id] {
			list = append(list, map[string]any{
				"id": n, "url": fmt.Sprintf("%s/api/patches/%d/", f.srv.URL, n),
				"web_url": fmt.Sprintf("%s/project/linux-rdma/patch/%s/", f.srv.URL, strings.Trim(id, "<>")),
				"project": map[string]any{"id": 1, "name": "Linux RDMA Mailing List", "link_name": "linux-rdma"},
				"msgid":   id, "date": "2024-05-01T10:00:00", "name": "[PATCH v2 1/2] svcrdma: fix", "state": "new",
				"check": "pending", "checks": fmt.Sprintf("%s/api/patches/%d/checks/", f.srv.URL, n),
				"mbox": fmt.Sprintf("%s/patch/%d/mbox/", f.srv.URL, n),
			})
		}
		f.page(w, r, list)
		return
	}
	var n int
	if _, err := fmt.Sscanf(r.URL.Path, "/api/patches/%d/checks/", &n); err != nil {
		http.NotFound(w, r)
		return
	}
	switch r.Method {
	case http.MethodGet:
		f.page(w, r, f.checks[n])
	case http.MethodPost:
		if r.Header.Get("Authorization") != "Token "+f.token {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"detail": "You do not have permission to perform this action."}`))
			return
		}
		if f.fail5xx > 0 {
			f.fail5xx--
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("<html>502 Bad Gateway</html>"))
			return
		}
		var c map[string]any
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.posts++
		c["id"] = f.posts
		c["url"] = fmt.Sprintf("%s/api/patches/%d/checks/%d/", f.srv.URL, n, f.posts)
		c["user"] = map[string]any{"id": 7, "username": "rdmabot"}
		c["date"] = "2024-05-01T11:00:00"
		f.checks[n] = append(f.checks[n], c)
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(c)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// page writes one page of list (?page=N, from 1) with patchwork's Link
// header: `<next>; rel="next", <prev>; rel="prev"`, the first page's
// link without a page parameter, as Django REST framework makes them.
func (f *fakePatchwork) page(w http.ResponseWriter, r *http.Request, list []map[string]any) {
	f.gets++
	n := 1
	if p := r.URL.Query().Get("page"); p != "" {
		fmt.Sscan(p, &n)
	}
	at := func(page int) string {
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		q := u.Query()
		q.Del("page")
		if page > 1 {
			q.Set("page", fmt.Sprint(page))
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	if (n-1)*f.perPage > len(list) || n < 1 {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"detail": "Invalid page."}`))
		return
	}
	lo, hi := (n-1)*f.perPage, min(n*f.perPage, len(list))
	var links []string
	if hi < len(list) {
		links = append(links, "<"+at(n+1)+`>; rel="next"`)
	}
	if n > 1 {
		links = append(links, "<"+at(n-1)+`>; rel="prev"`)
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	out := append([]map[string]any{}, list[lo:hi]...)
	json.NewEncoder(w).Encode(out)
}

func pwOutbox(t *testing.T, f *fakePatchwork, token string) (*Outbox, *clock) {
	t.Helper()
	db := databases(t)["sqlite"](t)
	l, err := OpenLedger(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
	// Mail off and moderated: checks go out all the same.
	o, err := New(l, t.TempDir(), Policy{Moderate: true, DailyLimit: 1}, map[string]Sender{
		"patchwork": &Patchwork{URL: f.srv.URL, Token: token, HTTP: f.srv.Client()},
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
	f := newFakePatchwork(t)
	f.patches["<p1@x>"] = []int{101}
	f.patches["<p2@x>"] = []int{102, 202} // cross-posted: two projects
	o, c := pwOutbox(t, f, "s3cret")

	enqueueCheck(t, o, "<p1@x>", "pending", CheckPending)
	enqueueCheck(t, o, "p2@x", "pending", CheckPending)
	if n, err := o.Deliver(ctx); err != nil || n != 2 {
		t.Fatalf("deliver: %d %v", n, err)
	}
	c.Advance(time.Minute)
	e1 := enqueueCheck(t, o, "<p1@x>", "final", CheckSuccess)
	f.mu.Lock()
	f.fail5xx = 1
	f.mu.Unlock()
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
	f.mu.Lock()
	defer f.mu.Unlock()
	got := func(n int) (s []string) {
		for _, c := range f.checks[n] {
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
	f := newFakePatchwork(t)
	f.patches["<p1@x>"] = []int{101}
	f.checks[101] = []map[string]any{{"state": "success", "context": "rdmabot", "target_url": "http://bot/tests/9"}}
	o, _ := pwOutbox(t, f, "s3cret")
	enqueueCheck(t, o, "<p1@x>", "pending", CheckPending)
	if n, err := o.Deliver(context.Background()); err != nil || n != 1 {
		t.Fatalf("deliver: %d %v", n, err)
	}
	if len(f.checks[101]) != 1 {
		t.Fatalf("pending posted over the final check: %v", f.checks[101])
	}
}

func TestPatchworkFailures(t *testing.T) {
	ctx := context.Background()
	f := newFakePatchwork(t)
	f.patches["<p1@x>"] = []int{101}
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
	if len(f.checks[101]) != 0 {
		t.Errorf("checks posted without auth: %v", f.checks[101])
	}
}

// Patchwork pages its lists: our check behind two pages of other CIs'
// checks is found (not posted again), and a patch in more projects than
// fit a page gets the check in each.
func TestPatchworkPages(t *testing.T) {
	ctx := context.Background()
	f := newFakePatchwork(t)
	f.patches["<p1@x>"] = []int{101}
	f.patches["<p2@x>"] = []int{102, 202, 302}
	for i := range 65 {
		f.checks[101] = append(f.checks[101], map[string]any{"id": 1000 + i, "state": "success", "context": fmt.Sprintf("other-ci-%d", i),
			"target_url": "http://ci/" + fmt.Sprint(i), "description": "build ok", "date": "2024-05-01T10:30:00"})
	}
	f.checks[101] = append(f.checks[101], map[string]any{"id": 2000, "state": "success", "context": "rdmabot",
		"target_url": "http://bot/tests/9", "description": "PASS: copy +0.3 %", "date": "2024-05-01T11:00:00"})
	f.perPage = 30
	o, _ := pwOutbox(t, f, "s3cret")
	enqueueCheck(t, o, "<p1@x>", "final", CheckSuccess)
	if n, err := o.Deliver(ctx); err != nil || n != 1 {
		t.Fatalf("deliver: %d %v", n, err)
	}
	f.mu.Lock()
	if len(f.checks[101]) != 66 || f.gets != 4 {
		t.Errorf("our check on page 3: %d checks after delivery (want 66, none posted), %d list pages read (want 1+3)", len(f.checks[101]), f.gets)
	}
	f.perPage = 2
	f.mu.Unlock()
	enqueueCheck(t, o, "<p2@x>", "final", CheckSuccess)
	if n, err := o.Deliver(ctx); err != nil || n != 1 {
		t.Fatalf("deliver: %d %v", n, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.patches["<p2@x>"] {
		if len(f.checks[n]) != 1 {
			t.Errorf("patch %d on the second page of the msgid list: %d checks, want 1", n, len(f.checks[n]))
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
	f := newFakePatchwork(t)
	f.patches["<p1@x>"] = []int{101}
	o, _ := pwOutbox(t, f, "s3cret")
	f.fail5xx = 1
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
	if len(f.checks[101]) != 0 {
		t.Fatalf("final posted while its pending waits: %v", f.checks[101])
	}
	if n, err := o.Deliver(ctx); err != nil || n != 2 {
		t.Fatalf("retry: %d %v, want the pending check, then the final one", n, err)
	}
	o.Deliver(ctx)
	var got []string
	for _, c := range f.checks[101] {
		got = append(got, c["state"].(string))
	}
	if fmt.Sprint(got) != "[pending success]" {
		t.Errorf("checks posted %v, want pending then success, once each", got)
	}
	// A pending check that failed for good holds nothing up.
	f.patches["<p2@x>"] = []int{102}
	p2 := enqueueCheck(t, o, "<p2@x>", PhasePending, CheckPending)
	if ok, err := o.Ledger().transition(ctx, p2.MessageID, Ready, Failed, "refused", 0, time.Time{}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	enqueueCheck(t, o, "<p2@x>", PhaseFinal, CheckFail)
	if n, err := o.Deliver(ctx); err != nil || n != 1 || len(f.checks[102]) != 1 {
		t.Errorf("final after a failed pending: %d sent %v, checks %v", n, err, f.checks[102])
	}
}
