package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/testenv"
)

// rdmabot runs the command line in-process: exit status, stdout, stderr.
func rdmabot(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// tempConfig writes a config whose data and cache are in a fresh
// directory, plus extra TOML, and returns its path.
func tempConfig(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "config.toml")
	body := fmt.Sprintf("data_dir = %q\ncache_dir = %q\n%s", filepath.Join(dir, "data"), filepath.Join(dir, "cache"), extra)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A bad flag is a usage error (2), reported once: the flag package's
// message and the usage, not the message again. A positional argument a
// command does not take is a usage error too, found before anything is
// opened (here no config.toml exists: doing anything would exit 3).
func TestUsageErrorsExit2Once(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx := context.Background()
	code, _, stderr := rdmabot(t, ctx, "status", "--nope")
	if code != exitUsage || strings.Count(stderr, "flag provided but not defined: -nope") != 1 || !strings.Contains(stderr, "usage of rdmabot status:") {
		t.Errorf("status --nope: exit %d, stderr:\n%s", code, stderr)
	}
	for _, args := range [][]string{
		{"status", "extra"}, {"status", "extra", "--json"}, {"version", "extra"}, {"config", "check", "extra"},
		{"serve", "extra"}, {"test", "--mbox", "x", "extra"}, {"bisect", "--tree", "t", "--good", "g", "--bad", "b", "extra"},
		{"outbox", "list", "extra"}, {"tree", "list", "extra"}, {"lore", "scan", "--mbox", "x", "extra"},
	} {
		code, _, stderr := rdmabot(t, ctx, args...)
		if code != exitUsage || !strings.Contains(stderr, `unexpected argument "extra"`) && !strings.Contains(stderr, "usage: ") {
			t.Errorf("rdmabot %v: exit %d, stderr:\n%s", args, code, stderr)
		}
	}
	// What cannot be done is exit 3, not a usage error.
	if code, _, stderr := rdmabot(t, ctx, "status"); code != exitFailure || !strings.Contains(stderr, "config.toml") {
		t.Errorf("status without a config: exit %d, %s", code, stderr)
	}
	// The contract is in the top-level usage.
	if _, stdout, _ := rdmabot(t, ctx, "-h"); !strings.Contains(stdout, "exit status:\n  0  done") || !strings.Contains(stdout, "2  usage error") {
		t.Errorf("rdmabot -h does not give the exit statuses:\n%s", stdout)
	}
}

// Configs that were once accepted. config check exits 1 naming the
// key; serve refuses the same config with the same words (one
// validation) before it opens anything.
var badConfigs = []struct{ name, toml, want string }{
	{"list url", "[[lore.lists]]\nname = \"linux-rdma\"\nurl = \"htps:/lore kernel.org/linux-rdma\"\n", `lore.lists[0] linux-rdma: url "htps:/lore kernel.org/linux-rdma"`},
	{"bot.url", "[bot]\nurl = \"not a url\"\n", `bot.url "not a url" is not an http:// or https:// URL`},
	{"mainline tree", "[bot.mainline]\ntrees = [\"linus\"]\n", `bot.mainline.trees: "linus" is not a configured tree`},
	{"mail, loopback url", "[reports]\nmail = true\nfrom = \"bot <bot@example.org>\"\n[reports.smtp]\naddr = \"smtp.example.org:587\"\n",
		`bot.url "http://127.0.0.1:8480" is reachable only from this machine, but reports.mail is on`},
	{"mail, .invalid from", "[reports]\nmail = true\n[reports.smtp]\naddr = \"smtp.example.org:587\"\n[bot]\nurl = \"https://rdmabot.example.org\"\n",
		`reports.from "rdmabot <rdmabot@rdmabot.invalid>" is not a deliverable mailbox`},
	{"github, loopback url", "[bot.github]\nrepo = \"o/r\"\n", `but bot.github.repo is set`},
}

func TestConfigCheckAndServeRefuseTheSame(t *testing.T) {
	ctx := context.Background()
	shipped := filepath.Join("..", "..", "config.toml")
	if code, stdout, stderr := rdmabot(t, ctx, "config", "check", "--config", shipped); code != exitOK || !strings.HasSuffix(stdout, ": ok\n") {
		t.Fatalf("shipped config.toml: exit %d %s%s", code, stdout, stderr)
	}
	// A serve that wrongly started would end at once on this context.
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range badConfigs {
		cfg := tempConfig(t, c.toml)
		code, _, stderr := rdmabot(t, ctx, "config", "check", "--config", cfg)
		if code != exitAttention || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: config check: exit %d, stderr:\n%s", c.name, code, stderr)
		}
		code, _, stderr = rdmabot(t, done, "serve", "--config", cfg)
		if code != exitFailure || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: serve: exit %d, stderr:\n%s", c.name, code, stderr)
		}
	}
}

