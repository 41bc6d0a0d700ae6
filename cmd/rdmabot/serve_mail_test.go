package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/dkimtest"
	"github.com/rdmabot/rdmabot/internal/pitest"
	"github.com/rdmabot/rdmabot/internal/smtptest"
	"github.com/rdmabot/rdmabot/internal/testenv"
)

// serveEnv is the real binary and a config.toml made from the shipped
// one, for tests that run `rdmabot serve`.
type serveEnv struct {
	t         *testing.T
	dir, bin  string
	config    string
	addr      string
	serve     *exec.Cmd
	serveLogs string
}

func newServeEnv(t *testing.T, replace ...string) *serveEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds and runs the binary")
	}
	dir := t.TempDir()
	e := &serveEnv{t: t, dir: dir, bin: filepath.Join(dir, "rdmabot"), serveLogs: filepath.Join(dir, "serve.log")}
	if out, err := exec.Command("go", "build", "-o", e.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	e.addr = l.Addr().String()
	l.Close()
	cfg, err := os.ReadFile(filepath.Join("..", "..", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	c := string(cfg)
	defaults := []string{
		`data_dir = "/var/lib/rdmabot"`, fmt.Sprintf("data_dir = %q", filepath.Join(dir, "data")),
		`cache_dir = "/var/cache/rdmabot"`, fmt.Sprintf("cache_dir = %q", filepath.Join(dir, "cache")),
		`listen = "127.0.0.1:8480"`, fmt.Sprintf("listen = %q", e.addr),
		`url = "http://127.0.0.1:8480"`, fmt.Sprintf("url = %q", "http://"+e.addr),
	}
	// A caller's pair replaces the default one for the same line (bot.url
	// when replies leave the machine and must link to a public name).
	var pairs []string
	for i := 0; i < len(defaults); i += 2 {
		if !slices.Contains(replace, defaults[i]) {
			pairs = append(pairs, defaults[i], defaults[i+1])
		}
	}
	pairs = append(pairs, replace...)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(c, pairs[i]) {
			t.Fatalf("config.toml has no %q", pairs[i])
		}
		c = strings.Replace(c, pairs[i], pairs[i+1], 1)
	}
	e.config = filepath.Join(dir, "config.toml")
	if err := os.WriteFile(e.config, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.kill)
	return e
}

func (e *serveEnv) start() {
	e.serve = exec.Command(e.bin, "serve", "-config", e.config, "-id", "test-server")
	logf, _ := os.OpenFile(e.serveLogs, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	e.serve.Stdout, e.serve.Stderr = logf, logf
	if err := e.serve.Start(); err != nil {
		e.t.Fatal(err)
	}
	logf.Close()
}

func (e *serveEnv) kill() {
	if e.serve != nil && e.serve.Process != nil {
		e.serve.Process.Signal(syscall.SIGKILL)
		e.serve.Wait()
		e.serve = nil
	}
}

func (e *serveEnv) log() string {
	b, _ := os.ReadFile(e.serveLogs)
	return string(b)
}

// rdmabot runs a CLI command against the config (flags after the
// subcommand and the outbox verb).
func (e *serveEnv) rdmabot(args ...string) string {
	e.t.Helper()
	n := 1
	if args[0] == "outbox" {
		n = 2
	}
	full := append(append(append([]string{}, args[:n]...), "-config", e.config), args[n:]...)
	out, err := exec.Command(e.bin, full...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("rdmabot %v: %v\n%s\nserve.log:\n%s", args, err, out, e.log())
	}
	return string(out)
}

// waitFor polls f until it holds.
func (e *serveEnv) waitFor(what string, d time.Duration, f func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not after %s:\n%s\nserve.log:\n%s", what, d, state, e.log())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// outboxRows are `rdmabot outbox list -all`'s rows as OUTCOME TO MESSAGE-ID.
func (e *serveEnv) outboxRows() []string {
	var out []string
	lines := strings.Split(strings.TrimSpace(e.rdmabot("outbox", "list", "-all")), "\n")
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) >= 7 {
			out = append(out, f[3]+" "+f[5]+" "+f[6])
		}
	}
	return out
}

// treeStore makes the tree store's local/import, a toy base with a
// MAINTAINERS file, and returns its commit.
func treeStore(t *testing.T, dataDir string) string {
	t.Helper()
	wt := t.TempDir()
	os.MkdirAll(filepath.Join(wt, "net/sunrpc/xprtrdma"), 0o755)
	os.WriteFile(filepath.Join(wt, "MAINTAINERS"), []byte("List of maintainers\n===================\n\n"+
		"SVCRDMA\nM:\tMaint Person <maint@example.org>\nL:\tlinux-rdma@vger.kernel.org\nS:\tSupported\nF:\tnet/sunrpc/xprtrdma/\n\n"+
		"THE REST\nM:\tLinus Torvalds <torvalds@linux-foundation.org>\nL:\tlinux-kernel@vger.kernel.org\nF:\t*\nF:\t*/\n"), 0o644)
	os.WriteFile(filepath.Join(wt, "net/sunrpc/xprtrdma/svc_rdma_sendto.c"), []byte("int a;\nint b;\nint c;\n"), 0o644)
	return importTree(t, dataDir, wt)
}

// importTree commits the files in wt and pushes them to the tree store
// (data/trees/kernel.git) as local/import; it returns the commit.
func importTree(t *testing.T, dataDir, wt string) string {
	t.Helper()
	gitT(t, wt, "init", "-q")
	gitT(t, wt, "add", ".")
	gitT(t, wt, "commit", "-q", "-m", "base")
	store := filepath.Join(dataDir, "trees", "kernel.git")
	os.MkdirAll(store, 0o755)
	gitT(t, store, "init", "-q", "--bare")
	gitT(t, wt, "push", "-q", store, "HEAD:refs/trees/local/import")
	return gitT(t, wt, "rev-parse", "HEAD")
}

// gitT runs git in dir (testenv.Git).
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return testenv.Git(t, dir, args...)
}

