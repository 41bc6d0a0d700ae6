package feed

import "testing"

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
	if !IsIMAPURL("imap://h/g") || IsIMAPURL("https://lore.kernel.org/linux-rdma") {
		t.Error("IsIMAPURL")
	}
}
