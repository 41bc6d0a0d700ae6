package bot

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// A worker pulling a kernel from another sends the bot's token.
func TestBearerSendsTheToken(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	for _, tok := range []string{"s3cret", ""} {
		resp, err := (&http.Client{Transport: bearer{token: tok}}).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if len(got) != 2 || got[0] != "Bearer s3cret" || got[1] != "" {
		t.Errorf("Authorization headers %q, want the token, then none", got)
	}
}
