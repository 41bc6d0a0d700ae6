package ghbot

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Connections that trickle a delivery's body hold a reading slot only
// ReadWithin: past it they are dropped, and a genuine delivery is read
// again while they keep trickling.
func TestWebhookDropsTricklers(t *testing.T) {
	g, _, _ := setup(t)
	g.readWithin = 500 * time.Millisecond
	srv := httptest.NewServer(g)
	defer srv.Close()
	stop := make(chan struct{})
	defer close(stop)
	header := "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: issue_comment\r\n" +
		"X-Hub-Signature-256: sha256=" + strings.Repeat("0", 64) + "\r\nContent-Length: 100000\r\n\r\n"
	for range MaxReading {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(header)); err != nil {
			t.Fatal(err)
		}
		go func() { // a byte every 100 ms, until the server hangs up
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
	}
	post := func() int {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"action":"created"}`))
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	time.Sleep(200 * time.Millisecond) // the tricklers hold every slot
	if code := post(); code != http.StatusServiceUnavailable {
		t.Errorf("a delivery while %d trickle: %d, want 503", MaxReading, code)
	}
	time.Sleep(time.Second) // past their deadline
	// Read, and refused for its forged signature: not for want of a slot.
	if code := post(); code != http.StatusUnauthorized {
		t.Errorf("a delivery after the tricklers' deadline: %d, want 401", code)
	}
}
