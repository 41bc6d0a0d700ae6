package wire

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/bot"
)

// The kernels and the JSON API take the token; the pages do not; a
// listen address off loopback without a token is refused at start.
func TestTokenGuardsArtifactsAndAPI(t *testing.T) {
	mux := http.NewServeMux()
	for _, p := range []string{"/", "/api/tests", "/artifacts/x.tar"} {
		mux.HandleFunc("GET "+p, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	}
	srv := httptest.NewServer(requireToken(mux, "s3cret"))
	defer srv.Close()
	get := func(path, auth string) int {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, auth string
		want       int
	}{
		{"/", "", 200},
		{"/api/tests", "", 401},
		{"/api/tests", "Bearer wrong", 401},
		{"/api/tests", "Bearer s3cret", 200},
		{"/artifacts/x.tar", "", 401},
		{"/artifacts/x.tar", "Bearer s3cret", 200},
	} {
		if got := get(c.path, c.auth); got != c.want {
			t.Errorf("GET %s with %q: %d, want %d", c.path, c.auth, got, c.want)
		}
	}

	cfg := bot.DefaultConfig()
	cfg.Listen = "0.0.0.0:8480"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "token_file") {
		t.Errorf("listen on every address without a token: %v, want an error naming bot.token_file", err)
	}
	cfg.TokenFile = "/etc/rdmabot/token"
	if err := cfg.Validate(); err != nil {
		t.Errorf("with a token file: %v", err)
	}
	for _, l := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1"} {
		cfg := bot.DefaultConfig()
		cfg.Listen = l
		if err := cfg.Validate(); err != nil {
			t.Errorf("loopback %s refused: %v", l, err)
		}
	}

	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if _, err := readToken(empty); err == nil {
		t.Error("an empty token file accepted")
	}
	good := filepath.Join(dir, "token")
	os.WriteFile(good, []byte("s3cret\n"), 0o600)
	if tok, err := readToken(good); err != nil || tok != "s3cret" {
		t.Errorf("token %q, %v", tok, err)
	}
}
