package ghbot

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakegithub"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
	}{
		{"/rdmabot test <20240101.abc@oracle.com>", []string{"test <20240101.abc@oracle.com>"}},
		{"please\n/rdmabot test rdma for-next\r\nthanks", []string{"test rdma for-next"}},
		{"/rdmabot bisect v6.12 HEAD\n/rdmabot retest", []string{"bisect v6.12 HEAD", "retest"}},
		{"> /rdmabot cancel", nil},                                         // a quote
		{"    /rdmabot cancel", nil},                                       // indented code
		{"```\n/rdmabot cancel\n```\n/rdmabot retest", []string{"retest"}}, // fenced code
		{"see /rdmabot test x", nil},                                       // not at the start of a line
		{"/rdmabotx test", nil},
	} {
		var got []string
		for _, c := range Parse(tc.body) {
			got = append(got, strings.TrimSpace(c.Verb+" "+strings.Join(c.Args, " ")))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q: got %q, want %q", tc.body, got, tc.want)
		}
	}
}

type fakeCmds struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeCmds) add(s string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return int64(len(f.calls))
}

// Act records what the transport asked of the bot, in words.
func (f *fakeCmds) Act(ctx context.Context, c flow.Command, s *flow.Series, o flow.Origin) (flow.Acted, error) {
	thread := fmt.Sprintf("github:%s#%d", o.Repo, o.Issue)
	switch c.Verb {
	case flow.CommandTest:
		if c.Tree == "nope" {
			return flow.Acted{}, &flow.CommandError{Why: fmt.Sprintf("unknown tree %q", c.Tree)}
		}
		asked := ""
		if len(c.Profiles) > 0 {
			asked = " +" + strings.Join(c.Profiles, "+")
		}
		if c.Link != "" {
			return flow.Acted{What: flow.ActedTest, ID: f.add(fmt.Sprintf("thread %s #%d by %s%s", c.Link, o.Issue, o.User, asked))}, nil
		}
		return flow.Acted{What: flow.ActedTest, ID: f.add("ref " + c.Tree + " " + c.Ref + asked)}, nil
	case flow.CommandBisect:
		return flow.Acted{What: flow.ActedBisection, ID: f.add("bisect " + c.Tree + " " + c.Good + " " + c.Bad)}, nil
	case flow.CommandRetest:
		return flow.Acted{What: flow.ActedTest, ID: f.add("retest " + thread + strings.Join(c.Profiles, "+"))}, nil
	case flow.CommandCancel:
		return flow.Acted{What: flow.ActedCanceled, ID: f.add("cancel " + thread)}, nil
	}
	return flow.Acted{}, fmt.Errorf("the transport asked for %q", c.Verb)
}

type memory struct {
	mu    sync.Mutex
	seen  map[string]bool
	state map[string]string
}

func (m *memory) FirstSeen(ctx context.Context, key string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen[key] {
		return false, nil
	}
	m.seen[key] = true
	return true, nil
}
func (m *memory) Seen(ctx context.Context, key string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[key], nil
}
func (m *memory) State(ctx context.Context, key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state[key], nil
}
func (m *memory) SetState(ctx context.Context, key, v string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state[key] = v
	return nil
}

func setup(t testing.TB) (*Bot, *fakegithub.Server, *fakeCmds) {
	fg := fakegithub.New(t, "o", "r")
	fg.AddMember("linux-rdma", "chuck")
	fg.AddCollaborator("leon")
	c := github.NewClient(nil)
	u, _ := url.Parse(fg.URL + "/")
	c.BaseURL, c.UploadURL = u, u
	cmds := &fakeCmds{}
	g := &Bot{Client: c, Owner: "o", Repo: "r", Secret: []byte("s3cret"), Allow: []string{"tester"}, Org: "linux-rdma",
		Tree: "mainline", URL: "http://127.0.0.1:8480", Cmds: cmds,
		Mem: &memory{seen: map[string]bool{}, state: map[string]string{}}, Log: slog.New(slog.DiscardHandler)}
	return g, fg, cmds
}

