package feed

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Lore's bot wall (Anubis) cannot be reproduced with public-inbox, so
// this one answer comes from a test server: a 200 text/html challenge
// page where a gzip mbox was asked for.
func TestFetchThreadBotWall(t *testing.T) {
	var gotUA, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUA, gotPath = r.UserAgent(), r.URL.EscapedPath()
		switch {
		case strings.Contains(r.URL.Path, "wall"):
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte("<html><title>Making sure you're not a bot!</title></html>"))
		case strings.Contains(r.URL.Path, "slow"):
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("not gzip"))
		}
	}))
	defer srv.Close()
	hc := &HTTPClient{Timeout: 500 * time.Millisecond}
	_, err := hc.FetchThread(context.Background(), srv.URL+"/linux-rdma", "linux-rdma", "<wall/1@example.org>")
	if !errors.Is(err, ErrBotWall) {
		t.Fatalf("got %v, want ErrBotWall", err)
	}
	if gotUA != DefaultUserAgent || gotPath != "/linux-rdma/wall%2F1@example.org/t.mbox.gz" {
		t.Fatalf("sent UA %q path %q", gotUA, gotPath)
	}
	_, err = hc.FetchThread(context.Background(), srv.URL+"/linux-rdma", "linux-rdma", "x@example.org")
	var he *HTTPError
	if !errors.As(err, &he) || he.ContentType != "text/plain" {
		t.Fatalf("wrong content type: %v", err)
	}
	_, err = hc.FetchThread(context.Background(), srv.URL+"/linux-rdma", "linux-rdma", "slow@example.org")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout: %v", err)
	}
	if _, err := hc.FetchThread(context.Background(), srv.URL, "l", "<>"); err == nil {
		t.Fatal("empty Message-ID accepted")
	}
}
