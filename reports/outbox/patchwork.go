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

// FromCheck records one check on one patch. phase is "pending" or
// "final": each patch of a series version gets at most one of each, and
// the ledger key (the entry's Message-ID too) says which.
func FromCheck(patchMsgID, threadID string, version int, phase, author string, c Check) (Reply, error) {
	ch := PatchworkChannel(patchMsgID)
	key := Key(ch, threadID, version) + "|" + phase
	raw, err := json.Marshal(checkRaw{MsgID: strings.Trim(strings.TrimSpace(patchMsgID), "<>"), Check: c})
	if err != nil {
		return Reply{}, err
	}
	return Reply{MessageID: key, Key: key, Channel: ch, Outcome: c.State, Recipient: author, Raw: raw}, nil
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
	var patches []pwPatch
	if err := p.do(ctx, http.MethodGet, base+"/api/patches/?msgid="+url.QueryEscape(r.MsgID), nil, &patches); err != nil {
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
		var have []pwCheck
		if err := p.do(ctx, http.MethodGet, checks, nil, &have); err != nil {
			return err
		}
		if posted(have, r.Check) {
			continue
		}
		post := fmt.Sprintf("%s/api/patches/%d/checks/", base, pa.ID)
		if err := p.do(ctx, http.MethodPost, post, body, nil); err != nil {
			return err
		}
	}
	return nil
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
func (p *Patchwork) do(ctx context.Context, method, u string, body []byte, out any) error {
	hc := p.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return &Rejected{Err: fmt.Errorf("patchwork: %w", err)}
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
		return fmt.Errorf("patchwork %s %s: %w: %w", method, u, ErrNotDelivered, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := fmt.Errorf("patchwork %s %s: %s: %s", method, u, resp.Status, firstLine(string(b)))
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return &Rejected{Err: err}
		}
		return fmt.Errorf("%w: %w", ErrNotDelivered, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("patchwork %s %s: %w: %w", method, u, ErrNotDelivered, err)
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
