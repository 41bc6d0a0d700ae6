// Package fakegithub is the part of GitHub's REST API the bot calls, for
// tests: no machine here reaches GitHub. It answers with GitHub's JSON
// shapes and status codes: issue comments (created with 201 and the full
// object, listed in pages with a Link header, the repository's comments
// polled with an ETag), labels (removing one an issue lacks is a 404
// with GitHub's error object), organisation membership and
// collaborators. It serves at the root (an Enterprise-less API URL) and
// under /api/v3/ (what go-github's WithEnterpriseURLs asks). A call it
// does not know fails the test that made the server.
package fakegithub

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Server is one repository's issues on a fake GitHub.
type Server struct {
	// URL is the API's root, as bot.github.api or go-github's BaseURL
	// takes it (with a final slash added).
	URL         string
	owner, repo string

	mu         sync.Mutex
	comments   map[int][]map[string]any
	only       map[int]bool // when set, the only issues that exist
	labels     map[int][]string
	labelLog   []string // "#n+label", "#n-label" in call order
	members    map[string]bool
	collabs    map[string]bool
	etag       string
	polls      int
	notMod     int
	nextID     int
	failPost   int
	loseNext   bool
	failMember int
	unexpected []string
}

// New starts a fake GitHub for owner/repo, closed when t ends; a call
// it does not serve is reported as t's error then.
func New(t testing.TB, owner, repo string) *Server {
	f := &Server{owner: owner, repo: repo, comments: map[int][]map[string]any{}, labels: map[int][]string{},
		members: map[string]bool{}, collabs: map[string]bool{}, etag: `W/"0"`, nextID: 1000}
	mux := http.NewServeMux()
	p := "/repos/" + owner + "/" + repo
	mux.HandleFunc("POST "+p+"/issues/{n}/comments", f.onIssue(f.create))
	mux.HandleFunc("GET "+p+"/issues/{n}/comments", f.onIssue(f.list))
	mux.HandleFunc("GET "+p+"/issues/comments", f.poll)
	mux.HandleFunc("POST "+p+"/issues/{n}/labels", f.onIssue(f.addLabels))
	mux.HandleFunc("DELETE "+p+"/issues/{n}/labels/{label}", f.onIssue(f.removeLabel))
	mux.HandleFunc("GET /orgs/{org}/members/{user}", f.member)
	mux.HandleFunc("GET "+p+"/collaborators/{user}", f.collaborator)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.unexpected = append(f.unexpected, r.Method+" "+r.URL.String())
		f.mu.Unlock()
		notFound(w, "https://docs.github.com/rest")
	})
	root := http.NewServeMux()
	root.Handle("/api/v3/", http.StripPrefix("/api/v3", mux))
	root.Handle("/", mux)
	srv := httptest.NewServer(root)
	f.URL = srv.URL
	t.Cleanup(func() {
		srv.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.unexpected) > 0 {
			t.Errorf("unexpected GitHub calls: %q", f.unexpected)
		}
	})
	return f
}

// OnlyIssues makes these the repository's only issues: a comment on
// any other is GitHub's 404.
func (f *Server) OnlyIssues(ns ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.only = map[int]bool{}
	for _, n := range ns {
		f.only[n] = true
	}
}

// AddComment is a comment by login (with GitHub's author_association)
// on issue n, as someone other than the bot posts it; it returns the
// comment's JSON object.
func (f *Server) AddComment(n int, login, association, body string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.add(n, login, association, body)
}