// issueCommentPayload is an issue_comment webhook body in GitHub's shape.
func issueCommentPayload(id int64, issue int, login, assoc, body string) []byte {
	p := map[string]any{
		"action": "created",
		"issue": map[string]any{
			"url": fmt.Sprintf("https://api.github.com/repos/o/r/issues/%d", issue), "id": 9000 + issue, "number": issue,
			"title": "svcrdma regression?", "state": "open", "user": map[string]any{"login": "reporter", "id": 2, "type": "User"},
			"labels": []any{}, "comments": 1, "author_association": "NONE", "body": "",
		},
		"comment": map[string]any{
			"id": id, "node_id": "IC_x", "url": fmt.Sprintf("https://api.github.com/repos/o/r/issues/comments/%d", id),
			"html_url":   fmt.Sprintf("https://github.com/o/r/issues/%d#issuecomment-%d", issue, id),
			"issue_url":  fmt.Sprintf("https://api.github.com/repos/o/r/issues/%d", issue),
			"user":       map[string]any{"login": login, "id": 3, "type": "User"},
			"created_at": "2026-11-30T03:10:00Z", "updated_at": "2026-11-30T03:10:00Z",
			"author_association": assoc, "body": body,
		},
		"repository": map[string]any{"id": 77, "name": "r", "full_name": "o/r", "owner": map[string]any{"login": "o", "id": 4, "type": "Organization"}, "private": false},
		"sender":     map[string]any{"login": login, "id": 3, "type": "User"},
	}
	b, _ := json.Marshal(p)
	return b
}

func deliver(t *testing.T, g *Bot, secret string, payload []byte) int {
	req := httptest.NewRequest("POST", "/github", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(payload)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	return w.Code
}

func TestWebhook(t *testing.T) {
	g, fg, cmds := setup(t)
	ctx := context.Background()
	_ = ctx
	// A forged signature is refused and does nothing.
	if code := deliver(t, g, "wrong", issueCommentPayload(1, 5, "chuck", "NONE", "/rdmabot retest")); code != http.StatusUnauthorized {
		t.Fatalf("forged delivery: %d", code)
	}
	// An org member asks for a thread test: queued, acknowledged, labelled.
	if code := deliver(t, g, "s3cret", issueCommentPayload(2, 5, "chuck", "CONTRIBUTOR",
		"Could you test this?\n/rdmabot test https://lore.kernel.org/linux-nfs/20240101.abc@oracle.com/\n")); code != http.StatusNoContent {
		t.Fatalf("delivery: %d", code)
	}
	// The same comment again (a redelivery) does nothing.
	deliver(t, g, "s3cret", issueCommentPayload(2, 5, "chuck", "CONTRIBUTOR", "/rdmabot test x"))
	// A stranger is refused with the reason.
	deliver(t, g, "s3cret", issueCommentPayload(3, 5, "mallory", "NONE", "/rdmabot bisect v6.11 v6.12"))
	// A collaborator (checked through the API) and an owner (by association).
	deliver(t, g, "s3cret", issueCommentPayload(4, 5, "leon", "NONE", "/rdmabot test rdma for-next"))
	deliver(t, g, "s3cret", issueCommentPayload(5, 5, "jgg", "OWNER", "> /rdmabot cancel\nquoted, not a command\n/rdmabot cancel"))
	deliver(t, g, "s3cret", issueCommentPayload(6, 5, "tester", "NONE", "/rdmabot frobnicate"))
	// fstests asked for by name, before the other words.
	deliver(t, g, "s3cret", issueCommentPayload(7, 6, "jgg", "OWNER", "/rdmabot test fstests rdma for-next"))
	deliver(t, g, "s3cret", issueCommentPayload(8, 6, "jgg", "OWNER", "/rdmabot test fstests <20240101.abc@oracle.com>"))

	want := []string{
		"thread https://lore.kernel.org/linux-nfs/20240101.abc@oracle.com/ #5 by chuck",
		"ref rdma for-next",
		"cancel github:o/r#5",
		"ref rdma for-next +fstests",
		"thread <20240101.abc@oracle.com> #6 by jgg +fstests",
	}
	if fmt.Sprint(cmds.calls) != fmt.Sprint(want) {
		t.Fatalf("commands %q, want %q", cmds.calls, want)
	}
	bodies := fg.Bodies(5)
	if len(bodies) != 5 {
		t.Fatalf("%d replies: %q", len(bodies), bodies)
	}
	if !strings.Contains(bodies[0], "Queued test 1: http://127.0.0.1:8480/tests/1") {
		t.Errorf("ack: %q", bodies[0])
	}
	if !strings.Contains(bodies[1], "Sorry @mallory") || !strings.Contains(bodies[1], "not a member of linux-rdma") {
		t.Errorf("refusal: %q", bodies[1])
	}
	if !strings.Contains(bodies[4], "Unknown command") {
		t.Errorf("unknown command reply: %q", bodies[4])
	}
	if l := fg.LabelCalls(); len(l) == 0 || l[0] != "#5+rdmabot: queued" {
		t.Errorf("labels %q", l)
	}
}

// Polling reads new comments, and an unchanged list costs a 304.
func TestPoll(t *testing.T) {
	g, fg, cmds := setup(t)
	ctx := context.Background()
	fg.AddComment(7, "tester", "NONE", "/rdmabot retest")
	if err := g.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if len(cmds.calls) != 1 || cmds.calls[0] != "retest github:o/r#7" {
		t.Fatalf("calls %q", cmds.calls)
	}
	if err := g.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if polls, notMod := fg.Polls(); notMod != 1 {
		t.Fatalf("second poll not answered by 304 (%d polls, %d 304s)", polls, notMod)
	}
	if len(cmds.calls) != 1 {
		t.Fatalf("comment handled twice: %q", cmds.calls)
	}
}

// endless is a body of n bytes that counts what was read of it.
type endless struct{ n, read int64 }

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= e.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), e.n-e.read)
	for i := range p[:k] {
		p[i] = 'x'
	}
	e.read += k
	return int(k), nil
}

