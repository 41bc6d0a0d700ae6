package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/rdmabot/rdmabot/bot"
)

// busyJobs is a job table in the middle of things: the measured test's
// lab round running on the pair it holds, a second test's round snoozed
// until the pair is free, and a mainline job that failed seven times on
// the bot's side and waits to be retried (the one /mainline did not
// show); the mainline and canary cron jobs are scheduled.
func busyJobs(ids map[string]int64, at time.Time) fakeJobs {
	started := at.Add(-3 * time.Minute)
	var errs []rivertype.AttemptError
	for i := range 7 {
		errs = append(errs, rivertype.AttemptError{Attempt: i + 1, At: at.Add(-time.Duration(7-i) * time.Minute),
			Error: fmt.Sprintf("infrastructure: fetch mainline master: git fetch: exit status 128 (attempt %d)\nfatal: unable to access", i+1)})
	}
	return fakeJobs{
		active: []*rivertype.JobRow{
			{ID: 42, Kind: "lab", Queue: "lab", State: rivertype.JobStateRunning, Attempt: 1, MaxAttempts: 8,
				EncodedArgs: fmt.Appendf(nil, `{"test_id":%d,"round":2,"runs":3}`, ids["measured"]), AttemptedAt: &started, AttemptedBy: []string{"lab-1/lab"}, ScheduledAt: started},
			{ID: 43, Kind: "lab", Queue: "lab", State: rivertype.JobStateScheduled, Attempt: 1, MaxAttempts: 9,
				EncodedArgs: fmt.Appendf(nil, `{"test_id":%d,"round":1,"runs":3}`, ids["regressed"]), ScheduledAt: at.Add(15 * time.Second)},
			{ID: 44, Kind: "mainline", Queue: "build", State: rivertype.JobStateRetryable, Attempt: 7, MaxAttempts: 8,
				EncodedArgs: []byte(`{"tree":"mainline","branch":"master"}`), Errors: errs, ScheduledAt: at.Add(40 * time.Minute)},
		},
		next: []bot.Schedule{
			{ID: "canary", Kind: "canary", Spec: "CRON_TZ=UTC 30 3 * * *", Next: time.Date(2031, 1, 2, 3, 30, 0, 0, time.UTC)},
			{ID: "mainline-0-mainline-master", Kind: "mainline", Tree: "mainline", Branch: "master", Spec: "CRON_TZ=UTC 0 */6 * * *", Next: time.Date(2031, 1, 2, 6, 0, 0, 0, time.UTC)},
			{ID: "ingest", Kind: "ingest", Every: time.Minute},
		},
	}
}

