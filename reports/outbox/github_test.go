package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
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
	srv      *httptest.Server
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	f := &fakeGitHub{comments: map[int][]map[string]any{7: {}}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v3/repos/rdmabot/linux/issues/{n}/comments", f.handle)
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
	gh := NewGitHub(client)

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