// The webhook never reads more than MaxPayload, and nothing at all
// without a signature to check (a 512 MiB unsigned body was read whole)
// or of an event it does not act on.
func TestWebhookBodyCapped(t *testing.T) {
	g, _, cmds := setup(t)
	post := func(body *endless, length int64, signed bool) int {
		return postTo(g, body, length, signed, "issue_comment")
	}
	// Unknown length (chunked): cut at the cap.
	b := &endless{n: 64 << 20}
	if code := post(b, -1, true); code != http.StatusRequestEntityTooLarge || b.read > MaxPayload+64<<10 {
		t.Errorf("64 MiB chunked: %d after reading %d bytes, want 413 and at most %d", code, b.read, MaxPayload)
	}
	// A declared length over the cap, or no signature: nothing is read.
	b = &endless{n: 64 << 20}
	if code := post(b, b.n, true); code != http.StatusRequestEntityTooLarge || b.read != 0 {
		t.Errorf("64 MiB declared: %d after reading %d bytes", code, b.read)
	}
	b = &endless{n: 1 << 20}
	if code := post(b, -1, false); code != http.StatusUnauthorized || b.read != 0 {
		t.Errorf("unsigned: %d after reading %d bytes", code, b.read)
	}
	b = &endless{n: 1 << 20}
	if code := postTo(g, b, -1, true, "push"); code != http.StatusNoContent || b.read != 0 {
		t.Errorf("push event: %d after reading %d bytes", code, b.read)
	}
	// Under the cap, a forged signature is still refused.
	b = &endless{n: 1 << 20}
	if code := post(b, -1, true); code != http.StatusUnauthorized {
		t.Errorf("forged 1 MiB: %d", code)
	}
	if len(cmds.calls) != 0 {
		t.Errorf("ran %q", cmds.calls)
	}
}

// postTo delivers body as an event of type event, with a forged
// signature or none, and returns the answer's status.
func postTo(g *Bot, body io.Reader, length int64, signed bool, event string) int {
	req := httptest.NewRequest("POST", "/github", body)
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	if signed {
		req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	return w.Code
}

// held is a body whose reads wait for release, saying when the first
// one started.
type held struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *held) Read(p []byte) (int, error) {
	h.once.Do(func() { close(h.started) })
	<-h.release
	return 0, io.EOF
}

// At most MaxReading deliveries are read at once: one more is refused
// unread, and once they end the next is read again (100 forged 25 MB
// deliveries at once took serve from 33 MB to 4.1 GB).
func TestWebhookReadsFewAtOnce(t *testing.T) {
	g, _, cmds := setup(t)
	release := make(chan struct{})
	codes := make(chan int, MaxReading)
	for range MaxReading {
		h := &held{started: make(chan struct{}), release: release}
		go func() { codes <- postTo(g, h, -1, true, "issue_comment") }()
		<-h.started
	}
	b := &endless{n: 1 << 10}
	if code := postTo(g, b, -1, true, "issue_comment"); code != http.StatusServiceUnavailable || b.read != 0 {
		t.Errorf("delivery %d while %d are read: %d after reading %d bytes", MaxReading+1, MaxReading, code, b.read)
	}
	close(release)
	for range MaxReading {
		if code := <-codes; code != http.StatusUnauthorized {
			t.Errorf("forged held delivery: %d", code)
		}
	}
	b = &endless{n: 1 << 10}
	if code := postTo(g, b, -1, true, "issue_comment"); code != http.StatusUnauthorized || b.read != b.n {
		t.Errorf("after the others ended: %d after reading %d bytes", code, b.read)
	}
	if len(cmds.calls) != 0 {
		t.Errorf("ran %q", cmds.calls)
	}
}