// withBase is a patch mail's body with a base-commit trailer, as git
// format-patch --base writes it: the base is the author's, not a guess.
func withBase(body, commit string) string {
	return strings.Replace(body, "\n-- \n", "\nbase-commit: "+commit+"\n-- \n", 1)
}

// testRow is a series line of rdmabot status: its state and verdict.
var testRow = regexp.MustCompile(`^\d+\s+series\s.*?\b(queued|building|testing|done|failed|canceled)\b\s*([A-Z_]*)`)

func mailAt(from, msgID, subject, inReplyTo, body string) []byte {
	h := fmt.Sprintf("From: %s\nTo: linux-rdma@vger.kernel.org\nSubject: %s\nDate: %s\nMessage-ID: <%s>\n",
		from, subject, time.Now().UTC().Format(time.RFC1123Z), msgID)
	if inReplyTo != "" {
		h += fmt.Sprintf("In-Reply-To: <%s>\nReferences: <%s>\n", inReplyTo, inReplyTo)
	}
	return []byte(h + "\n" + body)
}

// A patch whose context is not in the tree store's file: it does not
// apply, so each test of it ends at once with APPLY_FAILED and a reply,
// without building a kernel.
const svcrdmaPatch = `The comment was wrong.

Signed-off-by: Alice Author <alice@example.org>
---
 net/sunrpc/xprtrdma/svc_rdma_sendto.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/net/sunrpc/xprtrdma/svc_rdma_sendto.c b/net/sunrpc/xprtrdma/svc_rdma_sendto.c
--- a/net/sunrpc/xprtrdma/svc_rdma_sendto.c
+++ b/net/sunrpc/xprtrdma/svc_rdma_sendto.c
@@ -1,3 +1,3 @@
 int x;
-int y;
+int yy;
 int z;
-- 
2.43.0
`

