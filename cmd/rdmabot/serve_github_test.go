package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/fakegithub"
	"github.com/rdmabot/rdmabot/internal/pitest"
)

// `rdmabot serve` with config.toml and bot.github set: a signed
// issue_comment webhook asks for a test of a series on the list; the
// command is acknowledged in the issue at once, the verdict's comment is
// rendered by reports and recorded in the outbox, held (moderation) until
// `rdmabot outbox approve`, then posted in the issue by the outbox; a
// kill -9 and restarts post nothing twice.
func TestServeGitHubCommentThroughOutbox(t *testing.T) {
	srv := pitest.Start(t, pitest.Inbox{Name: "linux-rdma", Messages: [][]byte{
		mailAt("Alice Author <alice@example.org>", "svcrdma-1@example.org", "[PATCH] svcrdma: fix a comment", "", svcrdmaPatch)}})
	gh := fakegithub.New(t, "o", "r")
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("s3cret\n"), 0o600)
	e := newServeEnv(t,
		`url = "https://lore.kernel.org/linux-rdma"`, fmt.Sprintf("url = %q", "imap://"+srv.IMAPAddr+"/org.kernel.vger.linux-rdma"),
		`url = "https://lore.kernel.org/linux-nfs"`, `url = "no-inbox"`,
		`poll_interval = "2m0s"`, `poll_interval = "1s"`,
		`grace_period = "6h"`, `grace_period = "3s"`,
		`max_attempts = 8`, `max_attempts = 2`,
		`repo = ""`, `repo = "o/r"`,
		// Comments leave the machine: their links must work off it.
		`url = "http://127.0.0.1:8480"`, `url = "https://rdmabot.example.org"`,
		`api = ""`, fmt.Sprintf("api = %q", gh.URL),
		`secret_file = ""`, fmt.Sprintf("secret_file = %q", secret),
		`poll_interval = "1m0s"`, `poll_interval = "0s"`,
	)
	treeStore(t, filepath.Join(e.dir, "data"))
	e.start()
	// The list's own test first: the series is in the store. It named no
	// base, and a patch that does not apply to the default branch the bot
	// guessed is mailed to no one.
	e.waitFor("the series tested from the list", 90*time.Second, func() (bool, string) {
		st := e.rdmabot("status")
		for _, l := range strings.Split(st, "\n") {
			if m := testRow.FindStringSubmatch(l); m != nil && m[1] == "done" {
				return m[2] == "APPLY_FAILED", st
			}
		}
		return false, st
	})
	if rows := e.outboxRows(); len(rows) != 0 {
		t.Fatalf("the guessed base's APPLY_FAILED was mailed: %q", rows)
	}

	payload, _ := json.Marshal(map[string]any{
		"action": "created",
		"issue": map[string]any{
			"url": gh.URL + "/repos/o/r/issues/5", "id": 9005, "number": 5, "title": "svcrdma: is this patch OK?", "state": "open",
			"user": map[string]any{"login": "reporter", "id": 2, "type": "User"}, "labels": []any{}, "comments": 0,
			"author_association": "NONE", "body": "",
		},
		"comment": map[string]any{
			"id": 777, "node_id": "IC_x", "url": gh.URL + "/repos/o/r/issues/comments/777",
			"html_url": "https://github.com/o/r/issues/5#issuecomment-777", "issue_url": gh.URL + "/repos/o/r/issues/5",
			"user":       map[string]any{"login": "chuck", "id": 3, "type": "User"},
			"created_at": "2026-11-30T03:10:00Z", "updated_at": "2026-11-30T03:10:00Z",
			"author_association": "OWNER", "body": "Please test\n/rdmabot test <svcrdma-1@example.org>\n",
		},
		"repository": map[string]any{"id": 77, "name": "r", "full_name": "o/r", "owner": map[string]any{"login": "o", "id": 4, "type": "Organization"}, "private": false},
		"sender":     map[string]any{"login": "chuck", "id": 3, "type": "User"},
	})
	req, _ := http.NewRequest("POST", "http://"+e.addr+"/github", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write(payload)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("webhook: %s\n%s", resp.Status, e.log())
	}
	if b := gh.Bodies(5); len(b) != 1 || !strings.Contains(b[0], "Queued test") {
		t.Fatalf("acknowledgement: %q", b)
	}

	// The verdict: a comment in the outbox for chuck, held.
	var id string
	e.waitFor("the comment recorded", 90*time.Second, func() (bool, string) {
		out := e.rdmabot("outbox", "list")
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 7 && f[4] == "github:o/r#5" {
				id = f[6]
				return f[0] == "held" && f[3] == "APPLY_FAILED" && f[5] == "github:chuck", out
			}
		}
		return false, out
	})
	show := e.rdmabot("outbox", "show", id)
	for _, w := range []string{"state: held", "@chuck **APPLY_FAILED**: rdmabot could not apply", "Patch 1 (`[PATCH] svcrdma: fix a comment`) does not apply",
		"<!-- rdmabot:" + id + " -->"} {
		if !strings.Contains(show, w) {
			t.Errorf("the comment lacks %q:\n%s", w, show)
		}
	}
	time.Sleep(2 * time.Second) // a deliver pass would post it now if moderation let it
	if b := gh.Bodies(5); len(b) != 1 {
		t.Fatalf("posted while held: %q", b)
	}

	// Approved, and the server killed and restarted: its delivery at
	// start posts the comment once.
	e.rdmabot("outbox", "approve", id)
	e.kill()
	e.start()
	posted := func() int {
		n := 0
		for _, b := range gh.Bodies(5) {
			if strings.Contains(b, "<!-- rdmabot:"+id+" -->") {
				n++
			}
		}
		return n
	}
	e.waitFor("the comment posted", 60*time.Second, func() (bool, string) {
		return posted() == 1, fmt.Sprint(gh.Bodies(5), e.outboxRows())
	})
	e.kill()
	before := len(e.log())
	e.start()
	e.waitFor("a delivery pass after the second restart", 60*time.Second, func() (bool, string) {
		return strings.Contains(e.log()[before:], "kind=deliver"), ""
	})
	time.Sleep(2 * time.Second)
	if n := posted(); n != 1 || len(gh.Bodies(5)) != 2 {
		t.Errorf("%d verdict comments, %d in all: %q", n, len(gh.Bodies(5)), gh.Bodies(5))
	}
	if l := fmt.Sprint(gh.LabelCalls()); l != "[#5+rdmabot: queued #5-rdmabot: queued #5+rdmabot: apply_failed]" {
		t.Errorf("labels %q", l)
	}
}
