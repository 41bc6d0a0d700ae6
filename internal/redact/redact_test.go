package redact

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
)

func TestURLs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`lore.lists rdma: parse "imap://rdmabot:s3cret@lore.example:99x/org.kernel.vger.linux-rdma": invalid port ":99x" after host`,
			`lore.lists rdma: parse "imap://rdmabot:xxxxx@lore.example:99x/org.kernel.vger.linux-rdma": invalid port ":99x" after host`},
		{"imaps://u:p%40ss@h/g and https://tok3n@git.example/x.git", "imaps://u:xxxxx@h/g and https://xxxxx@git.example/x.git"},
		// A password with an unescaped "/" or "@": still hidden.
		{"imap://u:pa/ss@h/g", "imap://u:xxxxx@h/g"},
		{"imap://u:p@ss@h/g", "imap://u:xxxxx@h/g"},
		// No user part: a lore message URL, a plain URL, an address.
		{`GET "https://lore.kernel.org/linux-rdma/20240101.abc@oracle.com/raw": 404`, `GET "https://lore.kernel.org/linux-rdma/20240101.abc@oracle.com/raw": 404`},
		{"https://git.kernel.org/pub/scm/x.git; mail cel@kernel.org", "https://git.kernel.org/pub/scm/x.git; mail cel@kernel.org"},
		{"no url at all", "no url at all"},
		{"imap://", "imap://"},
	} {
		if got := URLs(tc.in); got != tc.want {
			t.Errorf("URLs(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
		if got := URLs(URLs(tc.in)); got != tc.want {
			t.Errorf("URLs twice (%q) = %q", tc.in, got)
		}
	}
}

// Every password url.Parse reads is hidden, as Redacted hides it.
func TestURLsAsRedacted(t *testing.T) {
	for _, raw := range []string{"imap://a:b@h/g", "https://user:p%2Fw@host:8443/path?q#f", "imaps://x:y@[::1]:993/g.0"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := URLs(u.String()), u.Redacted(); got != want {
			t.Errorf("%s: %q, Redacted %q", raw, got, want)
		}
	}
}

func TestError(t *testing.T) {
	inner := fmt.Errorf("fetch https://u:secret@host/x.git: %w", context.DeadlineExceeded)
	err := Error(inner)
	if err.Error() != "fetch https://u:xxxxx@host/x.git: context deadline exceeded" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v", err)
	}
	if plain := errors.New("no url"); Error(plain) != plain || Error(nil) != nil {
		t.Error("an error without a password changed")
	}
}
