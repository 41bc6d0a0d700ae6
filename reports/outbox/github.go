package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/go-github/v60/github"
)

// issueComments is the part of go-github's IssuesService we use; an
// upgrade of go-github touches only this file.
type issueComments interface {
	CreateComment(ctx context.Context, owner, repo string, number int, c *github.IssueComment) (*github.IssueComment, *github.Response, error)
	ListComments(ctx context.Context, owner, repo string, number int, opts *github.IssueListCommentsOptions) ([]*github.IssueComment, *github.Response, error)
	AddLabelsToIssue(ctx context.Context, owner, repo string, number int, labels []string) ([]*github.Label, *github.Response, error)
	RemoveLabelForIssue(ctx context.Context, owner, repo string, number int, label string) (*github.Response, error)
}

// GitHub posts replies as issue comments, and labels the issue with the
// verdict.
type GitHub struct {
	Issues issueComments
	Log    *slog.Logger
}

// NewGitHub uses a go-github client (token and base URL set by the
// caller).
func NewGitHub(c *github.Client, log *slog.Logger) *GitHub {
	return &GitHub{Issues: c.Issues, Log: log}
}

// QueuedLabel is the label an acknowledged command puts on its issue;
// the verdict's label replaces it.
const QueuedLabel = "rdmabot: queued"

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

// FromComment wraps a comment rendered for issue number of owner/repo
// (reports.RenderComment) and adds the hidden marker naming msgID that
// Send looks for. verdict is the report's key (one comment per verdict);
// login is who asked, the reply's recipient as "github:login", which
// opt_out and author_daily_limit name.
func FromComment(body, msgID, owner, repo string, number int, verdict, login, outcome string) Reply {
	ch := GitHubChannel(owner, repo, number)
	return Reply{
		MessageID: msgID, Key: ch + "|" + verdict, Channel: ch, Outcome: outcome,
		Recipient: GitHubRecipient(login), Raw: []byte(withMarker(body, msgID)),
	}
}

// withMarker is body with the hidden marker naming key, by which a
// resend finds it posted already.
func withMarker(body, key string) string {
	return strings.TrimRight(body, "\n") + "\n\n" + marker(key) + "\n"
}

// GitHubRecipient names a GitHub user as a reply's recipient.
func GitHubRecipient(login string) string { return "github:" + login }

func marker(msgID string) string { return "<!-- rdmabot:" + msgID + " -->" }

// Send posts the comment. GitHub does not deduplicate, so a resend first
// looks for a comment carrying this reply's marker.
func (g *GitHub) Send(ctx context.Context, e *Entry) error {
	owner, repo, n, err := parseGitHubChannel(e.Channel)
	if err != nil {
		return &Rejected{Err: err}
	}
	if e.Attempts > 1 {
		found, err := g.hasMarker(ctx, owner, repo, n, marker(e.MessageID))
		if err != nil {
			return fmt.Errorf("github: looking for an earlier post: %w: %w", ErrNotDelivered, err)
		}
		if found {
			g.verdictLabel(ctx, owner, repo, n, e.Outcome)
			return nil
		}
	}
	_, resp, err := g.Issues.CreateComment(ctx, owner, repo, n, &github.IssueComment{Body: github.String(string(e.Raw))})
	if err == nil {
		g.verdictLabel(ctx, owner, repo, n, e.Outcome)
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

// verdictLabel replaces the queued label with the verdict's.
func (g *GitHub) verdictLabel(ctx context.Context, owner, repo string, n int, outcome string) {
	if outcome == "" {
		return
	}
	g.Label(ctx, owner, repo, n, "rdmabot: "+strings.ToLower(outcome))
}

// Label puts label on issue n of owner/repo in place of the queued one
// (unless it is the queued one). Labels are a convenience: the comment
// is the answer, so failures are only logged.
func (g *GitHub) Label(ctx context.Context, owner, repo string, n int, label string) {
	if label != QueuedLabel {
		if _, err := g.Issues.RemoveLabelForIssue(ctx, owner, repo, n, QueuedLabel); err != nil && !notFound(err) {
			g.Log.Warn("github label", "issue", n, "err", err)
		}
	}
	if _, _, err := g.Issues.AddLabelsToIssue(ctx, owner, repo, n, []string{label}); err != nil {
		g.Log.Warn("github label", "issue", n, "err", err)
	}
}

// PostOnce comments body on issue n of owner/repo, with the hidden
// marker naming key, unless a comment there carries that marker already:
// GitHub does not deduplicate, and a command is read again on every
// poll until it is answered.
func (g *GitHub) PostOnce(ctx context.Context, owner, repo string, n int, body, key string) error {
	found, err := g.hasMarker(ctx, owner, repo, n, marker(key))
	if err != nil {
		return fmt.Errorf("github: list comments of #%d: %w", n, err)
	}
	if found {
		return nil
	}
	if _, _, err := g.Issues.CreateComment(ctx, owner, repo, n, &github.IssueComment{Body: github.String(withMarker(body, key))}); err != nil {
		return fmt.Errorf("github: comment on #%d: %w", n, err)
	}
	return nil
}

func notFound(err error) bool {
	var er *github.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound
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
