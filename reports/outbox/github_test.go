package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/rdmabot/rdmabot/internal/fakegithub"
)

func TestGitHubExactlyOnce(t *testing.T) {
	f := fakegithub.New(t, "rdmabot", "linux")
	f.OnlyIssues(7)
	// Enough earlier comments to need two pages when looking for ours.
	for i := range 130 {
		f.AddComment(7, "someone", "NONE", fmt.Sprintf("comment %d", i))
	}
	client := github.NewClient(nil)
	u, _ := url.Parse(f.URL + "/api/v3/")
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
	f.LoseNextAnswer()
	if n, _ := o.Deliver(ctx); n != 0 {
		t.Fatal("a lost answer is not a success")
	}
	c.Advance(DefaultStaleAfter)
	if n, err := o.Deliver(ctx); n != 1 || err != nil {
		t.Fatalf("resend: %d %v", n, err)
	}
	if mine := f.Count(7, "<!-- rdmabot:one-rdmabot@x -->"); mine != 1 {
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

// GitHub comments go through the same policy as mail: held while
// moderation is on until approved, never to an opted-out login, at most
// author_daily_limit a day to one login, one comment per verdict even
// when the process dies with the post on the wire and a new one takes
// over; mail being off does not hold them (bot.github is their switch).
func TestGitHubCommentPolicy(t *testing.T) {
	f := fakegithub.New(t, "rdmabot", "linux")
	f.OnlyIssues(7, 8)
	client := github.NewClient(nil)
	u, _ := url.Parse(f.URL + "/api/v3/")
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
	if n, err := o.Deliver(ctx); n != 0 || err != nil || f.Count(7, marker("a-rdmabot@x")) != 0 {
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
	if n, err := o.Deliver(ctx); n != 1 || err != nil || f.Count(7, marker("a-rdmabot@x")) != 1 {
		t.Fatalf("approved comment: %d %v, %d posted", n, err, f.Count(7, marker("a-rdmabot@x")))
	}
	if fmt.Sprint(f.LabelCalls()) != "[#7-rdmabot: queued #7+rdmabot: pass]" {
		t.Errorf("labels %q", f.LabelCalls())
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
	f.LoseNextAnswer()
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
	if f.Count(7, marker("b-rdmabot@x")) != 1 || f.Count(7, marker("c-rdmabot@x")) != 0 {
		t.Fatalf("b posted %d times, c %d times", f.Count(7, marker("b-rdmabot@x")), f.Count(7, marker("c-rdmabot@x")))
	}
	// A day after the first comment, c goes out.
	c.Advance(24 * time.Hour)
	if n, err := o.Deliver(ctx); n != 1 || err != nil || f.Count(7, marker("c-rdmabot@x")) != 1 {
		t.Fatalf("a day later: %d %v", n, err)
	}
	for _, id := range []string{"a-rdmabot@x", "b-rdmabot@x", "c-rdmabot@x"} {
		if f.Count(7, marker(id)) != 1 {
			t.Errorf("%s posted %d times", id, f.Count(7, marker(id)))
		}
	}
}

// PostOnce (the GitHub intake's answers) posts a comment with its key's
// marker once however often it is called, says why when the comments
// cannot be listed or the post fails, and Label swaps the queued label
// for the one given.
func TestGitHubPostOnce(t *testing.T) {
	f := fakegithub.New(t, "rdmabot", "linux")
	f.OnlyIssues(7)
	client := github.NewClient(nil)
	u, _ := url.Parse(f.URL + "/api/v3/")
	client.BaseURL = u
	gh := NewGitHub(client, quiet())
	ctx := context.Background()
	for range 2 {
		if err := gh.PostOnce(ctx, "rdmabot", "linux", 7, "Queued.\n", "cmd:1"); err != nil {
			t.Fatal(err)
		}
	}
	if b := f.Bodies(7); len(b) != 1 || b[0] != "Queued.\n\n<!-- rdmabot:cmd:1 -->\n" {
		t.Errorf("comments %q, want one with its marker", b)
	}
	if err := gh.PostOnce(ctx, "rdmabot", "linux", 404, "x", "cmd:2"); err == nil || !strings.Contains(err.Error(), "list comments of #404") {
		t.Errorf("an issue that does not exist: %v", err)
	}
	f.FailPosts(1)
	if err := gh.PostOnce(ctx, "rdmabot", "linux", 7, "Done.\n", "cmd:3"); err == nil || !strings.Contains(err.Error(), "comment on #7") {
		t.Errorf("a failed post: %v", err)
	}
	gh.Label(ctx, "rdmabot", "linux", 7, QueuedLabel)
	gh.Label(ctx, "rdmabot", "linux", 7, "rdmabot: pass")
	t.Logf("label calls %q", f.LabelCalls())
	if l := f.LabelCalls(); len(l) != 3 || l[0] != "#7+rdmabot: queued" || l[1] != "#7-rdmabot: queued" || l[2] != "#7+rdmabot: pass" {
		t.Errorf("label calls %q", l)
	}
}
