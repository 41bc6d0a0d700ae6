package bot

import (
	"fmt"
	"strings"
	"testing"
)

// A listen address off loopback without a token is refused; with a
// token file, or on loopback, it is taken.
func TestListenOffLoopbackNeedsToken(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen = "0.0.0.0:8480"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "token_file") {
		t.Errorf("listen on every address without a token: %v, want an error naming bot.token_file", err)
	}
	cfg.TokenFile = "/etc/rdmabot/token"
	if err := cfg.Validate(); err != nil {
		t.Errorf("with a token file: %v", err)
	}
	for _, l := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1"} {
		cfg := DefaultConfig()
		cfg.Listen = l
		if err := cfg.Validate(); err != nil {
			t.Errorf("loopback %s refused: %v", l, err)
		}
	}
}

// bot.url must be a link others can follow: http(s) with a host.
func TestBotURLMustBeHTTP(t *testing.T) {
	for _, u := range []string{"not a url", "rdmabot.example.org", "ftp://rdmabot.example.org", "https://", ""} {
		cfg := DefaultConfig()
		cfg.URL = u
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("bot.url %q is not an http:// or https:// URL", u)) {
			t.Errorf("%q: %v", u, err)
		}
	}
}