// add records a comment; f.mu is held.
func (f *Server) add(n int, login, association, body string) map[string]any {
	f.nextID++
	id := f.nextID
	base := f.URL + "/repos/" + f.owner + "/" + f.repo
	at := fmt.Sprintf("2026-11-30T04:%02d:%02dZ", (id/60)%60, id%60)
	c := map[string]any{
		"id": id, "node_id": fmt.Sprintf("IC_kwDOAbc%d", id),
		"url":      fmt.Sprintf("%s/issues/comments/%d", base, id),
		"html_url": fmt.Sprintf("https://github.com/%s/%s/issues/%d#issuecomment-%d", f.owner, f.repo, n, id),
		"body":     body,
		"user": map[string]any{"login": login, "id": 1000 + len(login), "node_id": "U_kgDOA", "type": "User",
			"site_admin": false, "url": "https://api.github.com/users/" + login},
		"created_at":         at,
		"updated_at":         at,
		"issue_url":          fmt.Sprintf("%s/issues/%d", base, n),
		"author_association": association, "performed_via_github_app": nil,
		"reactions": map[string]any{"url": fmt.Sprintf("%s/issues/comments/%d/reactions", base, id),
			"total_count": 0, "+1": 0, "-1": 0, "laugh": 0, "hooray": 0, "confused": 0, "heart": 0, "rocket": 0, "eyes": 0},
	}
	f.comments[n] = append(f.comments[n], c)
	return c
}

// Bodies are issue n's comments' texts, oldest first.
func (f *Server) Bodies(n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.comments[n] {
		out = append(out, c["body"].(string))
	}
	return out
}

// Count is how many of issue n's comments hold s.
func (f *Server) Count(n int, s string) int {
	k := 0
	for _, b := range f.Bodies(n) {
		if strings.Contains(b, s) {
			k++
		}
	}
	return k
}

// LabelCalls are the label changes asked for, in order: "#n+label" for
// an add, "#n-label" for a removal.
func (f *Server) LabelCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.labelLog...)
}

// AddMember makes login a public member of org; AddCollaborator one of
// the repository's collaborators.
func (f *Server) AddMember(org, login string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members[org+"/"+login] = true
}

func (f *Server) AddCollaborator(login string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.collabs[login] = true
}

// SetETag is the repository comments' ETag from now on: a poll that
// sends the current one is answered 304.
func (f *Server) SetETag(tag string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.etag = tag
}

// Polls are how many times the repository's comments were polled and
// how many of those were answered 304 Not Modified.
func (f *Server) Polls() (polls, notModified int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls, f.notMod
}

// FailPosts answers the next n comment posts with a 500 and stores
// nothing; LoseNextAnswer stores the next comment and then answers 502,
// as a response lost on the way does; FailMembership answers the next n
// membership checks with a 500.
func (f *Server) FailPosts(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failPost = n
}

func (f *Server) LoseNextAnswer() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loseNext = true
}

func (f *Server) FailMembership(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failMember = n
}

// onIssue serves a call on issue {n} with f.mu held; an issue that
// does not exist is GitHub's 404.
func (f *Server) onIssue(h func(w http.ResponseWriter, r *http.Request, n int)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil || n <= 0 || (f.only != nil && !f.only[n]) {
			notFound(w, "https://docs.github.com/rest/issues/issues#get-an-issue")
			return
		}
		h(w, r, n)
	}
}

func (f *Server) create(w http.ResponseWriter, r *http.Request, n int) {
	if f.failPost > 0 {
		f.failPost--
		serverError(w, http.StatusInternalServerError)
		return
	}
	var in struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		jsonHeader(w)
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, `{"message":"Validation Failed","errors":[{"resource":"IssueComment","code":"missing_field","field":"body"}],"documentation_url":"https://docs.github.com/rest/issues/comments#create-an-issue-comment","status":"422"}`)
		return
	}
	c := f.add(n, "rdmabot", "NONE", in.Body)
	c["user"].(map[string]any)["type"] = "Bot"
	if f.loseNext {
		f.loseNext = false
		serverError(w, http.StatusBadGateway)
		return
	}
	jsonHeader(w)
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(c)
}

