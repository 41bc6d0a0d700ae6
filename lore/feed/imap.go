package feed

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/rdmabot/rdmabot/internal/redact"
)

// IMAPSlice is how many UIDs one public-inbox-imapd mailbox holds:
// <newsgroup>.K has UIDs K*50000+1 to (K+1)*50000.
const IMAPSlice = 50000

// IMAP reads a list from public-inbox-imapd (or any server laid out the
// same way): the newsgroup's mail is split over the mailboxes
// <Newsgroup>.0, <Newsgroup>.1, ...; UIDs are the archive's article
// numbers, in arrival order. The checkpoint keeps the slice, its
// UIDVALIDITY and the last UID delivered. Without a checkpoint Read starts
// at the first message of the newest slice.
//
// If the server's UIDVALIDITY changes, the archive was renumbered (rebuilt
// from scratch): the slice is read again from its start and a warning is
// logged; the consumer's Message-ID deduplication absorbs the repeats.
// Removals are not seen over IMAP (public-inbox does not expunge).
type IMAP struct {
	// List names the list; it is copied into every Item.
	List string
	// Addr is host:port of the server.
	Addr string
	// TLS dials with TLS (imaps) instead of plain text.
	TLS bool
	// Newsgroup is the mailbox prefix (org.kernel.vger.linux-rdma).
	Newsgroup string
	// User and Password log in; empty means anonymous, which
	// public-inbox-imapd accepts.
	User, Password string
	// Timeout bounds one Read (dial, login, fetch); default 5 minutes.
	Timeout time.Duration
	// Log receives warnings; nil discards.
	Log *slog.Logger
}

// IsIMAPURL says whether a list URL names an IMAP server.
func IsIMAPURL(raw string) bool {
	return strings.HasPrefix(raw, "imap://") || strings.HasPrefix(raw, "imaps://")
}

// ParseIMAPURL reads imap[s]://[user:pass@]host[:port]/<newsgroup>, the
// form lore.lists and rdmabot lore scan take: a slice suffix (.0, .1) is
// dropped (the source follows the slices itself); the port defaults to
// 143 (imap) or 993 (imaps, TLS).
func ParseIMAPURL(raw, list string, log *slog.Logger) (*IMAP, error) {
	// Errors show the URL redacted: they reach the dashboard and logs.
	shown := redact.URLs(raw)
	u, err := url.Parse(raw)
	if err != nil {
		// url's error quotes raw, password and all: say what is wrong
		// with the redacted URL, or that the hidden part is.
		if _, err := url.Parse(shown); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%q: the user or password does not parse", shown)
	}
	if u.Scheme != "imap" && u.Scheme != "imaps" {
		return nil, fmt.Errorf("want imap://host:port/newsgroup, got %q", shown)
	}
	group := strings.Trim(u.Path, "/")
	if i := strings.LastIndexByte(group, '.'); i > 0 {
		if _, err := strconv.Atoi(group[i+1:]); err == nil {
			group = group[:i]
		}
	}
	if u.Host == "" || group == "" {
		return nil, fmt.Errorf("want imap://host:port/newsgroup, got %q", shown)
	}
	host := u.Host
	if u.Port() == "" {
		host += map[string]string{"imap": ":143", "imaps": ":993"}[u.Scheme]
	}
	src := &IMAP{List: list, Addr: host, TLS: u.Scheme == "imaps", Newsgroup: group, Log: log}
	if u.User != nil {
		src.User = u.User.Username()
		src.Password, _ = u.User.Password()
	}
	return src, nil
}

// Key implements Source.
func (s *IMAP) Key() string { return "imap " + s.Addr + " " + s.Newsgroup }

type imapCheckpoint struct {
	Slice    int
	Validity uint32
	UID      imap.UID
}

func (c imapCheckpoint) String() string {
	return fmt.Sprintf("imap1 %d %d %d", c.Slice, c.Validity, c.UID)
}

