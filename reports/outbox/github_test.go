package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
)

// fakeGitHub speaks the REST shapes of issue comments: create (201 with
// the full comment object), list (paginated with a Link header), and the
// error object for unknown issues. failNext makes the next create store
// the comment and then answer 502, as a lost response does.
type fakeGitHub struct {
	mu       sync.Mutex
	comments map[int][]map[string]any
	failNext bool
	labels   []string // "#n+label", "#n-label" in call order
	srv      *httptest.Server
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	f := &fakeGitHub{comments: map[int][]map[string]any{7: {}}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v3/repos/rdmabot/linux/issues/{n}/comments", f.handle)
	// Labels: add answers the issue's labels; removing one the issue
	// lacks is GitHub's 404 with its error object.
	mux.HandleFunc("POST /api/v3/repos/rdmabot/linux/issues/{n}/labels", func(w http.ResponseWriter, r *http.Request) {
		var in []string
		json.NewDecoder(r.Body).Decode(&in)
		f.mu.Lock()
		var out []map[string]any
		for i, l := range in {
			f.labels = append(f.labels, "#"+r.PathValue("n")+"+"+l)
			out = append(out, map[string]any{"id": 100 + i, "node_id": "LA_x", "url": f.srv.URL + "/api/v3/repos/rdmabot/linux/labels/" + url.PathEscape(l),
				"name": l, "color": "ededed", "default": false, "description": nil})
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("DELETE /api/v3/repos/rdmabot/linux/issues/{n}/labels/{label}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.labels = append(f.labels, "#"+r.PathValue("n")+"-"+r.PathValue("label"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"Label does not exist","documentation_url":"https://docs.github.com/rest/issues/labels#remove-a-label-from-an-issue","status":"404"}`)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGitHub) comment(n, id int, body string) map[string]any {
	base := f.srv.URL + "/api/v3/repos/rdmabot/linux"
	return map[string]any{
		"id": id, "node_id": fmt.Sprintf("IC_kwDOAbc%d", id),
		"url":      fmt.Sprintf("%s/issues/comments/%d", base, id),
		"html_url": fmt.Sprintf("https://github.com/rdmabot/linux/issues/%d#issuecomment-%d", n, id),
		"body":     body,
		"user": map[string]any{"login": "rdmabot", "id": 1001, "node_id": "U_kgDOA", "type": "Bot",
			"site_admin": false, "url": "https://api.github.com/users/rdmabot"},
		"created_at": "2026-11-30T04:05:06Z", "updated_at": "2026-11-30T04:05:06Z",
		"issue_url":          fmt.Sprintf("%s/issues/%d", base, n),
		"author_association": "NONE", "performed_via_github_app": nil,
		"reactions": map[string]any{"url": fmt.Sprintf("%s/issues/comments/%d/reactions", base, id),
			"total_count": 0, "+1": 0, "-1": 0, "laugh": 0, "hooray": 0, "confused": 0, "heart": 0, "rocket": 0, "eyes": 0},
	}
}

func (f *fakeGitHub) handle(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, _ := strconv.Atoi(r.PathValue("n"))
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	list, ok := f.comments[n]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest/issues/comments#create-an-issue-comment","status":"404"}`)
		return
	}
	switch r.Method {
	case http.MethodPost:
		var in struct {
			Body string `json:"body"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"message":"Validation Failed","errors":[{"resource":"IssueComment","code":"missing_field","field":"body"}],"documentation_url":"https://docs.github.com/rest/issues/comments#create-an-issue-comment","status":"422"}`)
			return
		}
		c := f.comment(n, 2000+len(list), in.Body)
		f.comments[n] = append(list, c)
		if f.failNext {
			f.failNext = false
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, `{"message":"Server Error"}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(c)
	case http.MethodGet:
		per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if per <= 0 {
			per = 30
		}
		page = max(page, 1)
		lo, hi := min((page-1)*per, len(list)), min(page*per, len(list))
		if hi < len(list) {
			u := *r.URL
			q := u.Query()
			q.Set("page", strconv.Itoa(page+1))
			u.RawQuery = q.Encode()
			w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, f.srv.URL, u.String()))
		}
		json.NewEncoder(w).Encode(list[lo:hi])
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func TestGitHubExactlyOnce(t *testing.T) {
	f := newFakeGitHub(t)
	// Enough earlier comments to need two pages when looking for ours.
	for i := range 130 {
		f.comments[7] = append(f.comments[7], f.comment(7, i, fmt.Sprintf("comment %d", i)))
	}
	client := github.NewClient(nil)
	u, _ := url.Parse(f.srv.URL + "/api/v3/")
	client.BaseURL = u
	gh := NewGitHub(client, quiet())

	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	l, err := OpenLedger(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)}
	o, err := New(l, t.TempDir(), Policy{Send: true, DailyLimit: 10}, map[string]Sender{"github": gh}, c.Now, quiet())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	post := func(id string, issue int) Reply {
		ch := GitHubChannel("rdmabot", "linux", issue)
		return Reply{MessageID: id, Key: Key(ch, "series@x", 1), Channel: ch, Outcome: "PASS",
			Raw: []byte("### rdmabot: PASS\n\n<!-- rdmabot:" + id + " -->\n")}
	}
	if _, err := o.Enqueue(ctx, post("one-rdmabot@x", 7)); err != nil {
		t.Fatal(err)
	}
	// The comment is created but the answer is lost (502): the next pass
	// finds it by its marker instead of posting a second one.
	f.failNext = true
	if n, _ := o.Deliver(ctx); n != 0 {
		t.Fatal("a lost answer is not a success")
	}
	c.Advance(DefaultStaleAfter)
	if n, err := o.Deliver(ctx); n != 1 || err != nil {
		t.Fatalf("resend: %d %v", n, err)
	}
	mine := 0
	for _, cm := range f.comments[7] {
		if strings.Contains(cm["body"].(string), "<!-- rdmabot:one-rdmabot@x -->") {
			mine++
		}
	}
	if mine != 1 {
		t.Errorf("%d comments posted, want exactly 1", mine)
	}
	// An issue that does not exist: rejected, not retried.
	if _, err := o.Enqueue(ctx, post("two-rdmabot@x", 404)); err != nil {
		t.Fatal(err)
	}
	o.Deliver(ctx)
	if e, _ := l.Get(ctx, "two-rdmabot@x"); e.State != Failed || !strings.Contains(e.Reason, "Not Found") {
		t.Errorf("unknown issue: %s %q", e.State, e.Reason)
	}
}

// mine counts the comments on issue n carrying msgID's marker.
func (f *fakeGitHub) mine(n int, msgID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := 0
	for _, cm := range f.comments[n] {
		if strings.Contains(cm["body"].(string), marker(msgID)) {
			k++
		}
	}
	return k
}

// GitHub comments go through the same policy as mail: held while
// moderation is on until approved, never to an opted-out login, at most
// author_daily_limit a day to one login, one comment per verdict even
// when the process dies with the post on the wire and a new one takes
// over; mail being off does not hold them (bot.github is their switch).
func TestGitHubCommentPolicy(t *testing.T) {
	f := newFakeGitHub(t)
	f.comments[8] = nil
	client := github.NewClient(nil)
	u, _ := url.Parse(f.srv.URL + "/api/v3/")
	client.BaseURL = u
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	l, err := OpenLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)}
	p := Policy{Send: false, Moderate: true, DailyLimit: 10, AuthorDailyLimit: 2, OptOut: []string{"github:Mallory"}}
	maildir := t.TempDir()
	open := func() *Outbox {
		o, err := New(l, maildir, p, map[string]Sender{"github": NewGitHub(client, quiet())}, c.Now, quiet())
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := open()
	comment := func(id string, issue int, login, verdict string) *Entry {
		t.Helper()
		e, err := o.Enqueue(ctx, FromComment("@"+login+" **PASS**: fine", id, "rdmabot", "linux", issue, verdict, login, "PASS"))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := comment("a-rdmabot@x", 7, "chuck", "series:<a@x>:v1:nfsd:github:rdmabot/linux#7")
	if e.State != Held || e.Recipient != "github:chuck" || e.Key != "github:rdmabot/linux#7|series:<a@x>:v1:nfsd:github:rdmabot/linux#7" {
		t.Fatalf("entry %+v", e)
	}
	// The same verdict again (a retried report job) is no second reply.
	if _, err := o.Enqueue(ctx, FromComment("again", "a2-rdmabot@x", "rdmabot", "linux", 7, "series:<a@x>:v1:nfsd:github:rdmabot/linux#7", "chuck", "PASS")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second verdict: %v", err)
	}
	if n, err := o.Deliver(ctx); n != 0 || err != nil || f.mine(7, "a-rdmabot@x") != 0 {
		t.Fatalf("held comment posted: %d %v", n, err)
	}
	// Opted out, case aside: recorded, never posted, never held.
	if e := comment("m-rdmabot@x", 8, "mallory", "ref:1"); e.State != Suppressed {
		t.Fatalf("opted-out login: %s", e.State)
	}
	if err := o.Approve(ctx, "m-rdmabot@x"); err == nil {
		t.Fatal("a suppressed comment was approved")
	}
	// Approved: posted once (mail is off; comments do not wait for it),
	// the issue's queued label replaced by the verdict's.
	if err := o.Approve(ctx, "a-rdmabot@x"); err != nil {
		t.Fatal(err)
	}
	if n, err := o.Deliver(ctx); n != 1 || err != nil || f.mine(7, "a-rdmabot@x") != 1 {
		t.Fatalf("approved comment: %d %v, %d posted", n, err, f.mine(7, "a-rdmabot@x"))
	}
	if fmt.Sprint(f.labels) != "[#7-rdmabot: queued #7+rdmabot: pass]" {
		t.Errorf("labels %q", f.labels)
	}
	// chuck's second comment today fits the limit of 2; the third waits.
	for i, id := range []string{"b-rdmabot@x", "c-rdmabot@x"} {
		comment(id, 7, "chuck", fmt.Sprintf("ref:%d", 10+i))
		if err := o.Approve(ctx, id); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Minute)
	}
	// The post of b reaches GitHub but its answer is lost, and the
	// process dies: b stays Sending, counted against chuck's limit.
	f.failNext = true
	if n, _ := o.Deliver(ctx); n != 0 {
		t.Fatal("a lost answer counted as sent")
	}
	if got, _ := l.Get(ctx, "c-rdmabot@x"); got.State != Ready {
		t.Fatalf("c past chuck's limit: %s", got.State)
	}
	// A new process takes over after StaleAfter: it finds b's comment by
	// its marker and posts nothing twice; c still waits for the limit.
	c.Advance(DefaultStaleAfter)
	o = open()
	if n, err := o.Deliver(ctx); n != 1 || err != nil {
		t.Fatalf("after the restart: %d %v", n, err)
	}
	if f.mine(7, "b-rdmabot@x") != 1 || f.mine(7, "c-rdmabot@x") != 0 {
		t.Fatalf("b posted %d times, c %d times", f.mine(7, "b-rdmabot@x"), f.mine(7, "c-rdmabot@x"))
	}
	// A day after the first comment, c goes out.
	c.Advance(24 * time.Hour)
	if n, err := o.Deliver(ctx); n != 1 || err != nil || f.mine(7, "c-rdmabot@x") != 1 {
		t.Fatalf("a day later: %d %v", n, err)
	}
	for _, id := range []string{"a-rdmabot@x", "b-rdmabot@x", "c-rdmabot@x"} {
		if f.mine(7, id) != 1 {
			t.Errorf("%s posted %d times", id, f.mine(7, id))
		}
	}
}
