// Package fakepatchwork is a patchwork REST server for tests: the
// patch list by msgid and check creation, as patchwork pages and
// answers them.
package fakepatchwork

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Server serves patchwork's REST payload shapes: the patch list
// filtered by msgid (a JSON list of patch objects) and check creation
// (201 with the check object), for the token it was given. Lists are
// paged as patchwork pages them: perPage items (its default 30), the
// next and previous pages in a Link header.
type Server struct {
	// URL is the server's root (patchwork's url setting).
	URL     string
	mu      sync.Mutex
	srv     *httptest.Server
	token   string
	patches map[string][]int // msgid (with <>) -> patch ids
	checks  map[int][]map[string]any
	fail5xx int // POSTs answered 502 before one is taken
	posts   int
	perPage int
	gets    int // list pages served
}

// New starts a server that takes checks posted with token, closed when
// the test ends.
func New(t testing.TB, token string) *Server {
	f := &Server{token: token, patches: map[string][]int{}, checks: map[int][]map[string]any{}, perPage: 30}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

// Client is an HTTP client for the server.
func (f *Server) Client() *http.Client { return f.srv.Client() }

// AddPatch lists patches ids under msgid (with or without <>): more
// than one when the mail was posted to several projects.
func (f *Server) AddPatch(msgid string, ids ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	msgid = "<" + strings.Trim(msgid, "<>") + ">"
	f.patches[msgid] = append(f.patches[msgid], ids...)
}

// Patches are the patch ids listed under msgid (with <>).
func (f *Server) Patches(msgid string) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.patches[msgid]...)
}

// AddCheck adds a check of someone's to patch n.
func (f *Server) AddCheck(n int, c map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks[n] = append(f.checks[n], c)
}

// Checks are patch n's checks, oldest first.
func (f *Server) Checks(n int) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.checks[n]...)
}

// FailPosts answers the next n check posts 502.
func (f *Server) FailPosts(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail5xx = n
}

// SetPerPage sets how many items a list page holds.
func (f *Server) SetPerPage(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.perPage = n
}

// Gets counts the list pages served.
func (f *Server) Gets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/api/patches/" && r.Method == http.MethodGet {
		id := r.URL.Query().Get("msgid")
		if !strings.HasPrefix(id, "<") {
			id = "<" + id + ">"
		}
		list := []map[string]any{}
		for _, n := range f.patches[id] {
			list = append(list, map[string]any{
				"id": n, "url": fmt.Sprintf("%s/api/patches/%d/", f.srv.URL, n),
				"web_url": fmt.Sprintf("%s/project/linux-rdma/patch/%s/", f.srv.URL, strings.Trim(id, "<>")),
				"project": map[string]any{"id": 1, "name": "Linux RDMA Mailing List", "link_name": "linux-rdma"},
				"msgid":   id, "date": "2024-05-01T10:00:00", "name": "[PATCH v2 1/2] svcrdma: fix", "state": "new",
				"check": "pending", "checks": fmt.Sprintf("%s/api/patches/%d/checks/", f.srv.URL, n),
				"mbox": fmt.Sprintf("%s/patch/%d/mbox/", f.srv.URL, n),
			})
		}
		f.page(w, r, list)
		return
	}
	var n int
	if _, err := fmt.Sscanf(r.URL.Path, "/api/patches/%d/checks/", &n); err != nil {
		http.NotFound(w, r)
		return
	}
	switch r.Method {
	case http.MethodGet:
		f.page(w, r, f.checks[n])
	case http.MethodPost:
		if r.Header.Get("Authorization") != "Token "+f.token {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"detail": "You do not have permission to perform this action."}`))
			return
		}
		if f.fail5xx > 0 {
			f.fail5xx--
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("<html>502 Bad Gateway</html>"))
			return
		}
		var c map[string]any
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.posts++
		c["id"] = f.posts
		c["url"] = fmt.Sprintf("%s/api/patches/%d/checks/%d/", f.srv.URL, n, f.posts)
		c["user"] = map[string]any{"id": 7, "username": "rdmabot"}
		c["date"] = "2024-05-01T11:00:00"
		f.checks[n] = append(f.checks[n], c)
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(c)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// page writes one page of list (?page=N, from 1) with patchwork's Link
// header: `<next>; rel="next", <prev>; rel="prev"`, the first page's
// link without a page parameter, as Django REST framework makes them.
func (f *Server) page(w http.ResponseWriter, r *http.Request, list []map[string]any) {
	f.gets++
	n := 1
	if p := r.URL.Query().Get("page"); p != "" {
		fmt.Sscan(p, &n)
	}
	at := func(page int) string {
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		q := u.Query()
		q.Del("page")
		if page > 1 {
			q.Set("page", fmt.Sprint(page))
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	if (n-1)*f.perPage > len(list) || n < 1 {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"detail": "Invalid page."}`))
		return
	}
	lo, hi := (n-1)*f.perPage, min(n*f.perPage, len(list))
	var links []string
	if hi < len(list) {
		links = append(links, "<"+at(n+1)+`>; rel="next"`)
	}
	if n > 1 {
		links = append(links, "<"+at(n-1)+`>; rel="prev"`)
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	out := append([]map[string]any{}, list[lo:hi]...)
	json.NewEncoder(w).Encode(out)
}
