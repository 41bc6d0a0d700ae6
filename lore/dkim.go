package lore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/rdmabot/rdmabot/flow"
)

// This file authenticates the sender of a mail command: anyone can write
// any From:, and a forged From: of a series' author once got a retest
// obeyed. DKIM is what the lists' mail carries to prove it.

// TXTResolver looks up DNS TXT records; *net.Resolver is one, a test
// gives its own.
type TXTResolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// DKIM authenticates a mail's From: address by its DKIM signatures.
type DKIM struct {
	// Resolver finds the signers' public keys.
	Resolver TXTResolver
	// Timeout bounds each key lookup (0: DefaultDKIMTimeout).
	Timeout time.Duration
}

// DefaultDKIMTimeout bounds one key lookup: a resolver that does not
// answer in that time is down, and the command waits for a later poll.
const DefaultDKIMTimeout = 10 * time.Second

// maxDKIMSignatures is how many signatures of one mail are checked:
// real mail has one to three (the sender's, its provider's, an ARC
// sealer's); a stranger's mail with a thousand would cost a thousand
// lookups.
const maxDKIMSignatures = 5

// NewDKIMResolver is the resolver lore.dkim_resolver names: the system's
// for "", else every query goes to that "host:port" DNS server.
func NewDKIMResolver(server string) *net.Resolver {
	if server == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
}

// UnverifiedError says a mail does not prove that it comes from the
// address its From: names: the mail's fault, answered with a refusal.
type UnverifiedError struct {
	// Addr is the From: address and Domain its domain.
	Addr, Domain string
	// Why says what the mail carries instead ("it carries none").
	Why string
}

func (e *UnverifiedError) Error() string {
	return fmt.Sprintf("no DKIM signature of %s verifies for %s (%s)", e.Domain, e.Addr, e.Why)
}

// KeyLookupError is a signer's key that could not be looked up (the
// resolver failed or timed out, DKIM's temperror): nobody's fault yet,
// so the mail is neither trusted nor refused, but looked at again later.
type KeyLookupError struct {
	Domain string
	Err    error
}

func (e *KeyLookupError) Error() string {
	return "the DKIM key of " + e.Domain + " could not be looked up: " + e.Err.Error()
}

func (e *KeyLookupError) Unwrap() error { return e.Err }

// lookupFailure is a lookup error go-msgauth must read as a temporary
// failure: it asks net.Error's Temporary, so every failure but "no such
// record" says true here.
type lookupFailure struct{ err error }

func (l lookupFailure) Error() string   { return l.err.Error() }
func (l lookupFailure) Timeout() bool   { return false }
func (l lookupFailure) Temporary() bool { return true }

// Authenticate returns nil when m carries a DKIM signature that verifies
// and whose signing domain (d=) aligns with m's From: domain: the same,
// or a parent of it (whoever publishes keys for the parent runs the
// child's DNS too). A sibling domain is not enough, unlike DMARC's
// organizational alignment: a list that signed everything it passed on
// with d=vger.kernel.org would otherwise vouch for any From: at
// kernel.org. Otherwise it returns *UnverifiedError, or *KeyLookupError
// when a signature of the aligned domain could not be checked because
// its key could not be looked up.
//
// A mail with more than one From: does not count: a signature covers the
// last one, the bot reads the first. Nor does a signature that covers
// only part of the body (l=): anything, a command too, can be appended
// after what it signed (go-msgauth fails those).
func (d *DKIM) Authenticate(ctx context.Context, m *flow.Message) error {
	addr := m.From.Email
	_, domain, _ := strings.Cut(addr, "@")
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	unverified := func(why string) error { return &UnverifiedError{Addr: addr, Domain: domain, Why: why} }
	if n := len(m.Header.Values("From")); n != 1 {
		return unverified(fmt.Sprintf("it has %d From: fields", n))
	}
	if domain == "" {
		return unverified("its From: has no domain")
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = DefaultDKIMTimeout
	}
	lookup := func(name string) ([]string, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		txts, err := d.Resolver.LookupTXT(ctx, name)
		var dnsErr *net.DNSError
		if err != nil && !(errors.As(err, &dnsErr) && dnsErr.IsNotFound) {
			return nil, lookupFailure{err}
		}
		return txts, err
	}
	raw := m.Raw
	if i := bytes.IndexByte(raw, '\n'); bytes.HasPrefix(raw, []byte("From ")) && i >= 0 {
		raw = raw[i+1:] // an mbox separator, as ParseMessage skips it
	}
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{LookupTXT: lookup, MaxVerifications: maxDKIMSignatures})
	if err != nil && !errors.Is(err, dkim.ErrTooManySignatures) {
		return unverified("its signatures cannot be read: " + dkimReason(err))
	}
	if len(verifs) == 0 {
		return unverified("it carries none")
	}
	var why []string
	var temp error
	for _, v := range verifs {
		signer := strings.ToLower(strings.TrimSuffix(v.Domain, "."))
		switch {
		case signer == "":
			why = append(why, "one that cannot be read: "+dkimReason(v.Err))
		case domain != signer && !strings.HasSuffix(domain, "."+signer):
			why = append(why, "one by "+signer)
		case v.Err == nil:
			return nil
		case dkim.IsTempFail(v.Err):
			temp = v.Err
		default:
			why = append(why, "one by "+signer+" that fails: "+dkimReason(v.Err))
		}
	}
	if temp != nil {
		return &KeyLookupError{Domain: domain, Err: temp}
	}
	return unverified("it carries " + strings.Join(why, "; "))
}

// dkimReason is go-msgauth's error without its package's prefix, for a
// sentence of the refusal.
func dkimReason(err error) string { return strings.TrimPrefix(err.Error(), "dkim: ") }
