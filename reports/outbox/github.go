package outbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/rdmabot/rdmabot/reports"
)

// issueComments is the part of go-github's IssuesService we use; an
// upgrade of go-github touches only this file.
type issueComments interface {
	CreateComment(ctx context.Context, owner, repo string, number int, c *github.IssueComment) (*github.IssueComment, *github.Response, error)
	ListComments(ctx context.Context, owner, repo string, number int, opts *github.IssueListCommentsOptions) ([]*github.IssueComment, *github.Response, error)
}

// GitHub posts replies as issue comments.
type GitHub struct{ Issues issueComments }

// NewGitHub uses a go-github client (token and base URL set by the
// caller).
func NewGitHub(c *github.Client) *GitHub { return &GitHub{Issues: c.Issues} }

// GitHubChannel names an issue as a reply channel.
func GitHubChannel(owner, repo string, number int) string {
	return fmt.Sprintf("github:%s/%s#%d", owner, repo, number)
}

func parseGitHubChannel(ch string) (owner, repo string, n int, err error) {
	rest, ok := strings.CutPrefix(ch, "github:")
	or, num, ok2 := strings.Cut(rest, "#")
	owner, repo, ok3 := strings.Cut(or, "/")
	n, err = strconv.Atoi(num)
	if !ok || !ok2 || !ok3 || err != nil || owner == "" || repo == "" || n <= 0 {
		return "", "", 0, fmt.Errorf("bad GitHub channel %q (want github:owner/repo#N)", ch)
	}
	return owner, repo, n, nil
}

// FromComment wraps a rendered GitHub comment (Markdown,
// which ends with a marker naming msgID).
func FromComment(body, msgID, owner, repo string, number int, v *reports.Verdict) Reply {
	ch := GitHubChannel(owner, repo, number)
	return Reply{
		MessageID: msgID, Key: Key(ch, v.In.Thread.MessageID, v.In.Thread.Version), Channel: ch,
		Outcome: v.Outcome.String(), Recipient: v.In.Thread.Author.Email, InReplyTo: v.In.Thread.MessageID,
		Raw: []byte(body),
	}
}

// Send posts the comment. GitHub does not deduplicate, so a resend first
// looks for a comment carrying this reply's marker.
func (g *GitHub) Send(ctx context.Context, e *Entry) error {
	owner, repo, n, err := parseGitHubChannel(e.Channel)
	if err != nil {
		return &Rejected{Err: err}
	}
	if e.Attempts > 1 {
		found, err := g.hasMarker(ctx, owner, repo, n, "<!-- rdmabot:"+e.MessageID+" -->")
		if err != nil {
			return fmt.Errorf("github: looking for an earlier post: %w: %w", ErrNotDelivered, err)
		}
		if found {
			return nil
		}
	}
	_, resp, err := g.Issues.CreateComment(ctx, owner, repo, n, &github.IssueComment{Body: github.String(string(e.Raw))})
	if err == nil {
		return nil
	}
	var rl *github.RateLimitError
	var ar *github.AbuseRateLimitError
	switch {
	case errors.As(err, &rl), errors.As(err, &ar):
		return fmt.Errorf("github: %w: %w", ErrNotDelivered, err)
	case resp != nil && resp.StatusCode >= 400 && resp.StatusCode < 500:
		return &Rejected{Err: fmt.Errorf("github %s: %w", http.StatusText(resp.StatusCode), err)}
	}
	return fmt.Errorf("github: %w", err) // 5xx or transport: fate unknown
}

func (g *GitHub) hasMarker(ctx context.Context, owner, repo string, n int, marker string) (bool, error) {
	opt := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := g.Issues.ListComments(ctx, owner, repo, n, opt)
		if err != nil {
			return false, err
		}
		for _, c := range cs {
			if strings.Contains(c.GetBody(), marker) {
				return true, nil
			}
		}
		if resp == nil || resp.NextPage == 0 {
			return false, nil
		}
		opt.Page = resp.NextPage
	}
}