// Every page shows what is happening: the running lab round (naming its
// series: subject, Message-ID, list) and the pair it holds, the round waiting for it, the mainline job retrying after
// seven failed attempts with its error, and the next cron runs; an
// expired lease says so.
func TestNowStripInChromium(t *testing.T) {
	st, ids := seed(t)
	ctx := context.Background()
	at := time.Date(2030, 12, 31, 22, 0, 0, 0, time.UTC)
	st.SetClock(func() time.Time { return at })
	if ok, err := st.AcquireLease(ctx, "qemu", "lab-1/lab#42", 42, time.Hour); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	if ok, err := st.AcquireLease(ctx, "hw1", "lab-2/lab#7", 7, -time.Minute); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	srv := serverWith(t, st, busyJobs(ids, st.Now()))
	measured := fmt.Sprintf("/tests/%d", ids["measured"])
	want := []string{`<section id="now">`,
		`<td class="running">running</td><td>lab 42</td><td><a href="` + measured + `">test ` + fmt.Sprint(ids["measured"]) + ` round 2: svcrdma: fix the send path</a><br><code>&lt;a@x&gt;</code> on linux-rdma@vger.kernel.org</td><td>1 of 8</td>`,
		"(3m0s)", "on lab-1/lab",
		`<td>scheduled</td><td>lab 43</td>`, fmt.Sprintf(`test %d round 1: svcrdma: fix the send path`, ids["regressed"]),
		`<td class="infra">retrying</td><td>mainline 44</td><td><a href="/mainline">mainline master</a></td><td>7 of 8</td>`,
		`7 attempts failed, the last: infrastructure: fetch mainline master: git fetch: exit status 128 (attempt 7)</span>`,
		`<b>qemu</b> held by <code>lab-1/lab#42</code> for <a href="` + measured + `">test`,
		`<b>hw1</b> held by <code>lab-2/lab#7</code> for job 7 since`, `(lease expired at`,
		`canary at <b>2031-01-02 03:30:00</b> (<code>CRON_TZ=UTC 30 3 * * *</code>); mainline-0-mainline-master at <b>2031-01-02 06:00:00</b>`,
		"ingest every 1m0s"}
	// Chromium for the pages the issue named; the others share the
	// layout and are read as served.
	for _, path := range []string{"/", "/mainline", "/canary", measured, fmt.Sprintf("/bisect/%d", ids["bisect"]), "/lists", "/reports"} {
		var dom string
		if path == "/" || path == "/mainline" || path == "/canary" {
			dom = chromium(t, srv.URL+path)
		} else {
			dom = getBody(t, srv.URL+path)
		}
		for _, w := range want {
			if !strings.Contains(dom, w) {
				t.Errorf("%s: no %q in\n%s", path, w, dom)
			}
		}
		if strings.Contains(dom, "unable to access") {
			t.Errorf("%s shows more than the error's first line", path)
		}
	}

	var v NowView
	resp, err := http.Get(srv.URL + "/api/now")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(body, &v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/api/now: %s %v\n%s", resp.Status, err, body)
	}
	if len(v.Running) != 1 || v.Running[0].Link != measured || len(v.Waiting) != 2 || v.Waiting[0].ID != 43 ||
		v.Waiting[1].Errors != 7 || !v.Waiting[1].Retrying() || len(v.Leases) != 2 || v.Leases[0].Pair != "hw1" || !v.Leases[0].Expired ||
		v.Leases[1].Link != measured || v.Leases[1].Expired || len(v.Next) != 3 || v.Err != "" ||
		v.Running[0].Subject != "svcrdma: fix the send path" || v.Running[0].MessageID != "a@x" ||
		v.Running[0].List != "linux-rdma@vger.kernel.org" || v.Waiting[1].MessageID != "" {
		t.Errorf("/api/now: %s", body)
	}
}

// A job table that cannot be read leaves the page up, saying so, and
// fails the API; an idle bot says nothing runs and no pair is leased.
func TestNowStripErrorsAndIdle(t *testing.T) {
	st, _ := seed(t)
	broken := serverWith(t, st, fakeJobs{err: errors.New("river: database is locked")})
	get := func(srv string, path string, code int) string {
		t.Helper()
		resp, err := http.Get(srv + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != code {
			t.Errorf("%s: %s, want %d", path, resp.Status, code)
		}
		return string(b)
	}
	if page := get(broken.URL, "/", 200); !strings.Contains(page, "Not all of it could be read: jobs: river: database is locked") ||
		!strings.Contains(page, "svcrdma: fix the send path") {
		t.Errorf("/ with the job table unreadable:\n%s", page)
	}
	if body := get(broken.URL, "/api/now", 500); !strings.Contains(body, "database is locked") {
		t.Errorf("/api/now: %s", body)
	}
	idle := serverWith(t, st, fakeJobs{})
	page := get(idle.URL, "/canary", 200)
	for _, w := range []string{"No job running or waiting.", "Lab pairs: none leased.", "Next runs: none scheduled."} {
		if !strings.Contains(page, w) {
			t.Errorf("idle: no %q in\n%s", w, page)
		}
	}
	// Leases that cannot be read: the jobs are still shown.
	st.DB.Exec(`DROP TABLE lab_leases`)
	if page := get(serverWith(t, st, busyJobs(nil, st.Now())).URL, "/", 200); !strings.Contains(page, "Not all of it could be read: leases: ") ||
		!strings.Contains(page, "mainline 44") {
		t.Errorf("leases unreadable:\n%s", page)
	}
}