// The cap leaves room for the largest delivery GitHub sends for a
// comment: the comment's and the issue's text at GitHub's 65536
// characters, each escaped to six bytes (\u003c).
func TestWebhookTakesTheLargestComment(t *testing.T) {
	g, fg, cmds := setup(t)
	p := issueCommentPayload(30, 11, "tester", "NONE", "/rdmabot retest\n"+strings.Repeat("<", 65536-16))
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		t.Fatal(err)
	}
	m["issue"].(map[string]any)["body"] = strings.Repeat("<", 65536)
	p, _ = json.Marshal(m)
	if len(p) < 12*65536 {
		t.Fatalf("payload of %d bytes, not the largest", len(p))
	}
	if code := deliver(t, g, "s3cret", p); code != http.StatusNoContent {
		t.Fatalf("a %d byte delivery: %d", len(p), code)
	}
	if fmt.Sprint(cmds.calls) != "[retest github:o/r#11]" || len(fg.Bodies(11)) != 1 {
		t.Errorf("calls %q, answers %q", cmds.calls, fg.Bodies(11))
	}
}

// A command is done only once it ran and was answered: a GitHub error
// on the way (who may command, posting the answer) leaves it for the
// next delivery or poll, which neither drops it nor runs it again.
func TestCommandSurvivesAPIErrors(t *testing.T) {
	g, fg, cmds := setup(t)
	// The answer cannot be posted: the command ran, the delivery fails.
	fg.FailPosts(2)
	for range 2 {
		if code := deliver(t, g, "s3cret", issueCommentPayload(20, 8, "tester", "NONE", "/rdmabot retest\n/rdmabot test rdma for-next")); code != http.StatusInternalServerError {
			t.Fatalf("comment post failed: delivery answered %d", code)
		}
	}
	if fmt.Sprint(cmds.calls) != "[retest github:o/r#8]" {
		t.Fatalf("after failed posts: calls %q", cmds.calls)
	}
	// GitHub redelivers: the kept answer is posted, the next command
	// runs; later deliveries change nothing.
	for range 2 {
		if code := deliver(t, g, "s3cret", issueCommentPayload(20, 8, "tester", "NONE", "/rdmabot retest\n/rdmabot test rdma for-next")); code != http.StatusNoContent {
			t.Fatalf("redelivery: %d", code)
		}
	}
	if fmt.Sprint(cmds.calls) != "[retest github:o/r#8 ref rdma for-next]" {
		t.Errorf("calls %q, want each command once", cmds.calls)
	}
	if b := fg.Bodies(8); len(b) != 2 || !strings.Contains(b[0], "Queued test 1") || !strings.Contains(b[1], "Queued test 2") {
		t.Errorf("answers %q", b)
	}

	// Who may command cannot be told: nothing runs, nothing is dropped;
	// the poll reads the comment again and runs it once.
	fg.FailMembership(1)
	fg.AddComment(9, "chuck", "CONTRIBUTOR", "/rdmabot cancel")
	fg.SetETag(`W/"def"`)
	if err := g.Poll(context.Background()); err == nil {
		t.Fatal("poll hid the membership error")
	}
	if len(cmds.calls) != 2 {
		t.Fatalf("ran without knowing who asked: %q", cmds.calls)
	}
	for range 2 {
		if err := g.Poll(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(cmds.calls) != 3 || cmds.calls[2] != "cancel github:o/r#9" {
		t.Errorf("calls %q", cmds.calls)
	}
	if b := fg.Bodies(9); len(b) != 2 || !strings.Contains(b[1], "Canceled test 3") {
		t.Errorf("answers on #9 %q", b)
	}
}

// BenchmarkForgedDeliveries is a stranger's attack: 100 deliveries at once,
// each 25 MB (GitHub's own cap) under a forged signature. B/op is what
// they made the webhook allocate; peak-heap-MB the most it held
// (sampled every millisecond).
func BenchmarkForgedDeliveries(b *testing.B) {
	g, _, _ := setup(b)
	g.Log = slog.New(slog.DiscardHandler)
	var peak uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				req := httptest.NewRequest("POST", "/github", &endless{n: 25 << 20})
				req.ContentLength = -1
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", "issue_comment")
				req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
				g.ServeHTTP(httptest.NewRecorder(), req)
			})
		}
		wg.Wait()
	}
	close(done)
	<-sampled
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
}