func parseIMAPCheckpoint(s string) (imapCheckpoint, error) {
	var c imapCheckpoint
	f := strings.Fields(s)
	if len(f) != 4 || f[0] != "imap1" {
		return c, fmt.Errorf("bad imap checkpoint %q", s)
	}
	slice, err1 := strconv.Atoi(f[1])
	v, err2 := strconv.ParseUint(f[2], 10, 32)
	uid, err3 := strconv.ParseUint(f[3], 10, 32)
	if err := errors.Join(err1, err2, err3); err != nil || slice < 0 {
		return c, fmt.Errorf("bad imap checkpoint %q", s)
	}
	return imapCheckpoint{slice, uint32(v), imap.UID(uid)}, nil
}

func (s *IMAP) mailbox(k int) string { return s.Newsgroup + "." + strconv.Itoa(k) }

func (s *IMAP) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// dial connects and logs in; the client is closed when ctx ends, which
// also unblocks any command waiting on a silent server.
func (s *IMAP) dial(ctx context.Context) (*imapclient.Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return nil, err
	}
	if s.TLS {
		host, _, _ := net.SplitHostPort(s.Addr)
		tc := tls.Client(conn, &tls.Config{ServerName: host})
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	c := imapclient.New(conn, nil)
	stop := context.AfterFunc(ctx, func() { c.Close() })
	go func() {
		<-c.Closed()
		stop()
	}()
	if err := c.WaitGreeting(); err != nil {
		c.Close()
		return nil, err
	}
	user, pass := s.User, s.Password
	if user == "" {
		user, pass = "anonymous", "rdmabot@localhost"
	}
	if err := c.Login(user, pass).Wait(); err != nil {
		c.Close()
		return nil, fmt.Errorf("login: %w", err)
	}
	return c, nil
}

// newestSlice returns the highest slice holding mail (0 if none does).
// public-inbox-imapd lists slice K+1 as soon as the highest UID is
// (K+1)*50000, before anything is in it, so the listing alone would skip
// the end of slice K.
func (s *IMAP) newestSlice(c *imapclient.Client) (int, error) {
	boxes, err := c.List("", s.Newsgroup+".%", nil).Collect()
	if err != nil {
		return 0, fmt.Errorf("list: %w", err)
	}
	var slices []int
	for _, b := range boxes {
		if k, err := strconv.Atoi(strings.TrimPrefix(b.Mailbox, s.Newsgroup+".")); err == nil && k >= 0 {
			slices = append(slices, k)
		}
	}
	if len(slices) == 0 {
		return 0, fmt.Errorf("no mailbox %s.N on the server", s.Newsgroup)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(slices)))
	for _, k := range slices {
		st, err := c.Status(s.mailbox(k), &imap.StatusOptions{NumMessages: true}).Wait()
		if err != nil {
			return 0, fmt.Errorf("status %s: %w", s.mailbox(k), err)
		}
		if st.NumMessages != nil && *st.NumMessages > 0 {
			return k, nil
		}
	}
	return slices[len(slices)-1], nil
}

// Read implements Source.
func (s *IMAP) Read(ctx context.Context, after string, yield func(Item) error) (string, error) {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var cp imapCheckpoint
	started := after != ""
	if started {
		var err error
		if cp, err = parseIMAPCheckpoint(after); err != nil {
			return "", err
		}
	}
	c, err := s.dial(ctx)
	if err != nil {
		return "", &SourceError{Source: s.Key(), Err: err}
	}
	defer c.Close()
	if !started {
		if cp.Slice, err = s.newestSlice(c); err != nil {
			return "", &SourceError{Source: s.Key(), Err: err}
		}
	}
	for {
		next, uidNext, err := s.readSlice(ctx, c, cp, yield)
		if err != nil {
			return "", err
		}
		cp = next
		// Mail goes on in the next slice once this one is full. UIDNEXT
		// is the archive's (public-inbox reports its highest number + 1
		// in every slice), so it also tells when the last UID of this
		// slice was removed and will never be read.
		end := imap.UID((cp.Slice + 1) * IMAPSlice)
		if cp.UID < end && uidNext <= end+1 {
			break
		}
		if _, err := c.Status(s.mailbox(cp.Slice+1), &imap.StatusOptions{UIDValidity: true}).Wait(); err != nil {
			break // not created yet
		}
		cp = imapCheckpoint{Slice: cp.Slice + 1}
	}
	if cp.Validity == 0 {
		return after, nil // nothing read at all
	}
	c.Logout().Wait()
	return cp.String(), nil
}

