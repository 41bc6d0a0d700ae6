package dashboard

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A test's consoles go to a reader who takes gzip as they are kept, each
// stored gzip stream sent as it is (the bot inflates nothing), and read
// as one text; a reader who takes none gets the same text inflated, one
// such request at a time, and one given up while another is served
// gets nothing.
func TestTestConsolesSentAsKept(t *testing.T) {
	ctx := context.Background()
	st, ids := seed(t)
	srv := server(t, st)
	path := fmt.Sprintf("%s/tests/%d/consoles", srv.URL, ids["measured"])
	get := func(encoding string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", path, nil)
		req.Header.Set("Accept-Encoding", encoding)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %s", encoding, resp.Status)
		}
		return resp, body
	}
	resp, raw := get("br, gzip;q=0.5")
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	runs, err := st.Runs(ctx, st.DB, ids["measured"])
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range runs {
		for _, id := range run.Samples[0].Consoles {
			gz, err := st.ConsoleGzip(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(raw, gz) {
				t.Errorf("console %s was not sent as kept", id)
			}
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, encoding := range []string{"identity", "gzip;q=0", "gzip;q=x"} {
		if _, plain := get(encoding); string(plain) != string(text) {
			t.Errorf("%s:\n%s\nwant as gzip:\n%s", encoding, plain, text)
		}
	}
	if !strings.HasPrefix(string(text), fmt.Sprintf("Test %d: the guests' whole serial consoles, 4 of them", ids["measured"])) ||
		strings.Count(string(text), "=====\n") != 4 || !strings.Contains(string(text), "Linux version 6.12 (candidate client)\n") {
		t.Errorf("consoles:\n%s", text)
	}
	// A plain request while another is inflating: it waits, and a
	// reader that gives up gets nothing.
	var d *Server
	srv = serverWith(t, st, fakeJobs{}, func(s *Server) { d = s })
	d.inflating <- struct{}{}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(cctx, "GET", fmt.Sprintf("%s/tests/%d/consoles", srv.URL, ids["measured"]), nil)
	req.Header.Set("Accept-Encoding", "identity")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(body) != 0 {
			t.Errorf("a request past the one inflating got %q", body)
		}
	}
	<-d.inflating
}
