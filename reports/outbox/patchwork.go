package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Check states patchwork knows.
const (
	CheckPending = "pending"
	CheckSuccess = "success"
	CheckWarning = "warning"
	CheckFail    = "fail"
)

// Check is one patchwork check, as its REST API takes it.
type Check struct {
	State       string `json:"state"`
	TargetURL   string `json:"target_url"`
	Context     string `json:"context"`
	Description string `json:"description"`
}

// checkRaw is what a patchwork ledger entry holds: the patch's
// Message-ID and the check to post on it.
type checkRaw struct {
	MsgID string `json:"msgid"`
	Check Check  `json:"check"`
}

// PatchworkChannel names a patch (by Message-ID, without angle brackets)
// as a check channel.
func PatchworkChannel(msgID string) string {
	return "patchwork:" + strings.Trim(strings.TrimSpace(msgID), "<>")
}

// Check phases: each patch of a series version gets at most one check of
// each, and the final one is posted only after the pending one.
const (
	PhasePending = "pending"
	PhaseFinal   = "final"
)

// FromCheck records one check on one patch. phase is PhasePending or
// PhaseFinal: the ledger key (the entry's Message-ID too) says which.
func FromCheck(patchMsgID, threadID string, version int, phase, author string, c Check) (Reply, error) {
	ch := PatchworkChannel(patchMsgID)
	key := Key(ch, threadID, version) + "|" + phase
	raw, err := json.Marshal(checkRaw{MsgID: strings.Trim(strings.TrimSpace(patchMsgID), "<>"), Check: c})
	if err != nil {
		return Reply{}, err
	}
	return Reply{MessageID: key, Key: key, Channel: ch, Outcome: c.State, Recipient: author, Raw: raw}, nil
}

// pendingOf is the ledger entry of the pending check a final check must
// follow ("" for any other entry).
func pendingOf(e *Entry) string {
	if channelKind(e.Channel) != "patchwork" {
		return ""
	}
	if k, ok := strings.CutSuffix(e.MessageID, "|"+PhaseFinal); ok {
		return k + "|" + PhasePending
	}
	return ""
}

// Patchwork posts checks through patchwork's REST API (v1.2 or later).
// It is idempotent: before posting it reads the patch's checks and posts
// nothing when ours is already there, so every failure may be retried.
type Patchwork struct {
	// URL is the instance, e.g. https://patchwork.kernel.org.
	URL   string
	Token string
	HTTP  *http.Client
}

type pwPatch struct {
	ID     int    `json:"id"`
	MsgID  string `json:"msgid"`
	Checks string `json:"checks"`
}

type pwCheck struct {
	State     string `json:"state"`
	TargetURL string `json:"target_url"`
	Context   string `json:"context"`
}

// ErrNoPatch says patchwork does not know the patch (not on a tracked
// list, or not parsed yet): the check is not posted.
var ErrNoPatch = errors.New("patchwork has no patch with this Message-ID")

// Send posts the entry's check on every patch patchwork has with its
// Message-ID (one per project the mail went to).
func (p *Patchwork) Send(ctx context.Context, e *Entry) error {
	var r checkRaw
	if err := json.Unmarshal(e.Raw, &r); err != nil || r.MsgID == "" {
		return &Rejected{Err: fmt.Errorf("patchwork: bad check entry: %v", err)}
	}
	base := strings.TrimRight(p.URL, "/")
	patches, err := getPages[pwPatch](ctx, p, base+"/api/patches/?msgid="+url.QueryEscape(r.MsgID))
	if err != nil {
		return err
	}
	if len(patches) == 0 {
		return &Rejected{Err: fmt.Errorf("%s: %w", r.MsgID, ErrNoPatch)}
	}
	body, err := json.Marshal(r.Check)
	if err != nil {
		return &Rejected{Err: err}
	}
	for _, pa := range patches {
		checks := pa.Checks
		if checks == "" {
			checks = fmt.Sprintf("%s/api/patches/%d/checks/", base, pa.ID)
		}
		have, err := getPages[pwCheck](ctx, p, checks)
		if err != nil {
			return err
		}
		if posted(have, r.Check) {
			continue
		}
		post := fmt.Sprintf("%s/api/patches/%d/checks/", base, pa.ID)
		if _, err := p.do(ctx, http.MethodPost, post, body, nil); err != nil {
			return err
		}
	}
	return nil
}

// maxPages bounds one listing: patchwork gives up to 250 a page, and a
// patch with more than 25,000 checks is a broken server, not a patch.
const maxPages = 100

// getPages reads a whole patchwork listing: its REST API pages lists and
// names the next page in a Link header (rel="next"). Our check may be
// on any page, behind other CIs' checks.
func getPages[T any](ctx context.Context, p *Patchwork, u string) ([]T, error) {
	var all []T
	for n := 0; u != ""; n++ {
		if n == maxPages {
			return nil, fmt.Errorf("patchwork GET %s: %w: more than %d pages", u, ErrNotDelivered, maxPages)
		}
		var page []T
		h, err := p.do(ctx, http.MethodGet, u, nil, &page)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		u = nextLink(h.Values("Link"))
	}
	return all, nil
}

// nextLink finds the rel="next" URL in Link headers
// (`<url>; rel="next", <url>; rel="prev"`), "" when there is none. The
// URL is read between its angle brackets: it may hold commas.
func nextLink(links []string) string {
	for _, l := range links {
		for {
			lt := strings.Index(l, "<")
			gt := strings.Index(l, ">")
			if lt < 0 || gt < lt {
				break
			}
			target, rest := l[lt+1:gt], l[gt+1:]
			params := rest
			if k := strings.Index(rest, "<"); k >= 0 {
				params = rest[:k]
			}
			for _, prm := range strings.Split(strings.TrimRight(strings.TrimSpace(params), ","), ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(prm), "=")
				if strings.EqualFold(k, "rel") && slices.Contains(strings.Fields(strings.ToLower(strings.Trim(v, `"`))), "next") {
					return target
				}
			}
			l = rest
		}
	}
	return ""
}

// posted says the patch has our check already. A pending check is
// superseded by any of ours for the same test page, so a late pending
// never hides the final state.
func posted(have []pwCheck, c Check) bool {
	for _, h := range have {
		if h.Context != c.Context || h.TargetURL != c.TargetURL {
			continue
		}
		if c.State == CheckPending || h.State == c.State {
			return true
		}
	}
	return false
}

// do makes one API request. A refusal (4xx) is final, anything else that
// fails may be retried: Send looks before it posts.
func (p *Patchwork) do(ctx context.Context, method, u string, body []byte, out any) (http.Header, error) {
	hc := p.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, &Rejected{Err: fmt.Errorf("patchwork: %w", err)}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.Token != "" {
		req.Header.Set("Authorization", "Token "+p.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("patchwork %s %s: %w: %w", method, u, ErrNotDelivered, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := fmt.Errorf("patchwork %s %s: %s: %s", method, u, resp.Status, firstLine(string(b)))
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return nil, &Rejected{Err: err}
		}
		return nil, fmt.Errorf("%w: %w", ErrNotDelivered, err)
	}
	if out == nil {
		return resp.Header, nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("patchwork %s %s: %w: %w", method, u, ErrNotDelivered, err)
	}
	return resp.Header, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
