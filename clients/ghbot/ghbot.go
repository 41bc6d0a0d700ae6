// Package ghbot takes /rdmabot commands from GitHub issues and comments,
// by webhook (signature checked) or by polling with ETags, checks who may
// give them, queues the work and acknowledges it in the issue at once
// (or says why not), with a label. The result is a reply like any other:
// reports renders it and its outbox posts it in the issue (see
// reply.Replier), moderated, limited and exactly once.
package ghbot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/reports/outbox"
)

// Commands is the bot, which does what a command asks (bot.Bot.Act):
// this transport only reads the comment and decides who wrote it.
type Commands interface {
	Act(ctx context.Context, c flow.Command, s *flow.Series, o flow.Origin) (flow.Acted, error)
}

// Memory remembers what was handled and where polling stopped.
type Memory interface {
	// FirstSeen records key and reports whether it was new (atomic:
	// of two processes, one gets true).
	FirstSeen(ctx context.Context, key string) (bool, error)
	// Seen reports whether key was recorded, recording nothing.
	Seen(ctx context.Context, key string) (bool, error)
	State(ctx context.Context, key string) (string, error)
	SetState(ctx context.Context, key, value string) error
}

// Bot answers one repository's issues.
type Bot struct {
	Client      *github.Client
	Owner, Repo string
	Secret      []byte   // webhook secret; nil refuses every delivery
	Allow       []string // logins always allowed
	Org         string   // members may command
	Tree        string   // tree for /rdmabot bisect
	URL         string   // dashboard base URL
	Cmds        Commands
	Mem         Memory
	Log         *slog.Logger

	// reading counts the deliveries being read (MaxReading).
	reading atomic.Int32
	// readWithin is ReadWithin, shorter in tests.
	readWithin time.Duration
}

// Command is one /rdmabot line, split into words.
type Command struct {
	Verb string
	Args []string
	Line string
}

// cmdRe is anchored at the start of a line, so quoted ("> /rdmabot")
// and indented lines never trigger.
var cmdRe = regexp.MustCompile(`(?m)^/rdmabot[ \t]+(\S+)([^\n]*)$`)

// Parse finds the commands in a comment body, ignoring fenced code.
func Parse(body string) []Command {
	var kept []string
	fence := false
	for _, l := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = !fence
			continue
		}
		if !fence {
			kept = append(kept, l)
		}
	}
	var out []Command
	for _, m := range cmdRe.FindAllStringSubmatch(strings.Join(kept, "\n"), -1) {
		out = append(out, Command{Verb: m[1], Args: strings.Fields(m[2]), Line: strings.TrimSpace(m[0])})
	}
	return out
}

// event is a comment or an issue body, whichever carried the commands.
type event struct {
	key         string // dedup: the same comment by webhook and poll acts once
	issue       int
	commentID   int64
	user        string
	association string
	body        string
	url         string
}

// MaxPayload caps what the webhook reads of a delivery, all of it read
// before the signature can be checked. It acts only on an issue or a
// comment, whose text GitHub caps at 65536 characters: with the issue,
// repository and sender around it a real delivery is 10-30 KB, and
// under 1 MB with both texts at the cap and every character escaped
// (GitHub's own cap, 25 MB, let a forged delivery buy a 25 MB read).
const MaxPayload = 2 << 20

// MaxReading caps the deliveries read at once, so forged ones hold
// about MaxReading*MaxPayload (100 at once took serve to 4.1 GB).
// One over it is refused, unread: GitHub does not redeliver it, the
// poll (bot.github.poll_interval) finds its comment.
const MaxReading = 4

// ReadWithin is how long a delivery's body may take to arrive once its
// reading began: GitHub gives up on a delivery after 10 s, and one
// trickling a byte a second must not hold a MaxReading slot for the
// server's whole read timeout (four held every slot for a minute).
const ReadWithin = 10 * time.Second

