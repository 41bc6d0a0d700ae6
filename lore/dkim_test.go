package lore

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/dkimtest"
)

// A command's mail is authenticated by a DKIM signature that verifies
// and whose d= is the From: domain or a parent of it; anything else says
// why not, and a key that cannot be looked up is a *KeyLookupError (for
// a later try), never a refusal.
func TestDKIMAuthenticate(t *testing.T) {
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	alice := dkimtest.NewKey(t, "example.org", "s1")
	evil := dkimtest.NewKey(t, "evil.org", "s1")
	child := dkimtest.NewKey(t, "mail.example.org", "s2")
	resolver := dkimtest.Publish(alice, evil, child)
	unpublished := dkimtest.NewKey(t, "example.org", "gone")
	reply := func(from string) []byte {
		return tmail{id: "r@example.org", from: from, subject: "Re: [PATCH] x", irt: "p", refs: "<p>", body: "#rdmabot retest\n", date: t0}.raw()
	}
	down := &dkimtest.Resolver{Err: &net.DNSError{Err: "server misbehaving", Name: "s1._domainkey.example.org", IsTemporary: true}}
	tests := []struct {
		name     string
		raw      []byte
		resolver TXTResolver
		want     string // "" authenticated, "lookup: ..." a KeyLookupError, else the UnverifiedError's Why
	}{
		{"signed by the From: domain", alice.Sign(t, reply("Alice <alice@example.org>")), resolver, ""},
		{"From: address upper case", alice.Sign(t, reply("Alice <Alice@EXAMPLE.org>")), resolver, ""},
		{"signed by a parent domain", alice.Sign(t, reply("Alice <alice@lab.example.org>")), resolver, ""},
		{"CRLF line ends", alice.Sign(t, bytes.ReplaceAll(reply("Alice <alice@example.org>"), []byte("\n"), []byte("\r\n"))), resolver, ""},
		{"an mbox From line before it", append([]byte("From mboxrd@z Thu Jan  1 00:00:00 1970\n"), alice.Sign(t, reply("Alice <alice@example.org>"))...), resolver, ""},
		{"a list header added above the signature", append([]byte("List-Id: <linux-rdma.vger.kernel.org>\n"), alice.Sign(t, reply("Alice <alice@example.org>"))...), resolver, ""},
		{"an aligned one among others", evil.Sign(t, alice.Sign(t, reply("Alice <alice@example.org>"))), resolver, ""},
		{"no signature", reply("Alice <alice@example.org>"), resolver, "it carries none"},
		{"body altered on the way", bytes.Replace(alice.Sign(t, reply("Alice <alice@example.org>")), []byte("retest"), []byte("test"), 1), resolver,
			"it carries one by example.org that fails: body hash did not verify"},
		{"a signed field altered", bytes.Replace(alice.Sign(t, reply("Alice <alice@example.org>")), []byte("Subject: Re:"), []byte("Subject: RE:"), 1), resolver,
			"it carries one by example.org that fails: signature did not verify: crypto/rsa: verification error"},
		{"signed by another domain", evil.Sign(t, reply("Alice <alice@example.org>")), resolver, "it carries one by evil.org"},
		{"signed by a child domain", child.Sign(t, reply("Alice <alice@example.org>")), resolver, "it carries one by mail.example.org"},
		{"a suffix that is not a parent", evil.Sign(t, reply("Alice <alice@notevil.org>")), resolver, "it carries one by evil.org"},
		{"key not published", unpublished.Sign(t, reply("Alice <alice@example.org>")), resolver,
			"it carries one by example.org that fails: no key for signature: lookup gone._domainkey.example.org: no such host"},
		{"a second From: above the signed one", append([]byte("From: Alice <alice@example.org>\n"), evil.Sign(t, reply("Eve <eve@evil.org>"))...), resolver,
			"it has 2 From: fields"},
		{"no From:, a Sender:", alice.Sign(t, bytes.Replace(reply("x"), []byte("From: x\n"), []byte("Sender: Alice <alice@example.org>\n"), 1)), resolver,
			"it has 0 From: fields"},
		{"a From: without a domain", alice.Sign(t, reply("alice")), resolver, "its From: has no domain"},
		{"a signature without d=", bytes.Replace(alice.Sign(t, reply("Alice <alice@example.org>")), []byte(" d=example.org;"), nil, 1), resolver,
			"it carries one that cannot be read: signature missing required tag"},
		{"a header that does not end", []byte("From: Alice <alice@example.org>\nDKIM-Signature: v=1\n"), resolver,
			"its signatures cannot be read: failed to read header: EOF"},
		{"the resolver is down", alice.Sign(t, reply("Alice <alice@example.org>")), down,
			"lookup: the DKIM key of example.org could not be looked up: dkim: key unavailable: lookup s1._domainkey.example.org: server misbehaving"},
		{"the resolver is down for another domain only", evil.Sign(t, reply("Alice <alice@example.org>")), down, "it carries one by evil.org"},
	}
	// Five signatures are read, the sender's is the sixth: a stranger's
	// thousand would cost a thousand lookups.
	many := alice.Sign(t, reply("Alice <alice@example.org>"))
	for range 5 {
		many = evil.Sign(t, many)
	}
	tests = append(tests, struct {
		name     string
		raw      []byte
		resolver TXTResolver
		want     string
	}{"the sixth signature", many, resolver, "it carries one by evil.org; one by evil.org; one by evil.org; one by evil.org; one by evil.org"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMessage(tt.raw)
			if err != nil {
				t.Fatal(err)
			}
			err = (&DKIM{Resolver: tt.resolver}).Authenticate(context.Background(), m)
			var u *UnverifiedError
			var k *KeyLookupError
			got := ""
			switch {
			case errors.As(err, &u):
				got = u.Why
				if !strings.EqualFold(u.Addr, m.From.Email) || !strings.Contains(strings.ToLower(u.Addr), "@"+u.Domain) && u.Domain != "" {
					t.Errorf("address %q, domain %q", u.Addr, u.Domain)
				}
			case errors.As(err, &k):
				got = "lookup: " + k.Error()
			case err != nil:
				t.Fatalf("untyped error %v", err)
			}
			if got != tt.want {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// Each key lookup ends after Timeout: a resolver that never answers
// makes the command wait for a later poll, not the poll hang.
func TestDKIMLookupTimeout(t *testing.T) {
	alice := dkimtest.NewKey(t, "example.org", "s1")
	m, err := ParseMessage(alice.Sign(t, tmail{id: "r", from: "alice@example.org", subject: "Re: x", body: "#rdmabot test\n"}.raw()))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = (&DKIM{Resolver: hanging{}, Timeout: 100 * time.Millisecond}).Authenticate(context.Background(), m)
	var k *KeyLookupError
	if !errors.As(err, &k) || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("%v, want a KeyLookupError for the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

// hanging is a resolver that answers only when the context ends.
type hanging struct{}

func (hanging) LookupTXT(ctx context.Context, name string) ([]string, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// The assembler hands each command its mail, and NewDKIMResolver asks
// the DNS server lore.dkim_resolver names: a signed command is
// authenticated through a real DNS server on 127.0.0.1, one whose key
// is not there is not, and a server that does not answer is a lookup
// failure.
func TestDKIMCommandThroughDNSServer(t *testing.T) {
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	alice := dkimtest.NewKey(t, "example.org", "s1")
	dns := dkimtest.StartDNS(t, map[string]string{alice.Name(): alice.Record()})
	other := dkimtest.NewKey(t, "example.org", "s2")
	core := "net/sunrpc/xprtrdma/svc_rdma_rw.c"
	a := newTestAssembler(t)
	for _, raw := range [][]byte{
		tmail{id: "p", subject: "[PATCH] a", body: diffBody(core), date: t0}.raw(),
		alice.Sign(t, tmail{id: "good", from: "Alice <alice@example.org>", subject: "Re: [PATCH] a", irt: "p", refs: "<p>", body: "#rdmabot test\n", date: t0.Add(time.Hour)}.raw()),
		other.Sign(t, tmail{id: "other", from: "Alice <alice@example.org>", subject: "Re: [PATCH] a", irt: "p", refs: "<p>", body: "#rdmabot test\n", date: t0.Add(2 * time.Hour)}.raw()),
	} {
		m, err := ParseMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		a.Add(m, m.Date)
	}
	asm := a.Assemble()
	if len(asm.Commands) != 2 {
		t.Fatalf("%d commands", len(asm.Commands))
	}
	ctx := context.Background()
	d := &DKIM{Resolver: NewDKIMResolver(dns)}
	for _, c := range asm.Commands {
		if c.Mail == nil || c.Mail.MessageID != c.MessageID {
			t.Fatalf("command %s carries mail %v", c.MessageID, c.Mail)
		}
	}
	if err := d.Authenticate(ctx, asm.Commands[0].Mail); err != nil {
		t.Errorf("signed, key served: %v", err)
	}
	var u *UnverifiedError
	if err := d.Authenticate(ctx, asm.Commands[1].Mail); !errors.As(err, &u) || !strings.Contains(u.Why, "no key for signature") {
		t.Errorf("key not served: %v", err)
	}
	// A port nobody answers on: every query times out or is refused.
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := l.LocalAddr().String()
	defer l.Close()
	var k *KeyLookupError
	d = &DKIM{Resolver: NewDKIMResolver(silent), Timeout: 300 * time.Millisecond}
	if err := d.Authenticate(ctx, asm.Commands[0].Mail); !errors.As(err, &k) {
		t.Errorf("a server that does not answer: %v, want a KeyLookupError", err)
	}
	if NewDKIMResolver("") != net.DefaultResolver {
		t.Errorf("lore.dkim_resolver \"\" is not the system's resolver")
	}
}

// lore.dkim_resolver is "" or host:port; lore.command_dkim is on unless
// turned off.
func TestDKIMConfig(t *testing.T) {
	c := DefaultConfig()
	if !c.CommandDKIM || c.DKIMResolver != "" {
		t.Errorf("default command_dkim %v, dkim_resolver %q", c.CommandDKIM, c.DKIMResolver)
	}
	for _, r := range []string{"127.0.0.1", "dns.example.org", "[::1]"} {
		c.DKIMResolver = r
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "lore.dkim_resolver: ") {
			t.Errorf("%q: %v", r, err)
		}
	}
	for _, r := range []string{"127.0.0.1:53", "[::1]:5353", "dns.example.org:53"} {
		c.DKIMResolver = r
		if err := c.Validate(); err != nil {
			t.Errorf("%q: %v", r, err)
		}
	}
}