// config check --json gives every problem, each naming its key, and
// exits 1 with nothing on stderr (the JSON says it all).
func TestConfigCheckJSON(t *testing.T) {
	ctx := context.Background()
	var all strings.Builder
	for _, c := range badConfigs[:3] {
		all.WriteString(c.toml)
	}
	cfg := tempConfig(t, all.String())
	code, stdout, stderr := rdmabot(t, ctx, "config", "check", "--config", cfg, "--json")
	var got configCheckJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitAttention || stderr != "" {
		t.Fatalf("exit %d, %v, stdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
	}
	if got.Path != cfg || got.OK || len(got.Problems) != 3 {
		t.Fatalf("%+v", got)
	}
	for _, c := range badConfigs[:3] {
		if !slices.ContainsFunc(got.Problems, func(p string) bool { return strings.Contains(p, c.want) }) {
			t.Errorf("no problem says %q: %q", c.want, got.Problems)
		}
	}
	code, stdout, _ = rdmabot(t, ctx, "config", "check", "--config", filepath.Join("..", "..", "config.toml"), "--json")
	if code != exitOK || !strings.Contains(stdout, `"ok": true`) || !strings.Contains(stdout, `"problems": []`) {
		t.Errorf("shipped config: exit %d %s", code, stdout)
	}
}

// test --wait exits 0 only when the test ends PASS or IMPROVEMENT; a
// regression, a failed (INFRA) or canceled test exits 1. --json gives
// the id, the page and the test's end. The test's end is set in the
// database, as serve would.
func TestTestWaitExitStatus(t *testing.T) {
	ctx := context.Background()
	cfg := tempConfig(t, "")
	mbox := filepath.Join("..", "..", "examples", "sample-series.mbox")
	code, stdout, stderr := rdmabot(t, ctx, "test", "--config", cfg, "--mbox", mbox, "--json")
	var q testQueuedJSON
	if err := json.Unmarshal([]byte(stdout), &q); err != nil || code != exitOK || q.ID == 0 || q.URL != fmt.Sprintf("http://127.0.0.1:8480/tests/%d", q.ID) || q.Test != nil {
		t.Fatalf("test --json: exit %d %v %s%s", code, err, stdout, stderr)
	}
	end := func(state store.State, verdict string) {
		t.Helper()
		st, err := store.Open(ctx, "", filepath.Join(filepath.Dir(cfg), "data"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		tt, err := st.Test(ctx, st.DB, q.ID)
		if err != nil {
			t.Fatal(err)
		}
		tt.State, tt.Summary = state, "summary of "+verdict
		if tt.Verdict, err = flow.ParseOutcome(verdict); err != nil {
			t.Fatal(err)
		}
		if err := st.UpdateTest(ctx, st.DB, tt); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		state   store.State
		verdict string
		code    int
	}{
		{store.StateDone, "PASS", exitOK},
		{store.StateDone, "IMPROVEMENT", exitOK},
		{store.StateDone, "REGRESSION", exitAttention},
		{store.StateDone, "CRASH", exitAttention},
		{store.StateDone, "INCONCLUSIVE", exitAttention},
		{store.StateFailed, "", exitAttention},
		{store.StateCanceled, "", exitAttention}, // last: a canceled test stays so
	} {
		end(c.state, c.verdict)
		code, stdout, stderr := rdmabot(t, ctx, "test", "--config", cfg, "--mbox", mbox, "--wait")
		if code != c.code || !strings.Contains(stdout, fmt.Sprintf("%s %s\nsummary of %s", c.state, c.verdict, c.verdict)) {
			t.Errorf("%s %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", c.state, c.verdict, code, c.code, stdout, stderr)
		}
	}
	code, stdout, _ = rdmabot(t, ctx, "test", "--config", cfg, "--mbox", mbox, "--wait", "--json")
	var w testQueuedJSON
	if err := json.Unmarshal([]byte(stdout), &w); err != nil || code != exitAttention || w.ID != q.ID || w.Test == nil || w.Test.State != "canceled" {
		t.Errorf("test --wait --json: exit %d %v\n%s", code, err, stdout)
	}
}

// bisect resolves its refs in the tree store before queueing: an unknown
// tree or a ref that is no branch or commit is a usage error and nothing
// is queued; good refs are queued as commits. Without a tree store the
// refs cannot be checked and nothing is queued either.
func TestBisectChecksRefs(t *testing.T) {
	ctx := context.Background()
	cfg := tempConfig(t, "")
	code, _, stderr := rdmabot(t, ctx, "bisect", "--config", cfg, "--tree", "local", "--good", "import", "--bad", "import")
	if code != exitFailure || !strings.Contains(stderr, "the refs cannot be checked without the tree store") {
		t.Errorf("no tree store: exit %d %s", code, stderr)
	}
	data := filepath.Join(filepath.Dir(cfg), "data")
	treeStore(t, data)
	head, err := testenv.GitCmd("", nil, "--git-dir", filepath.Join(data, "trees", "kernel.git"), "rev-parse", "refs/trees/local/import").Output()
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(head))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tree", "linus", "--good", "import", "--bad", "import"}, `--tree "linus" is not a configured tree (mainline, rdma, nfsd, local)`},
		{[]string{"--tree", "local", "--good", "v0.1", "--bad", "import"}, `--good "v0.1" is neither a branch of tree local nor a commit`},
		{[]string{"--tree", "local", "--good", "import", "--bad", strings.Repeat("f", 40)}, `--bad "ffff`},
	} {
		code, _, stderr := rdmabot(t, ctx, append([]string{"bisect", "--config", cfg}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr:\n%s", c.args, code, stderr)
		}
	}
	code, stdout, stderr := rdmabot(t, ctx, "bisect", "--config", cfg, "--tree", "local", "--good", commit[:12], "--bad", "import", "--json")
	var got bisectQueuedJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitOK {
		t.Fatalf("exit %d %v\n%s%s", code, err, stdout, stderr)
	}
	if got.ID != 1 || got.URL != "http://127.0.0.1:8480/bisect/1" || got.Tree != "local" || got.Good != commit || got.Bad != commit {
		t.Errorf("%+v, want both ends %s", got, commit)
	}
	st, err := store.Open(ctx, "", data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if bs, err := st.Bisections(ctx, 10); err != nil || len(bs) != 1 || bs[0].Good != commit || bs[0].Bad != commit {
		t.Errorf("queued: %+v %v", bs, err)
	}
}