// readSlice delivers the slice's messages after cp.UID and returns the
// new checkpoint and the mailbox's UIDNEXT.
func (s *IMAP) readSlice(ctx context.Context, c *imapclient.Client, cp imapCheckpoint, yield func(Item) error) (imapCheckpoint, imap.UID, error) {
	box := s.mailbox(cp.Slice)
	sel, err := c.Select(box, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		return cp, 0, &SourceError{Source: s.Key(), Err: fmt.Errorf("select %s: %w", box, err)}
	}
	cp, err = s.fetchNew(c, box, sel, cp, yield)
	return cp, sel.UIDNext, err
}

func (s *IMAP) fetchNew(c *imapclient.Client, box string, sel *imap.SelectData, cp imapCheckpoint, yield func(Item) error) (imapCheckpoint, error) {
	if cp.Validity != 0 && cp.Validity != sel.UIDValidity {
		s.log().Warn("feed: IMAP UIDVALIDITY changed, the archive was renumbered; reading the slice again",
			"source", s.Key(), "mailbox", box, "old", cp.Validity, "new", sel.UIDValidity)
		cp.UID = 0
	}
	cp.Validity = sel.UIDValidity
	if sel.NumMessages == 0 || (sel.UIDNext != 0 && sel.UIDNext <= cp.UID+1) {
		return cp, nil
	}
	var want imap.UIDSet
	want.AddRange(cp.UID+1, 0) // n:* also matches the last message when n is past it
	found, err := c.UIDSearch(&imap.SearchCriteria{UID: []imap.UIDSet{want}}, nil).Wait()
	if err != nil {
		return cp, &SourceError{Source: s.Key(), Err: fmt.Errorf("search %s: %w", box, err)}
	}
	var uids []imap.UID
	for _, u := range found.AllUIDs() {
		if u > cp.UID {
			uids = append(uids, u)
		}
	}
	const batch = 256 // bounds memory: a batch is buffered whole
	for len(uids) > 0 {
		n := min(batch, len(uids))
		msgs, err := c.Fetch(imap.UIDSetNum(uids[:n]...), &imap.FetchOptions{
			UID:          true,
			InternalDate: true,
			BodySection:  []*imap.FetchItemBodySection{{Peek: true}},
		}).Collect()
		if err != nil {
			return cp, &SourceError{Source: s.Key(), Err: fmt.Errorf("fetch from %s: %w", box, err)}
		}
		byUID := make(map[imap.UID]*imapclient.FetchMessageBuffer, len(msgs))
		for _, m := range msgs {
			byUID[m.UID] = m
		}
		for _, uid := range uids[:n] {
			m := byUID[uid]
			next := imapCheckpoint{Slice: cp.Slice, Validity: cp.Validity, UID: uid}
			if m == nil || len(m.BodySection) == 0 {
				// Gone between SEARCH and FETCH: nothing to deliver.
				s.log().Warn("feed: IMAP message vanished before it was fetched", "source", s.Key(), "mailbox", box, "uid", uid)
				cp = next
				continue
			}
			err := yield(Item{
				List:       s.List,
				Raw:        m.BodySection[0].Bytes,
				Received:   m.InternalDate,
				Pos:        fmt.Sprintf("%s/%d", box, uid),
				Checkpoint: next.String(),
			})
			if err != nil {
				return cp, err
			}
			cp = next
		}
		uids = uids[n:]
	}
	return cp, nil
}
