package fakegithub

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-github/v60/github"
)

// The fake answers go-github as GitHub does: a comment on an issue that
// does not exist is a 404, comments list in pages, removing a label the
// issue lacks is a 404 and one it has is not, a lost answer still keeps
// the comment, and a second poll with the ETag is a 304.
func TestAnswersAsGitHub(t *testing.T) {
	f := New(t, "o", "r")
	f.OnlyIssues(7)
	c := github.NewClient(nil)
	u, _ := url.Parse(f.URL + "/api/v3/")
	c.BaseURL = u
	ctx := context.Background()
	if _, resp, err := c.Issues.CreateComment(ctx, "o", "r", 8, &github.IssueComment{Body: github.String("x")}); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a comment on a missing issue: %v", err)
	}
	for i := range 35 {
		f.AddComment(7, "someone", "NONE", fmt.Sprintf("comment %d", i))
	}
	page, resp, err := c.Issues.ListComments(ctx, "o", "r", 7, nil)
	if err != nil || len(page) != 30 || resp.NextPage != 2 {
		t.Errorf("first page: %d comments, next %d, %v", len(page), resp.NextPage, err)
	}
	if _, err := c.Issues.RemoveLabelForIssue(ctx, "o", "r", 7, "queued"); err == nil {
		t.Error("removing a label the issue lacks")
	}
	if _, _, err := c.Issues.AddLabelsToIssue(ctx, "o", "r", 7, []string{"queued"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Issues.RemoveLabelForIssue(ctx, "o", "r", 7, "queued"); err != nil {
		t.Errorf("removing a label the issue has: %v", err)
	}
	if got := fmt.Sprint(f.LabelCalls()); got != "[#7-queued #7+queued #7-queued]" {
		t.Errorf("label calls %s", got)
	}
	f.LoseNextAnswer()
	if _, _, err := c.Issues.CreateComment(ctx, "o", "r", 7, &github.IssueComment{Body: github.String("mine")}); err == nil || f.Count(7, "mine") != 1 {
		t.Errorf("a lost answer: %v, %d kept", err, f.Count(7, "mine"))
	}
	opts := &github.IssueListCommentsOptions{Sort: github.String("updated")}
	if _, _, err := c.Issues.ListComments(ctx, "o", "r", 0, opts); err != nil {
		t.Fatal(err)
	}
	c2 := github.NewClient(nil)
	c2.BaseURL = u
	req, _ := c2.NewRequest("GET", "repos/o/r/issues/comments?sort=updated", nil)
	req.Header.Set("If-None-Match", `W/"0"`)
	if resp, _ := c2.Do(ctx, req, nil); resp == nil || resp.StatusCode != http.StatusNotModified {
		t.Errorf("a poll with the current ETag: %v", resp)
	}
	if polls, notMod := f.Polls(); polls != 2 || notMod != 1 {
		t.Errorf("polls %d, 304s %d", polls, notMod)
	}
}
