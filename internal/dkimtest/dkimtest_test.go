package dkimtest

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"
)

// A signed mail verifies against the published key, fetched both from
// the in-process resolver and from the DNS server on 127.0.0.1; an
// altered body does not, and an unpublished name is NXDOMAIN.
func TestSignPublishServe(t *testing.T) {
	k := NewKey(t, "example.org", "s1")
	raw := k.Sign(t, []byte("From: Ann <ann@example.org>\r\nTo: l@x\r\nSubject: hi\r\nMessage-ID: <a@x>\r\n\r\n#rdmabot retest\r\n"))
	addr := StartDNS(t, map[string]string{k.Name(): k.Record()})
	dnsResolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", addr)
	}}
	for name, lookup := range map[string]func(context.Context, string) ([]string, error){
		"resolver": Publish(k).LookupTXT, "dns": dnsResolver.LookupTXT,
	} {
		opts := &dkim.VerifyOptions{LookupTXT: func(domain string) ([]string, error) { return lookup(context.Background(), domain) }}
		vs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), opts)
		if err != nil || len(vs) != 1 || vs[0].Err != nil || vs[0].Domain != "example.org" {
			t.Errorf("%s: %+v %v", name, vs, err)
		}
		altered := bytes.Replace(raw, []byte("retest"), []byte("test"), 1)
		if vs, err := dkim.VerifyWithOptions(bytes.NewReader(altered), opts); err != nil || len(vs) != 1 || vs[0].Err == nil {
			t.Errorf("%s: an altered body verifies: %+v %v", name, vs, err)
		}
		if _, err := lookup(context.Background(), "s2._domainkey.example.org"); err == nil || !strings.Contains(err.Error(), "no such host") {
			t.Errorf("%s: an unpublished key: %v", name, err)
		}
	}
}