// ServeHTTP is the webhook: it checks X-Hub-Signature-256 and handles
// issue_comment (created) and issues (opened) events. The body is read
// only with a signature to check, of an event it acts on, at most
// MaxPayload bytes of it and MaxReading deliveries at once.
func (g *Bot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(g.Secret) == 0 {
		http.Error(w, "webhook disabled: no secret configured", http.StatusForbidden)
		return
	}
	if r.Header.Get(github.SHA256SignatureHeader) == "" {
		http.Error(w, "no "+github.SHA256SignatureHeader, http.StatusUnauthorized)
		return
	}
	if t := github.WebHookType(r); t != "issue_comment" && t != "issues" {
		w.WriteHeader(http.StatusNoContent) // nothing to do, so nothing to read
		return
	}
	if r.ContentLength > MaxPayload {
		http.Error(w, fmt.Sprintf("payload over %d bytes", MaxPayload), http.StatusRequestEntityTooLarge)
		return
	}
	if g.reading.Add(1) > MaxReading {
		g.reading.Add(-1)
		w.Header().Set("Retry-After", "10")
		http.Error(w, "busy: too many deliveries at once", http.StatusServiceUnavailable)
		return
	}
	within := ReadWithin
	if g.readWithin > 0 {
		within = g.readWithin
	}
	// A server without deadlines (a test's recorder) reads as it can.
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(within))
	r.Body = http.MaxBytesReader(w, r.Body, MaxPayload)
	payload, err := github.ValidatePayload(r, g.Secret)
	g.reading.Add(-1)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		http.Error(w, fmt.Sprintf("payload over %d bytes", MaxPayload), http.StatusRequestEntityTooLarge)
		return
	}
	if err != nil {
		http.Error(w, "bad signature or payload: "+err.Error(), http.StatusUnauthorized)
		return
	}
	ev, err := github.ParseWebHook(github.WebHookType(r), payload)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var e *event
	switch ev := ev.(type) {
	case *github.IssueCommentEvent:
		if ev.GetAction() == "created" && g.ours(ev.GetRepo().GetFullName()) {
			c := ev.GetComment()
			e = &event{key: fmt.Sprintf("comment:%d", c.GetID()), issue: ev.GetIssue().GetNumber(), commentID: c.GetID(),
				user: c.GetUser().GetLogin(), association: c.GetAuthorAssociation(), body: c.GetBody(), url: c.GetHTMLURL()}
		}
	case *github.IssuesEvent:
		if ev.GetAction() == "opened" && g.ours(ev.GetRepo().GetFullName()) {
			is := ev.GetIssue()
			e = &event{key: fmt.Sprintf("issue:%d", is.GetID()), issue: is.GetNumber(), user: is.GetUser().GetLogin(),
				association: is.GetAuthorAssociation(), body: is.GetBody(), url: is.GetHTMLURL()}
		}
	}
	if e != nil {
		if err := g.handle(r.Context(), e); err != nil {
			g.Log.Warn("github command", "issue", e.issue, "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (g *Bot) ours(fullName string) bool {
	return strings.EqualFold(fullName, g.Owner+"/"+g.Repo)
}

// Poll reads the repository's comments updated since the last poll. The
// ETag makes an unchanged list cost a 304 and no rate limit.
func (g *Bot) Poll(ctx context.Context) error {
	etag, _ := g.Mem.State(ctx, "github:etag")
	since, _ := g.Mem.State(ctx, "github:since")
	u := fmt.Sprintf("repos/%s/%s/issues/comments?sort=updated&direction=asc&per_page=100", g.Owner, g.Repo)
	if since != "" {
		u += "&since=" + since
	}
	req, err := g.Client.NewRequest("GET", u, nil)
	if err != nil {
		return err
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	var comments []*github.IssueComment
	resp, err := g.Client.Do(ctx, req, &comments)
	if resp != nil && resp.StatusCode == http.StatusNotModified {
		return nil
	}
	if err != nil {
		return fmt.Errorf("github poll: %w", err)
	}
	last := since
	for _, c := range comments {
		n, err := issueNumber(c.GetIssueURL())
		if err != nil {
			g.Log.Warn("github poll: comment without issue", "comment", c.GetID(), "err", err)
			continue
		}
		e := &event{key: fmt.Sprintf("comment:%d", c.GetID()), issue: n, commentID: c.GetID(), user: c.GetUser().GetLogin(),
			association: c.GetAuthorAssociation(), body: c.GetBody(), url: c.GetHTMLURL()}
		if err := g.handle(ctx, e); err != nil {
			return err // the cursor stays: the comment is read again
		}
		if t := c.GetUpdatedAt().Time; !t.IsZero() {
			last = t.UTC().Format(time.RFC3339)
		}
	}
	if err := g.Mem.SetState(ctx, "github:since", last); err != nil {
		return err
	}
	return g.Mem.SetState(ctx, "github:etag", resp.Header.Get("ETag"))
}

func issueNumber(issueURL string) (int, error) {
	i := strings.LastIndexByte(issueURL, '/')
	return strconv.Atoi(issueURL[i+1:])
}

// handle acts on an event's commands and marks the event done only when
// all of them have run and been answered: an API error on the way (who
// may command, posting the answer) leaves it to the next delivery or
// poll. Each command runs once however often the event is handled (see
// runOnce), and each answer is posted once (see postOnce).
func (g *Bot) handle(ctx context.Context, e *event) error {
	cmds := Parse(e.body)
	if len(cmds) == 0 {
		return nil
	}
	if done, err := g.Mem.Seen(ctx, e.key); err != nil || done {
		return err
	}
	if ok, why, err := g.authorized(ctx, e.user, e.association); err != nil {
		return err
	} else if !ok {
		if err := g.postOnce(ctx, e.issue, quote(e, cmds[0].Line)+"Sorry @"+e.user+", "+why, "refused:"+e.key); err != nil {
			return err
		}
		_, err := g.Mem.FirstSeen(ctx, e.key)
		return err
	}
	o := flow.Origin{Kind: "github", Repo: g.Owner + "/" + g.Repo, Issue: e.issue, Comment: e.commentID, User: e.user}
	for i, c := range cmds {
		key := fmt.Sprintf("%s#%d", e.key, i)
		reply, label, err := g.runOnce(ctx, key, c, o)
		if err != nil {
			return err
		}
		if err := g.postOnce(ctx, e.issue, quote(e, c.Line)+reply, "cmd:"+key); err != nil {
			return err
		}
		if label != "" {
			g.label(ctx, e.issue, label)
		}
	}
	_, err := g.Mem.FirstSeen(ctx, e.key)
	return err
}

// runOnce runs command key once: a claim in Memory before it runs (so
// a webhook delivery and a poll never both run it), its answer kept in
// Memory after, for a retry to post. A claim without an answer is a run
// under way elsewhere, or one a crash cut short: an error, never a
// second run.
func (g *Bot) runOnce(ctx context.Context, key string, c Command, o flow.Origin) (reply, label string, err error) {
	state := "github:ran:" + key
	if v, err := g.Mem.State(ctx, state); err != nil {
		return "", "", err
	} else if v != "" {
		label, reply, _ = strings.Cut(v, "\n")
		return reply, label, nil
	}
	first, err := g.Mem.FirstSeen(ctx, "run:"+key)
	if err != nil {
		return "", "", err
	}
	if !first {
		return "", "", fmt.Errorf("github command %s was started but has no answer yet (running in another process, or cut short by a crash)", key)
	}
	reply, label = g.run(ctx, c, o)
	if err := g.Mem.SetState(ctx, state, label+"\n"+reply); err != nil {
		return "", "", fmt.Errorf("github command %s ran, but its answer was not kept: %w", key, err)
	}
	return reply, label, nil
}

func quote(e *event, line string) string {
	return fmt.Sprintf("> %s\n\n", line)
}

// command is what a /rdmabot line asks of the bot; false when it is
// none of the usage's.
func (g *Bot) command(c Command) (flow.Command, bool) {
	fc := flow.Command{Verb: c.Verb, Line: c.Line}
	if (c.Verb == flow.CommandTest || c.Verb == flow.CommandRetest) && len(c.Args) > 0 && c.Args[0] == flow.ProfileFstests {
		fc.Profiles, c.Args = []string{flow.ProfileFstests}, c.Args[1:]
	}
	switch {
	case c.Verb == flow.CommandTest && len(c.Args) == 1:
		fc.Link = c.Args[0]
	case c.Verb == flow.CommandTest && len(c.Args) == 2:
		fc.Tree, fc.Ref = c.Args[0], c.Args[1]
	case c.Verb == flow.CommandBisect && len(c.Args) == 2:
		fc.Tree, fc.Good, fc.Bad = g.Tree, c.Args[0], c.Args[1]
	case (c.Verb == flow.CommandRetest || c.Verb == flow.CommandCancel) && len(c.Args) == 0:
	default:
		return flow.Command{}, false
	}
	return fc, true
}

// run has the bot act on one command and says what happened.
func (g *Bot) run(ctx context.Context, c Command, o flow.Origin) (reply, label string) {
	fc, ok := g.command(c)
	if !ok {
		return "Unknown command. Usage:\n\n" + usage, ""
	}
	a, err := g.Cmds.Act(ctx, fc, nil, o)
	if err != nil {
		return "Could not do that: " + err.Error(), ""
	}
	switch a.What {
	case flow.ActedCanceled:
		return fmt.Sprintf("Canceled test %d.", a.ID), "rdmabot: canceled"
	case flow.ActedBisection:
		return fmt.Sprintf("Queued bisection %d: %s/bisect/%d\nI will post the result here.", a.ID, g.URL, a.ID), outbox.QueuedLabel
	}
	return fmt.Sprintf("Queued test %d: %s/tests/%d\nI will post the result here.", a.ID, g.URL, a.ID), outbox.QueuedLabel
}

const usage = "```\n/rdmabot test [fstests] <lore URL or Message-ID>\n/rdmabot test [fstests] <tree> <ref>\n/rdmabot bisect <good> <bad>\n/rdmabot retest [fstests]\n/rdmabot cancel\n```\n`fstests` adds the fstests profile's larger group over NFS/RDMA."

// authorized climbs the ladder: allowlist, the author association GitHub
// reports, org membership, collaborator; the refusal says why.
func (g *Bot) authorized(ctx context.Context, user, association string) (bool, string, error) {
	for _, a := range g.Allow {
		if strings.EqualFold(a, user) {
			return true, "", nil
		}
	}
	switch association {
	case "OWNER", "MEMBER", "COLLABORATOR":
		return true, "", nil
	}
	if g.Org != "" {
		ok, _, err := g.Client.Organizations.IsMember(ctx, g.Org, user)
		if err != nil {
			return false, "", fmt.Errorf("github: is %s a member of %s: %w", user, g.Org, err)
		}
		if ok {
			return true, "", nil
		}
	}
	ok, _, err := g.Client.Repositories.IsCollaborator(ctx, g.Owner, g.Repo, user)
	if err != nil {
		return false, "", fmt.Errorf("github: is %s a collaborator: %w", user, err)
	}
	if ok {
		return true, "", nil
	}
	why := "you may not run rdmabot commands: you are not in its allowlist"
	if g.Org != "" {
		why += ", not a member of " + g.Org
	}
	return false, why + ", and not a collaborator of " + g.Owner + "/" + g.Repo + ".", nil
}

// poster posts and labels on the repository's issues as the outbox
// does its replies: one implementation of the marker and the labels.
func (g *Bot) poster() *outbox.GitHub { return outbox.NewGitHub(g.Client, g.Log) }

// label replaces the bot's previous label.
func (g *Bot) label(ctx context.Context, issue int, label string) {
	g.poster().Label(ctx, g.Owner, g.Repo, issue, label)
}

// postOnce comments body on the issue unless a comment there already
// carries key's hidden marker, which the comment gets.
func (g *Bot) postOnce(ctx context.Context, issue int, body, key string) error {
	return g.poster().PostOnce(ctx, g.Owner, g.Repo, issue, body, key)
}