// `rdmabot serve` with config.toml reading linux-rdma over IMAP from a
// real public-inbox-imapd: a posted series is tested; "#rdmabot"
// replies DKIM-signed by example.org (its key served by a real DNS
// server, lore.dkim_resolver) from its author, its maintainer (by the
// MAINTAINERS of the base in the tree store) and an allowed address
// queue new tests of it; an unsigned one with the author's From: is
// refused, as is one from a stranger, each with a reply to that mail
// alone; a series missing a patch past lore.grace_period gets one
// INCOMPLETE reply; and after a kill -9 and restart nothing is done
// twice.
func TestServeMailCommandsOverIMAP(t *testing.T) {
	srv := pitest.Start(t, pitest.Inbox{Name: "linux-rdma", Messages: [][]byte{
		mailAt("Ann <ann@example.org>", "hello@example.org", "hello", "", "not a patch\n")}})
	key := dkimtest.NewKey(t, "example.org", "s1")
	dns := dkimtest.StartDNS(t, map[string]string{key.Name(): key.Record()})
	e := newServeEnv(t,
		`url = "https://lore.kernel.org/linux-rdma"`, fmt.Sprintf("url = %q", "imap://"+srv.IMAPAddr+"/org.kernel.vger.linux-rdma"),
		`url = "https://lore.kernel.org/linux-nfs"`, `url = "no-inbox"`,
		`poll_interval = "2m0s"`, `poll_interval = "1s"`,
		`grace_period = "6h"`, `grace_period = "3s"`,
		`command_allow = []`, `command_allow = ["allowed@example.org"]`,
		`dkim_resolver = ""`, fmt.Sprintf("dkim_resolver = %q", dns),
		`max_attempts = 8`, `max_attempts = 2`,
	)
	treeStore(t, filepath.Join(e.dir, "data"))
	e.start()

	srv.Add(t, "linux-rdma", mailAt("Alice Author <alice@example.org>", "svcrdma-1@example.org", "[PATCH] svcrdma: fix a comment", "", svcrdmaPatch))
	srv.Add(t, "linux-rdma", mailAt("Bob Half <bob@example.org>", "half-1@example.org", "[PATCH 1/2] svcrdma: first half", "",
		strings.Replace(svcrdmaPatch, "Alice Author <alice@", "Bob Half <bob@", 1)))
	verdicts := func() map[string]int {
		out := map[string]int{}
		for _, l := range strings.Split(e.rdmabot("status"), "\n") {
			if m := testRow.FindStringSubmatch(l); m != nil {
				out[strings.TrimSpace(m[1]+" "+m[2])]++
			}
		}
		return out
	}
	e.waitFor("the series answered", 90*time.Second, func() (bool, string) {
		v := verdicts()
		rows := e.outboxRows()
		return v["done APPLY_FAILED"] == 1 && v["done INCOMPLETE"] == 1 && len(rows) > 0, fmt.Sprint(v, rows)
	})
	// Alice named no base: the bot guessed the default branch, and a
	// patch that does not apply there is not mailed to anyone (the
	// commands' count below says it stays so).
	if rows := e.outboxRows(); len(rows) != 1 || !strings.HasPrefix(rows[0], "INCOMPLETE ") {
		t.Fatalf("after the posting, the outbox holds %q, want the INCOMPLETE notice alone", rows)
	}

	srv.Add(t, "linux-rdma", key.Sign(t, mailAt("Maint Person <maint@example.org>", "cmd-maint@example.org", "Re: [PATCH] svcrdma: fix a comment",
		"svcrdma-1@example.org", "> int yy;\n\n#rdmabot retest\n")))
	srv.Add(t, "linux-rdma", key.Sign(t, mailAt("Eve Stranger <eve@example.org>", "cmd-eve@example.org", "Re: [PATCH] svcrdma: fix a comment",
		"svcrdma-1@example.org", "#rdmabot test\n")))
	srv.Add(t, "linux-rdma", key.Sign(t, mailAt("Al Lowed <allowed@example.org>", "cmd-allowed@example.org", "Re: [PATCH] svcrdma: fix a comment",
		"svcrdma-1@example.org", "#rdmabot test local import\n")))
	srv.Add(t, "linux-rdma", key.Sign(t, mailAt("Alice Author <alice@example.org>", "cmd-alice@example.org", "Re: [PATCH] svcrdma: fix a comment",
		"svcrdma-1@example.org", "#rdmabot retest\n")))
	// Anyone can write the author's From:; nobody else can sign for it.
	srv.Add(t, "linux-rdma", mailAt("Alice Author <alice@example.org>", "cmd-forged@example.org", "Re: [PATCH] svcrdma: fix a comment",
		"svcrdma-1@example.org", "#rdmabot retest\n"))
	want := map[string]int{"done APPLY_FAILED": 4, "done INCOMPLETE": 1, "done REFUSED": 2}
	settled := func() (bool, string) {
		v := verdicts()
		return fmt.Sprint(v) == fmt.Sprint(want) && len(e.outboxRows()) == 6, fmt.Sprint(v, e.outboxRows())
	}
	e.waitFor("the commands acted on", 90*time.Second, settled)

	rows := e.outboxRows()
	byOutcome := map[string][]string{}
	for _, r := range rows {
		f := strings.Fields(r)
		byOutcome[f[0]] = append(byOutcome[f[0]], f[1])
	}
	slices.Sort(byOutcome["APPLY_FAILED"])
	slices.Sort(byOutcome["REFUSED"])
	// The original test guessed its base: not mailed. The maintainer's
	// and the author's retests guessed it again, and the allowed address
	// named local/import: each answer, whatever it found, goes to the one
	// who asked, alone (no list hears of, or spends its replies on, it).
	if fmt.Sprint(byOutcome["APPLY_FAILED"]) != "[alice@example.org allowed@example.org maint@example.org]" ||
		fmt.Sprint(byOutcome["REFUSED"]) != "[alice@example.org eve@example.org]" || fmt.Sprint(byOutcome["INCOMPLETE"]) != "[bob@example.org]" {
		t.Fatalf("outbox: %v", rows)
	}
	show := func(outcome, to string) string {
		for _, r := range rows {
			if f := strings.Fields(r); f[0] == outcome && f[1] == to {
				return e.rdmabot("outbox", "show", f[2])
			}
		}
		return ""
	}
	for _, r := range rows {
		f := strings.Fields(r)
		if f[0] != "APPLY_FAILED" || f[1] == "alice@example.org" {
			continue
		}
		if f[1] == "allowed@example.org" {
			if asked := e.rdmabot("outbox", "show", f[2]); !strings.Contains(asked, "In-Reply-To: <cmd-allowed@example.org>") ||
				strings.Contains(asked, "linux-rdma@vger.kernel.org") {
				t.Errorf("the answer to the allowed address's test is not to it alone:\n%s", asked)
			}
			continue
		}
		asked := e.rdmabot("outbox", "show", f[2])
		for _, w := range []string{"In-Reply-To: <cmd-maint@example.org>", "Hi Maint,", "base chosen by default branch"} {
			if !strings.Contains(asked, w) {
				t.Errorf("the answer to the maintainer's retest lacks %q:\n%s", w, asked)
			}
		}
		if strings.Contains(asked, "linux-rdma@vger.kernel.org") {
			t.Errorf("the answer to the maintainer's retest went to the list:\n%s", asked)
		}
	}
	refusal := show("REFUSED", "eve@example.org")
	for _, w := range []string{"In-Reply-To: <cmd-eve@example.org>", "References: <svcrdma-1@example.org>\n <cmd-eve@example.org>",
		"> #rdmabot test\n", "eve@example.org is none of them", "state: held"} {
		if !strings.Contains(refusal, w) {
			t.Errorf("refusal lacks %q:\n%s", w, refusal)
		}
	}
	forged := show("REFUSED", "alice@example.org")
	for _, w := range []string{"In-Reply-To: <cmd-forged@example.org>", "> #rdmabot retest\n", "I could not verify that this mail comes from",
		"no DKIM signature of", "(it carries none)", "state: held"} {
		if !strings.Contains(strings.Join(strings.Fields(forged), " "), strings.Join(strings.Fields(w), " ")) {
			t.Errorf("refusal of the forged command lacks %q:\n%s", w, forged)
		}
	}
	incomplete := show("INCOMPLETE", "bob@example.org")
	for _, w := range []string{"In-Reply-To: <half-1@example.org>", "patch 2 of 2 missing", "Hi Bob,"} {
		if !strings.Contains(incomplete, w) {
			t.Errorf("incomplete notice lacks %q:\n%s", w, incomplete)
		}
	}
	// The allowed address asked for local/import by name.
	if st := e.rdmabot("status"); !strings.Contains(st, "local") {
		t.Errorf("status:\n%s", st)
	}

	// Killed and restarted, the server reads the same mail again (the
	// window is recomputed from stored mail) and does nothing twice.
	e.kill()
	before := len(e.log())
	e.start()
	e.waitFor("three polls after the restart", 60*time.Second, func() (bool, string) {
		return strings.Count(e.log()[before:], "kind=ingest") >= 3, ""
	})
	if ok, state := settled(); !ok {
		t.Fatalf("after the restart: %s", state)
	}

	// The maintainer disputes the report: it is marked on the dashboard,
	// and nothing is mailed.
	srv.Add(t, "linux-rdma", key.Sign(t, mailAt("Maint Person <maint@example.org>", "cmd-invalid@example.org", "Re: [PATCH] svcrdma: fix a comment",
		"svcrdma-1@example.org", "#rdmabot invalid the tree store is a toy\n")))
	type disputed struct {
		ID       int64 `json:"ID"`
		Disputes []struct{ Kind, Note, By string }
	}
	var got []disputed
	e.waitFor("the report disputed", 60*time.Second, func() (bool, string) {
		var list []disputed
		json.Unmarshal([]byte(httpGet(t, "http://"+e.addr+"/api/tests")), &list)
		got = got[:0]
		for _, l := range list {
			var tv disputed
			if err := json.Unmarshal([]byte(httpGet(t, fmt.Sprintf("http://%s/api/tests/%d", e.addr, l.ID))), &tv); err == nil && len(tv.Disputes) > 0 {
				got = append(got, tv)
			}
		}
		return len(got) > 0, fmt.Sprint(e.rdmabot("status"), e.outboxRows())
	})
	if len(got) != 1 || fmt.Sprint(got[0].Disputes) != "[{invalid the tree store is a toy maint@example.org}]" {
		t.Errorf("disputes: %+v", got)
	}
	if page := httpGet(t, fmt.Sprintf("http://%s/tests/%d", e.addr, got[0].ID)); !strings.Contains(page, "called this report <strong>invalid: the tree store is a toy</strong>") {
		t.Errorf("the test page does not show the dispute:\n%s", page)
	}
	if rows := e.outboxRows(); len(rows) != 6 {
		t.Errorf("a dispute was answered: %q", rows)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// `rdmabot serve` with mail on and config.toml's limits, over a real
// SMTP server: three series posted to linux-rdma by three authors are
// answered, but with reports.list_daily_limit = 2 only two replies reach
// the list that day; the third waits in the outbox, and a restart sends
// nothing twice.
func TestServeMailsWithinListLimit(t *testing.T) {
	srv := pitest.Start(t, pitest.Inbox{Name: "linux-rdma", Messages: [][]byte{
		mailAt("Ann <ann@example.org>", "hello@example.org", "hello", "", "not a patch\n")}})
	smtpd := smtptest.Start(t, smtptest.Options{})
	e := newServeEnv(t,
		`url = "https://lore.kernel.org/linux-rdma"`, fmt.Sprintf("url = %q", "imap://"+srv.IMAPAddr+"/org.kernel.vger.linux-rdma"),
		`url = "https://lore.kernel.org/linux-nfs"`, `url = "no-inbox"`,
		`poll_interval = "2m0s"`, `poll_interval = "1s"`,
		`mail = false`, `mail = true`,
		// Mail leaves the machine: its links and From must work off it.
		`url = "http://127.0.0.1:8480"`, `url = "https://rdmabot.example.org"`,
		`from = "rdmabot <rdmabot@rdmabot.invalid>"`, `from = "rdmabot <rdmabot@example.org>"`,
		`moderate = true`, `moderate = false`,
		`list_daily_limit = 10`, `list_daily_limit = 2`,
		`addr = ""`, fmt.Sprintf("addr = %q", smtpd.Addr),
		`starttls = true`, `starttls = false`,
	)
	base := treeStore(t, filepath.Join(e.dir, "data"))
	e.start()
	for _, a := range []string{"Alice Author <alice@example.org>", "Bob Builder <bob@example.org>", "Carol Coder <carol@example.org>"} {
		name := strings.ToLower(strings.Fields(a)[0])
		// Each names its base: a patch that does not apply to the base
		// its author chose is mailed (one on a guessed base is not).
		srv.Add(t, "linux-rdma", mailAt(a, name+"-1@example.org", "[PATCH] svcrdma: fix a comment ("+name+")", "",
			withBase(strings.Replace(svcrdmaPatch, "Alice Author <alice@example.org>", a, 1), base)))
	}
	states := func() map[string]int {
		out := map[string]int{}
		lines := strings.Split(strings.TrimSpace(e.rdmabot("outbox", "list", "-all")), "\n")
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) > 0 {
				out[f[0]]++
			}
		}
		return out
	}
	e.waitFor("three replies, two sent", 90*time.Second, func() (bool, string) {
		s := states()
		return s["sent"] == 2 && s["ready"] == 1 && strings.Contains(e.log(), "list's daily limit reached"), fmt.Sprint(s, e.outboxRows())
	})
	got := smtpd.Messages()
	if len(got) != 2 {
		t.Fatalf("the SMTP server took %d messages, want 2", len(got))
	}
	for _, m := range got {
		if !slices.Contains(m.To, "linux-rdma@vger.kernel.org") || !bytes.Contains(m.Data, []byte("Cc: <linux-rdma@vger.kernel.org>")) || slices.Contains(m.To, "torvalds@linux-foundation.org") {
			t.Errorf("a reply not to the list: envelope %v\n%s", m.To, m.Data)
		}
	}

	e.kill()
	before := len(e.log())
	e.start()
	e.waitFor("a delivery round after the restart", 60*time.Second, func() (bool, string) {
		return strings.Contains(e.log()[before:], "list's daily limit reached"), ""
	})
	if n := len(smtpd.Messages()); n != 2 {
		t.Errorf("after the restart the server has %d messages, want still 2", n)
	}
}

