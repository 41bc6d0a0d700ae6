// Package dkimtest signs test mail with DKIM and publishes the keys: in
// memory (Resolver, for lore.DKIM) or from a real DNS server on
// 127.0.0.1 (StartDNS, for a serve run given lore.dkim_resolver).
package dkimtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/miekg/dns"
)

// Key is a domain's signing key under one selector.
type Key struct {
	Domain, Selector string
	key              *rsa.PrivateKey
}

// NewKey makes a 2048-bit RSA key for domain, the size most signers use.
func NewKey(t testing.TB, domain, selector string) *Key {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{Domain: domain, Selector: selector, key: k}
}

// Name is where the public key is published.
func (k *Key) Name() string { return k.Selector + "._domainkey." + k.Domain }

// Record is the TXT record that publishes the public key.
func (k *Key) Record() string {
	der, err := x509.MarshalPKIXPublicKey(&k.key.PublicKey)
	if err != nil {
		panic(err) // an RSA public key always marshals
	}
	return "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der)
}

// Sign returns raw with a DKIM-Signature of the key prepended, over the
// fields a mail provider signs (From, To, Subject, Date, Message-ID and
// the threading fields) and the whole body, relaxed as most do. The
// signature's line ends follow raw's.
func (k *Key) Sign(t testing.TB, raw []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	err := dkim.Sign(&out, bytes.NewReader(raw), &dkim.SignOptions{
		Domain: k.Domain, Selector: k.Selector, Signer: k.key,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed, BodyCanonicalization: dkim.CanonicalizationRelaxed,
		HeaderKeys: []string{"From", "To", "Subject", "Date", "Message-ID", "In-Reply-To", "References"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("\r\n")) {
		return bytes.ReplaceAll(out.Bytes(), []byte("\r\n"), []byte("\n"))
	}
	return out.Bytes()
}

// Resolver answers TXT lookups from Records; a name it lacks is "no such
// host", as a resolver says it. Err, when set, is every lookup's answer
// instead: a resolver that is down.
type Resolver struct {
	Records map[string]string
	Err     error
}

// Publish returns a Resolver that publishes the keys.
func Publish(keys ...*Key) *Resolver {
	r := &Resolver{Records: map[string]string{}}
	for _, k := range keys {
		r.Records[k.Name()] = k.Record()
	}
	return r
}

// LookupTXT is net.Resolver's.
func (r *Resolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	if r.Err != nil {
		return nil, r.Err
	}
	if v, ok := r.Records[strings.TrimSuffix(name, ".")]; ok {
		return []string{v}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// StartDNS runs a DNS server on 127.0.0.1 (UDP: a key's answer fits in
// 512 bytes, so a resolver never needs TCP) that answers TXT queries
// from the records (name -> value) and NXDOMAIN for any other name,
// until the test ends. It returns its host:port.
func StartDNS(t testing.TB, records map[string]string) string {
	t.Helper()
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		resp := new(dns.Msg)
		resp.SetReply(req)
		resp.Authoritative = true
		for _, q := range req.Question {
			v, ok := records[strings.TrimSuffix(q.Name, ".")]
			if !ok {
				resp.Rcode = dns.RcodeNameError
				continue
			}
			if q.Qtype != dns.TypeTXT {
				continue
			}
			resp.Answer = append(resp.Answer, &dns.TXT{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
				Txt: chunks(v, 255), // one record of 255-byte strings, as RFC 7208 3.3 publishes long ones
			})
		}
		w.WriteMsg(resp)
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	s := &dns.Server{PacketConn: pc, Handler: handler, NotifyStartedFunc: func() { close(started) }}
	go s.ActivateAndServe()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the DNS server did not start")
	}
	t.Cleanup(func() { s.Shutdown() })
	return pc.LocalAddr().String()
}

func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}
