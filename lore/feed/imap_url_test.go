package feed

import (
	"strings"
	"testing"
)

func TestParseIMAPURLErrors(t *testing.T) {
	for _, u := range []string{"http://x/y", "imap://", "imap://host/", "imap://[::1/x", "imaps:///group"} {
		if s, err := ParseIMAPURL(u, "l", nil); err == nil {
			t.Errorf("%q: %+v", u, s)
		}
	}
	s, err := ParseIMAPURL("imaps://u:p@lore.example/org.kernel.vger.linux-rdma.3", "l", nil)
	if err != nil || s.Addr != "lore.example:993" || !s.TLS || s.Newsgroup != "org.kernel.vger.linux-rdma" || s.User != "u" || s.Password != "p" || s.List != "l" {
		t.Errorf("%+v %v", s, err)
	}
	// A typo anywhere shows the URL without its password.
	for _, u := range []string{"imap://rdmabot:s3cret@lore.example:99x/org.kernel.vger.linux-rdma", "imap://rdmabot:s3cret@/",
		"imap://rdmabot:s3%zzcret@lore.example/g", "imap://rdmabot:s3/cret@lore.example/g", "imap://rdmabot:s3cret@lore.example%/g"} {
		if _, err := ParseIMAPURL(u, "l", nil); err == nil || strings.Contains(err.Error(), "s3") || !strings.Contains(err.Error(), "rdmabot") {
			t.Errorf("%q: %v", u, err)
		}
	}
	if !IsIMAPURL("imap://h/g") || IsIMAPURL("https://lore.kernel.org/linux-rdma") {
		t.Error("IsIMAPURL")
	}
}
