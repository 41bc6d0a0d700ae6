package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The real binary: `rdmabot serve` on SQLite, `rdmabot test --mbox`
// queueing a real series from another process, kill -9 of the server
// and a restart; the series ends once (here: no tree is imported, so no
// base is found: the operator's gap, INFRA after max_attempts, and no
// reply blaming the author), and `rdmabot status` and the dashboard show it.
func TestServeKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs the binary")
	}
	threads := filepath.Join("..", "..", "..", "shared", "corpus", "threads", "svcrdma-v2")
	emls, _ := filepath.Glob(filepath.Join(threads, "*.eml"))
	if len(emls) == 0 {
		t.Skip("../shared absent: the svcrdma v2 thread lives there")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "rdmabot")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// An mbox of the thread.
	sort.Strings(emls)
	var mbox strings.Builder
	for _, f := range emls {
		b, _ := os.ReadFile(f)
		mbox.WriteString("From rdmabot@example Mon Jan  1 00:00:00 2024\n")
		for _, l := range strings.SplitAfter(string(b), "\n") {
			if strings.HasPrefix(strings.TrimLeft(l, ">"), "From ") {
				mbox.WriteString(">")
			}
			mbox.WriteString(l)
		}
		mbox.WriteString("\n")
	}
	os.WriteFile(filepath.Join(dir, "series.mbox"), []byte(mbox.String()), 0o644)

	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	cfg, err := os.ReadFile(filepath.Join("..", "..", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	c := strings.NewReplacer(
		`data_dir = "/var/lib/rdmabot"`, fmt.Sprintf("data_dir = %q", filepath.Join(dir, "data")),
		`cache_dir = "/var/cache/rdmabot"`, fmt.Sprintf("cache_dir = %q", filepath.Join(dir, "cache")),
		`listen = "127.0.0.1:8480"`, fmt.Sprintf("listen = %q", addr),
		`url = "http://127.0.0.1:8480"`, fmt.Sprintf("url = %q", "http://"+addr),
		`url = "https://lore.kernel.org/linux-rdma"`, fmt.Sprintf("url = %q", filepath.Join(dir, "no-inbox")),
		`url = "https://lore.kernel.org/linux-nfs"`, fmt.Sprintf("url = %q", filepath.Join(dir, "no-inbox")),
		`max_attempts = 8`, `max_attempts = 2`,
	).Replace(string(cfg))
	config := filepath.Join(dir, "config.toml")
	os.WriteFile(config, []byte(c), 0o644)

	var serve *exec.Cmd
	start := func() {
		serve = exec.Command(bin, "serve", "-config", config, "-id", "test-server")
		logf, _ := os.OpenFile(filepath.Join(dir, "serve.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		serve.Stdout, serve.Stderr = logf, logf
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close()
	}
	kill := func() {
		serve.Process.Signal(syscall.SIGKILL)
		serve.Wait()
	}
	rdmabot := func(args ...string) string {
		// Flags follow the subcommand (and the outbox verb).
		n := 1
		if args[0] == "outbox" {
			n = 2
		}
		full := append(append(append([]string{}, args[:n]...), "-config", config), args[n:]...)
		out, err := exec.Command(bin, full...).CombinedOutput()
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
			t.Fatalf("rdmabot %v: %v\n%s\nserve.log:\n%s", args, err, out, b)
		}
		return string(out)
	}
	start()
	defer func() { kill() }()
	if out := rdmabot("test", "--mbox", filepath.Join(dir, "series.mbox")); !strings.Contains(out, "test 1: http://"+addr+"/tests/1") {
		t.Fatalf("test: %s", out)
	}
	kill()
	start()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(rdmabot("status"), "INFRA: base job") {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
			t.Fatalf("no verdict\n%s", b)
		}
		time.Sleep(300 * time.Millisecond)
	}
	kill()
	start()
	// Queued again: the same series is not tested twice.
	if out := rdmabot("test", "--mbox", filepath.Join(dir, "series.mbox")); !strings.Contains(out, "already queued or tested: test 1") {
		t.Fatalf("second test: %s", out)
	}
	if out := rdmabot("status"); !strings.Contains(out, "failed") || !strings.Contains(out, "none of the configured branches is in the store") {
		t.Errorf("status does not say why the test failed:\n%s", out)
	}
	// The lists and trees it cannot reach (no inbox here, no network) are
	// shown, each failing on its own; the test went on regardless.
	for out := ""; !strings.Contains(out, "list linux-rdma") || !strings.Contains(out, "tree mainline") || !strings.Contains(out, "failing ("); out = rdmabot("status") {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
			t.Fatalf("status does not show the failing sources:\n%s\n%s", out, b)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if out := rdmabot("outbox", "list", "-all"); strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("a reply was queued for the operator's gap:\n%s", out)
	}
	var resp *http.Response
	for range 50 {
		if resp, err = http.Get("http://" + addr + "/tests/1"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("dashboard: %v %v", resp, err)
	}
	resp.Body.Close()
}

// The server bounds a whole request and answer, not only the header: a
// body that never comes ends the request at the read timeout, an answer
// that trickles is cut at the write timeout, and artifact downloads get
// their own, longer one.
func TestServerTimeouts(t *testing.T) {
	srv := newServer(http.NewServeMux(), timeouts)
	if srv.ReadHeaderTimeout == 0 || srv.ReadTimeout == 0 || srv.WriteTimeout == 0 || srv.IdleTimeout == 0 || timeouts.artifact <= srv.WriteTimeout {
		t.Fatalf("timeouts: %+v, artifacts %v", srv, timeouts.artifact)
	}
	short := serverTimeouts{header: time.Second, read: 200 * time.Millisecond, write: 300 * time.Millisecond, idle: time.Second}
	trickle := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 6 {
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	})
	read := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /body", func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		read <- err
	})
	mux.Handle("GET /trickle", trickle)
	mux.Handle("GET /artifacts/", longWrite(trickle, 5*time.Second))
	s := newServer(mux, short)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	base := "http://" + ln.Addr().String()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nonly this")
	select {
	case err := <-read:
		if err == nil {
			t.Error("a body that never came was read whole")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a body that never comes holds the handler past the read timeout")
	}
	get := func(path string) (int, error) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return len(b), err
	}
	if n, err := get("/trickle"); err == nil && n == 6 {
		t.Error("an answer outlived the write timeout")
	}
	if n, err := get("/artifacts/x.tar"); err != nil || n != 6 {
		t.Errorf("artifact download cut: %d bytes, %v", n, err)
	}
}
