package pitest

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

func mail(n int) []byte {
	return []byte(fmt.Sprintf("From: Ann <ann@example.org>\r\nTo: linux-rdma@vger.kernel.org\r\n"+
		"Subject: [PATCH] note %d\r\nDate: Mon, 1 Jan 2024 10:%02d:00 +0000\r\nMessage-ID: <note%d@example.org>\r\n\r\nbody %d\r\n", n, n, n, n))
}

func get(t *testing.T, u string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// imapCount logs in and returns the mailbox's message count from STATUS.
func imapCount(t *testing.T, addr, mailbox string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	r.ReadString('\n')
	fmt.Fprintf(c, "a LOGIN anonymous anonymous\r\nb STATUS %s (MESSAGES)\r\n", mailbox)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(l, "* STATUS") {
			return strings.TrimSpace(l)
		}
		if strings.HasPrefix(l, "b ") {
			t.Fatalf("STATUS failed: %s", l)
		}
	}
}

func TestServer(t *testing.T) {
	srv := Start(t, Inbox{Name: "linux-rdma", Messages: [][]byte{mail(1), mail(2)}},
		Inbox{Name: "linux-nfs", Messages: [][]byte{mail(3)}})
	if !strings.HasPrefix(srv.HTTPURL, "http://127.0.0.1:") || !strings.HasPrefix(srv.IMAPAddr, "127.0.0.1:") {
		t.Fatalf("not on loopback: %s %s", srv.HTTPURL, srv.IMAPAddr)
	}
	resp, body := get(t, srv.InboxURL("linux-rdma")+"/note2@example.org/raw")
	if resp.StatusCode != 200 || !strings.Contains(string(body), "body 2") {
		t.Fatalf("raw: %s %q", resp.Status, body)
	}
	if got := imapCount(t, srv.IMAPAddr, srv.Mailbox("linux-rdma")); !strings.Contains(got, "MESSAGES 2") {
		t.Fatalf("imap: %s", got)
	}
	if got := imapCount(t, srv.IMAPAddr, srv.Mailbox("linux-nfs")); !strings.Contains(got, "MESSAGES 1") {
		t.Fatalf("imap: %s", got)
	}

	// A message added while the daemons run is served at once.
	srv.Add(t, "linux-rdma", mail(4))
	if got := imapCount(t, srv.IMAPAddr, srv.Mailbox("linux-rdma")); !strings.Contains(got, "MESSAGES 3") {
		t.Fatalf("imap after Add: %s", got)
	}
	resp, body = get(t, srv.InboxURL("linux-rdma")+"/note4@example.org/t.mbox.gz")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("t.mbox.gz: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	zr, err := gzip.NewReader(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	if mb, _ := io.ReadAll(zr); !strings.Contains(string(mb), "body 4") {
		t.Fatalf("thread mbox %q", mb)
	}

	// A restart keeps the ports and the mail.
	srv.Restart(t)
	if got := imapCount(t, srv.IMAPAddr, srv.Mailbox("linux-rdma")); !strings.Contains(got, "MESSAGES 3") {
		t.Fatalf("imap after Restart: %s", got)
	}

	// The git archive: 3 commits with m, then a removal with d.
	srv.Remove(t, "linux-rdma", mail(1))
	out, err := testenv.GitCmd("", nil, "--git-dir", srv.InboxDir("linux-rdma")+"/git/0.git",
		"log", "--format=%s", "--name-only").CombinedOutput()
	if err != nil {
		t.Fatalf("git log: %v %s", err, out)
	}
	if got := strings.Join(strings.Fields(string(out)), " "); got != "rm d m [PATCH] note 4 m [PATCH] note 2 m [PATCH] note 1 m" {
		t.Fatalf("git log: %s", got)
	}

	pids := []int{srv.daemons[0].cmd.Process.Pid, srv.daemons[1].cmd.Process.Pid}
	srv.Stop()
	srv.Stop()
	for _, d := range srv.daemons {
		select {
		case <-d.done:
		default:
			t.Fatalf("%s still running after Stop", d.name)
		}
	}
	if _, err := net.DialTimeout("tcp", srv.IMAPAddr, time.Second); err == nil {
		t.Fatalf("imapd (pid %v) still accepting after Stop", pids)
	}
}