// list answers an issue's comments a page at a time (per_page, 30 by
// default), with GitHub's Link header to the next page.
func (f *Server) list(w http.ResponseWriter, r *http.Request, n int) {
	list := f.comments[n]
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if per <= 0 {
		per = 30
	}
	page = max(page, 1)
	lo, hi := min((page-1)*per, len(list)), min(page*per, len(list))
	if hi < len(list) {
		u := *r.URL
		q := u.Query()
		q.Set("page", strconv.Itoa(page+1))
		u.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, f.URL, u.String()))
	}
	jsonHeader(w)
	out := list[lo:hi]
	if out == nil {
		out = []map[string]any{}
	}
	json.NewEncoder(w).Encode(out)
}

// poll answers the repository's comments, most recently updated first
// as sort=updated asks, or 304 when the caller's ETag is current.
func (f *Server) poll(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	if r.Header.Get("If-None-Match") == f.etag {
		f.notMod++
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.URL.Query().Get("sort") != "updated" {
		f.unexpected = append(f.unexpected, "a poll without sort=updated: "+r.URL.String())
	}
	all := []map[string]any{}
	for _, cs := range f.comments {
		all = append(all, cs...)
	}
	w.Header().Set("ETag", f.etag)
	jsonHeader(w)
	json.NewEncoder(w).Encode(all)
}

func (f *Server) addLabels(w http.ResponseWriter, r *http.Request, n int) {
	var in []string
	json.NewDecoder(r.Body).Decode(&in)
	for _, l := range in {
		f.labelLog = append(f.labelLog, "#"+strconv.Itoa(n)+"+"+l)
		if !slices.Contains(f.labels[n], l) {
			f.labels[n] = append(f.labels[n], l)
		}
	}
	jsonHeader(w)
	json.NewEncoder(w).Encode(f.labelObjects(n))
}

// removeLabel answers the labels left, or GitHub's 404 when the issue
// does not have it.
func (f *Server) removeLabel(w http.ResponseWriter, r *http.Request, n int) {
	l := r.PathValue("label")
	f.labelLog = append(f.labelLog, "#"+strconv.Itoa(n)+"-"+l)
	if !slices.Contains(f.labels[n], l) {
		jsonHeader(w)
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"Label does not exist","documentation_url":"https://docs.github.com/rest/issues/labels#remove-a-label-from-an-issue","status":"404"}`)
		return
	}
	var left []string
	for _, x := range f.labels[n] {
		if x != l {
			left = append(left, x)
		}
	}
	f.labels[n] = left
	jsonHeader(w)
	json.NewEncoder(w).Encode(f.labelObjects(n))
}

// labelObjects are issue n's labels as GitHub lists them; f.mu is held.
func (f *Server) labelObjects(n int) []map[string]any {
	out := []map[string]any{}
	for i, l := range f.labels[n] {
		out = append(out, map[string]any{"id": 100 + i, "node_id": "LA_x", "name": l, "color": "ededed", "default": false,
			"description": nil, "url": f.URL + "/repos/" + f.owner + "/" + f.repo + "/labels/" + url.PathEscape(l)})
	}
	return out
}

// member answers 204 for a public member of the organisation, 404 for
// anyone else.
func (f *Server) member(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failMember > 0 {
		f.failMember--
		serverError(w, http.StatusInternalServerError)
		return
	}
	if f.members[r.PathValue("org")+"/"+r.PathValue("user")] {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	notFound(w, "https://docs.github.com/rest/orgs/members#check-organization-membership-for-a-user")
}

func (f *Server) collaborator(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.collabs[r.PathValue("user")] {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	notFound(w, "https://docs.github.com/rest/collaborators/collaborators#check-if-a-user-is-a-repository-collaborator")
}

func jsonHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
}

func notFound(w http.ResponseWriter, doc string) {
	jsonHeader(w)
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprintf(w, `{"message":"Not Found","documentation_url":%q,"status":"404"}`, doc)
}

func serverError(w http.ResponseWriter, code int) {
	jsonHeader(w)
	w.WriteHeader(code)
	io.WriteString(w, `{"message":"Server Error"}`)
}
