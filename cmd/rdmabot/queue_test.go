package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lab queue replays lore scan's series against the stored A/A times:
// a series on both lists counts once, and a burst on one pair waits
// where two pairs do not.
func TestLabQueueReplaysPostings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rdma := write("rdma.json", `{"series": [
		{"root_message_id": "a@x", "date": "2024-03-01T09:00:00Z"},
		{"root_message_id": "b@x", "date": "2024-03-01T09:01:00Z"},
		{"root_message_id": "c@x", "date": "2024-03-01T09:02:00Z"}], "commands": []}`)
	nfs := write("nfs.json", `{"series": [{"root_message_id": "c@x", "date": "2024-03-01T09:02:00Z"}], "commands": []}`)
	aa := write("aa.jsonl", `{"condition":"idle","verdict":"PASS","seconds":600}
{"condition":"busy","verdict":"PASS","seconds":6000}
{"condition":"idle","verdict":"INFRA","seconds":30,"error":"guest lost"}
`)
	cfg := write("config.toml", "[lore]\npoll_interval = \"1s\"\n")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"lab", "queue", "--config", cfg, "--scan", rdma, "--scan", nfs, "--aa", aa, "--build", "0s", "--reps", "1"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := out.String()
	// One pair: done 10, 20, 30 min after 9:00, waits of about 10, 19
	// and 28 min; two pairs: 10, 10, 18.
	for _, want := range []string{"3 relevant series", "from 1 idle A/A comparisons", "1      3       19m", "2      3       10m"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	// A cold base of 30 min for the first series: in one lane the two
	// behind it wait for it (done at 40, 50 and 60 min: p50 49 min); in
	// the base lane they are done at 11 and 21 min (p50 19 min) and the
	// first at 60.
	for lanes, want := range map[string]string{"--one-lane=true": "1      3       49m1s  58m1s  58m1s", "--one-lane=false": "1      3       19m0s  1h0m1s  1h0m1s"} {
		out.Reset()
		if code := run(context.Background(), []string{"lab", "queue", "--config", cfg, "--scan", rdma, "--aa", aa, "--build", "0s", "--reps", "1", "--pairs", "1",
			"--cold-base", "30m", lanes}, &out, &errb); code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("%s: exit %d, want %q in:\n%s%s", lanes, code, want, out.String(), errb.String())
		}
	}
	if code := run(context.Background(), []string{"lab", "queue", "--config", cfg, "--scan", rdma, "--aa", aa, "--cold-base", "soon"}, &out, &errb); code != exitUsage {
		t.Errorf("--cold-base soon: exit %d, want a usage error", code)
	}
	code = run(context.Background(), []string{"lab", "queue", "--config", cfg, "--scan", rdma, "--aa", aa, "--condition", "loaded"}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "no loaded A/A comparison") {
		t.Errorf("no measured times: exit %d, %s", code, errb.String())
	}
}

// lab aa --summary counts outcomes per condition and judging, the
// contended boots, how many boots counted any transport fault, and each
// functional test's results over the profile boots.
func TestLabAASummary(t *testing.T) {
	dir := t.TempDir()
	aa := filepath.Join(dir, "aa.jsonl")
	if err := os.WriteFile(aa, []byte(`{"condition":"idle","verdict":"PASS","fresh":"PASS","seconds":240,"host_other_cores":[0,0],"guest_cpu_wait":[0.3,0.31],"health":[{"retrans":0,"reconnects":0},{"retrans":0,"reconnects":1}]}
{"condition":"idle","verdict":"REGRESSION","fresh":"PASS","seconds":500,"host_other_cores":[0.1,0],"guest_cpu_wait":[0.29,0.33],"health":[{"retrans":2},null]}
{"condition":"busy","verdict":"INFRA","seconds":100,"busy_boots":[0.6,0.61,0.62],"error":"too busy"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.toml")
	os.WriteFile(cfg, nil, 0o644)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"lab", "aa", "--config", cfg, "--results", aa, "--summary"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := out.String()
	for _, want := range []string{
		"idle       bot             2  1           0            1",
		"busy       bot             1  0           0            0     0             1",
		"idle: transport counts not zero, of 3 boots that reported them: reconnects in 1, retrans in 1",
		"busy: per boot used", "3 set aside as contended",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "TEST ") {
		t.Errorf("a test table without profile tests:\n%s", got)
	}

	fst := filepath.Join(dir, "aa-fstests.jsonl")
	if err := os.WriteFile(fst, []byte(`{"condition":"idle","verdict":"PASS","fresh":"PASS","seconds":600,"profiles":["fstests-rxe","fstests-rxe"],"profile_tests":[[{"name":"generic/075","status":"pass","secs":83},{"name":"generic/112","status":"notrun","why":"no AIO"}],[{"name":"generic/075","status":"fail","why":"fsx failed"},{"name":"generic/112","status":"notrun"}]]}
{"condition":"busy","verdict":"PASS","fresh":"PASS","seconds":700,"profiles":["fstests-rxe","fstests-rxe"],"profile_tests":[[{"name":"generic/075","status":"pass","secs":120}],[{"name":"generic/075","status":"pass","secs":90}]]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(context.Background(), []string{"lab", "aa", "--config", cfg, "--results", fst, "--summary"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{
		"TEST         BOOTS  PASS  FAIL  NOTRUN  PASS P50 S  PASS MAX S",
		"generic/075  4      3     1     0       90          120",
		"generic/112  2      0     0     2       -           -",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out.String())
		}
	}
}