// `rdmabot serve` with config.toml reads a posting to the local inbox
// (scripts/post.sh, public-inbox-mda) within seconds, though the lists
// are polled every 2 minutes: lore.watch_interval looks at the inbox's
// refs and polls at once.
func TestServeReadsTheLocalInboxAtOnce(t *testing.T) {
	for _, tool := range []string{"public-inbox-init", "public-inbox-mda"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install public-inbox): scripts/post.sh cannot post", tool)
		}
	}
	e := newServeEnv(t,
		`url = "https://lore.kernel.org/linux-rdma"`, `url = "no-inbox"`,
		`url = "https://lore.kernel.org/linux-nfs"`, `url = "no-inbox"`)
	treeStore(t, filepath.Join(e.dir, "data"))
	post := func(args ...string) {
		t.Helper()
		cmd := exec.Command("bash", append([]string{filepath.Join("..", "..", "scripts", "post.sh")}, args...)...)
		cmd.Env = append(os.Environ(), "RDMABOT_CONFIG="+e.config)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("post.sh %v: %v\n%s", args, err, out)
		}
	}
	post("--init")
	e.start()
	// The poll at start reads the empty inbox; the posting comes after.
	e.waitFor("the poll at start", 60*time.Second, func() (bool, string) {
		return strings.Contains(e.log(), "kind=ingest"), ""
	})
	time.Sleep(3 * time.Second)
	eml := filepath.Join(t.TempDir(), "patch.eml")
	os.WriteFile(eml, mailAt("Alice Author <alice@example.org>", "local-1@example.org", "[PATCH] svcrdma: fix a comment", "", svcrdmaPatch), 0o644)
	posted := time.Now()
	post(eml)
	e.waitFor("the posting tested", 20*time.Second, func() (bool, string) {
		s := e.rdmabot("status")
		for _, l := range strings.Split(s, "\n") {
			if testRow.MatchString(l) && strings.Contains(l, "<local-1@example.org>") {
				return true, s
			}
		}
		return false, s
	})
	t.Logf("posting to test: %s", time.Since(posted).Round(100*time.Millisecond))
	if !strings.Contains(e.log(), "mail watch: new mail, polling now") {
		t.Fatalf("the posting was read, but not by the mail watch:\n%s", e.log())
	}
}

// `rdmabot serve` with config.toml will not start a lab on a cache whose
// kernels QEMU's sandbox cannot read (another user's 0700 folder, as a
// root serve finds scripts/run.sh's cache): it says so and how to fix
// it, rather than failing every lab job for an hour.
func TestServeRefusesACacheTheSandboxCannotRead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give a folder to another user")
	}
	e := newServeEnv(t)
	kernel := filepath.Join(e.dir, "cache", "artifacts", "0123abcd")
	if err := os.MkdirAll(kernel, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(kernel, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	e.start()
	done := make(chan error, 1)
	go func() { done <- e.serve.Wait() }()
	select {
	case err := <-done:
		e.serve = nil
		if err == nil {
			t.Fatalf("serve exited 0:\n%s", e.log())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve still running after 60 s:\n%s", e.log())
	}
	if want := kernel + " belongs to uid 65534 (mode 0700), and serve runs as uid 0: QEMU's sandbox has no capabilities"; !strings.Contains(e.log(), want) {
		t.Fatalf("serve.log lacks %q:\n%s", want, e.log())
	}
}
