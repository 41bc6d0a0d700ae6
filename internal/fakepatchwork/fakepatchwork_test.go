package fakepatchwork

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// get fetches url and decodes its JSON list; it returns the status and
// the Link header.
func get(t *testing.T, f *Server, url string) (int, string, []map[string]any) {
	t.Helper()
	resp, err := f.Client().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []map[string]any
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
	}
	return resp.StatusCode, resp.Header.Get("Link"), list
}

func post(t *testing.T, f *Server, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var c map[string]any
	json.Unmarshal(b, &c)
	return resp.StatusCode, c
}

// The patch list is filtered by msgid, with or without <>, and paged as
// patchwork pages it: a next link while items remain, a prev link after
// the first page, 404 past the end.
func TestPatchListPaged(t *testing.T) {
	f := New(t, "tok")
	f.AddPatch("a@x", 1, 2, 3)
	f.AddPatch("<b@x>", 9)
	f.SetPerPage(2)
	code, link, list := get(t, f, f.URL+"/api/patches/?msgid=%3Ca@x%3E")
	if code != http.StatusOK || len(list) != 2 || list[0]["id"] != 1.0 || list[1]["id"] != 2.0 {
		t.Fatalf("page 1: %d %v", code, list)
	}
	if !strings.Contains(link, `page=2>; rel="next"`) || strings.Contains(link, "prev") {
		t.Errorf("page 1 Link %q, want only a next link to page 2", link)
	}
	code, link, list = get(t, f, f.URL+"/api/patches/?msgid=a@x&page=2")
	if code != http.StatusOK || len(list) != 1 || list[0]["id"] != 3.0 || list[0]["msgid"] != "<a@x>" {
		t.Fatalf("page 2: %d %v", code, list)
	}
	if strings.Contains(link, "next") || !strings.Contains(link, `rel="prev"`) || strings.Contains(link, "page=1") {
		t.Errorf("page 2 Link %q, want a prev link to the first page, without a page parameter", link)
	}
	if code, _, _ := get(t, f, f.URL+"/api/patches/?msgid=a@x&page=3"); code != http.StatusNotFound {
		t.Errorf("past the last page: %d, want 404", code)
	}
	if code, _, list := get(t, f, f.URL+"/api/patches/?msgid=nobody@x"); code != http.StatusOK || len(list) != 0 {
		t.Errorf("unknown msgid: %d %v, want an empty list", code, list)
	}
	if got := f.Patches("<b@x>"); len(got) != 1 || got[0] != 9 {
		t.Errorf("Patches: %v", got)
	}
	if f.Gets() != 4 {
		t.Errorf("Gets %d, want 4", f.Gets())
	}
}

// A check is taken only with the token; FailPosts answers 502 first; a
// body that is no JSON is 400; what is taken is listed with patchwork's
// fields added.
func TestCheckPosts(t *testing.T) {
	f := New(t, "tok")
	f.AddCheck(5, map[string]any{"context": "other-ci", "state": "success"})
	url := f.URL + "/api/patches/5/checks/"
	body := `{"state":"fail","context":"rdmabot","description":"REGRESSION"}`
	if code, _ := post(t, f, url, "", body); code != http.StatusForbidden {
		t.Errorf("no token: %d, want 403", code)
	}
	if code, _ := post(t, f, url, "wrong", body); code != http.StatusForbidden {
		t.Errorf("wrong token: %d, want 403", code)
	}
	f.FailPosts(1)
	if code, _ := post(t, f, url, "tok", body); code != http.StatusBadGateway {
		t.Errorf("failing post: %d, want 502", code)
	}
	if code, _ := post(t, f, url, "tok", "{not json"); code != http.StatusBadRequest {
		t.Errorf("bad body: %d, want 400", code)
	}
	code, c := post(t, f, url, "tok", body)
	if code != http.StatusCreated || c["id"] != 1.0 || c["state"] != "fail" || c["user"] == nil {
		t.Errorf("post: %d %v", code, c)
	}
	checks := f.Checks(5)
	if len(checks) != 2 || checks[0]["context"] != "other-ci" || checks[1]["context"] != "rdmabot" {
		t.Errorf("checks %v, want the other CI's, then ours", checks)
	}
	if code, _, list := get(t, f, url); code != http.StatusOK || len(list) != 2 {
		t.Errorf("list checks: %d %v", code, list)
	}
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	resp, err := f.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d, want 405", resp.StatusCode)
	}
	if code, _, _ := get(t, f, f.URL+"/api/series/"); code != http.StatusNotFound {
		t.Errorf("unknown path: %d, want 404", code)
	}
}
