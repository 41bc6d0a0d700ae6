package feed

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DefaultUserAgent says who is asking: lore's bot wall lets honest
// non-browser agents through, and the admins can tell whom to contact.
const DefaultUserAgent = "rdmabot/1 (kernel patch test bot for RDMA and NFS-over-RDMA; +https://github.com/rdmabot/rdmabot)"

// ErrBotWall means the server answered with an HTML page where mail or
// data was asked for: lore's proof-of-work wall (Anubis), or a login or
// error page. It is the infrastructure's problem; back off and retry.
var ErrBotWall = errors.New("server answered with an HTML page (bot-wall challenge?), not mail")

// HTTPError is an unexpected HTTP answer.
type HTTPError struct {
	URL         string
	Status      int
	ContentType string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("GET %s: status %d, content type %q", e.URL, e.Status, e.ContentType)
}

// HTTPClient fetches from lore or any public-inbox server. The zero value
// is usable: DefaultUserAgent, a 60 s timeout per request, 256 MiB cap.
type HTTPClient struct {
	// Client is the transport; nil means http.DefaultClient.
	Client *http.Client
	// UserAgent replaces DefaultUserAgent.
	UserAgent string
	// Timeout bounds each request, body included.
	Timeout time.Duration
	// MaxBytes caps a (decompressed) answer.
	MaxBytes int64
}

// get fetches u and checks that the answer has one of the media types.
func (h *HTTPClient) get(ctx context.Context, u string, types ...string) ([]byte, error) {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	ua := h.UserAgent
	if ua == "" {
		ua = DefaultUserAgent
	}
	req.Header.Set("User-Agent", ua)
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if resp.StatusCode != http.StatusOK {
		return nil, &HTTPError{URL: u, Status: resp.StatusCode, ContentType: ct}
	}
	if mt == "text/html" {
		return nil, fmt.Errorf("GET %s: %w", u, ErrBotWall)
	}
	ok := false
	for _, t := range types {
		ok = ok || mt == t
	}
	if !ok {
		return nil, &HTTPError{URL: u, Status: resp.StatusCode, ContentType: ct}
	}
	limit := h.maxBytes()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("GET %s: answer over %d bytes", u, limit)
	}
	return b, nil
}

func (h *HTTPClient) maxBytes() int64 {
	if h.MaxBytes > 0 {
		return h.MaxBytes
	}
	return 256 << 20
}

func (h *HTTPClient) gunzip(u string, b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	limit := h.maxBytes()
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("GET %s: answer over %d bytes uncompressed", u, limit)
	}
	return out, nil
}

var gzipTypes = []string{"application/gzip", "application/x-gzip"}

var manifestEpochRe = regexp.MustCompile(`/git/([0-9]+)\.git$`)

// Epochs reads <inboxURL>/manifest.js.gz and returns the inbox's epoch
// numbers in ascending order.
func (h *HTTPClient) Epochs(ctx context.Context, inboxURL string) ([]int, error) {
	u := strings.TrimSuffix(inboxURL, "/") + "/manifest.js.gz"
	b, err := h.get(ctx, u, append(gzipTypes, "application/json")...)
	if err != nil {
		return nil, err
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		if b, err = h.gunzip(u, b); err != nil {
			return nil, err
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", u, err)
	}
	var out []int
	for k := range m {
		if sm := manifestEpochRe.FindStringSubmatch(k); sm != nil {
			n, err := strconv.Atoi(sm[1])
			if err == nil {
				out = append(out, n)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("manifest %s lists no epochs", u)
	}
	sort.Ints(out)
	return out, nil
}

// FetchThread downloads the whole thread containing msgID from a
// public-inbox inbox (<inboxURL>/<msgID>/t.mbox.gz), for a manual
// trigger. The items carry list and Pos (the URL and the message's index)
// but no checkpoint, and a zero Received: the mbox does not say when the
// archive got each message.
func (h *HTTPClient) FetchThread(ctx context.Context, inboxURL, list, msgID string) ([]Item, error) {
	id := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(msgID), "<"), ">")
	if id == "" {
		return nil, errors.New("fetch thread: empty Message-ID")
	}
	u := strings.TrimSuffix(inboxURL, "/") + "/" + url.PathEscape(id) + "/t.mbox.gz"
	b, err := h.get(ctx, u, gzipTypes...)
	if err != nil {
		return nil, err
	}
	if b, err = h.gunzip(u, b); err != nil {
		return nil, err
	}
	var items []Item
	err = splitMbox(bytes.NewReader(b), 0, func(_, _ int64, _, raw []byte) error {
		items = append(items, Item{List: list, Raw: raw, Pos: fmt.Sprintf("%s#%d", u, len(items)+1)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return items, nil
}
