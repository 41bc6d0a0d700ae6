package outbox

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/pitest"
	"github.com/rdmabot/rdmabot/internal/smtptest"
	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/stats"
)

func TestSMTPTimeoutAndRefusals(t *testing.T) {
	// A server that accepts and never greets.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	e := &Entry{MessageID: "t@x", Envelope: []string{"a@b"}, Raw: []byte("x\n")}
	s := &SMTP{Addr: ln.Addr().String(), StartTLS: true, Timeout: 300 * time.Millisecond}
	start := time.Now()
	err = s.Send(context.Background(), e)
	if !errors.Is(err, ErrNotDelivered) || time.Since(start) > 5*time.Second {
		t.Errorf("silent server: %v after %v, want ErrNotDelivered soon after the timeout", err, time.Since(start))
	}
	var rej *Rejected
	s = &SMTP{Addr: "192.0.2.1:25", Timeout: time.Second} // never dialled
	if err := s.Send(context.Background(), e); !errors.As(err, &rej) {
		t.Errorf("plaintext to a remote server must be refused: %v", err)
	}
	ms := smtptest.Start(t, smtptest.Options{User: "rdmabot", Password: "s3cret"})
	s = &SMTP{Addr: ms.Addr, StartTLS: true, TLSConfig: ms.ClientTLS, User: "rdmabot", Password: "wrong", From: "r@x", Timeout: 5 * time.Second}
	if err := s.Send(context.Background(), e); !errors.As(err, &rej) {
		t.Errorf("bad password: want a rejection, got %v", err)
	}
	// The end of DATA answered: 4xx is "try again", 5xx is final.
	s.Password = "s3cret"
	ms.FailData(&smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"})
	if err := s.Send(context.Background(), e); !errors.Is(err, ErrNotDelivered) {
		t.Errorf("451 after DATA: want ErrNotDelivered, got %v", err)
	}
	ms.FailData(&smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "content rejected"})
	if err := s.Send(context.Background(), e); !errors.As(err, &rej) {
		t.Errorf("554 after DATA: want a rejection, got %v", err)
	}
}

// loadSeries reads the real svcrdma v2 thread from ../shared, or, when
// that is absent (a bare clone), writes a small series of the same shape.
func loadSeries(t *testing.T) [][]byte {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "corpus", "threads", "svcrdma-v2")
	files, _ := filepath.Glob(filepath.Join(dir, "*.eml"))
	sort.Strings(files)
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	if len(out) > 0 {
		return out
	}
	t.Logf("../shared absent: answering a made-up series")
	const cover = "cover.1@example.org"
	msg := func(n int, id, subject, body string) []byte {
		h := "From: Chuck Lever <cel@kernel.org>\nTo: linux-nfs@vger.kernel.org, linux-rdma@vger.kernel.org\n" +
			"Subject: " + subject + "\nDate: Sun, 04 Feb 2024 18:16:3" + strconv.Itoa(n) + " -0500\nMessage-ID: <" + id + ">\n"
		if id != cover {
			h += "In-Reply-To: <" + cover + ">\nReferences: <" + cover + ">\n"
		}
		return []byte(h + "MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n" + body)
	}
	return [][]byte{
		msg(1, cover, "[PATCH v2 0/2] svcrdma: two fixes", "Two fixes.\n"),
		msg(2, "patch.1@example.org", "[PATCH v2 1/2] svcrdma: one", "diff --git a/x b/x\n"),
		msg(3, "patch.2@example.org", "[PATCH v2 2/2] svcrdma: two", "diff --git a/y b/y\n"),
	}
}

func threadOf(t *testing.T, cover []byte) reports.Thread {
	m, err := mail.ReadMessage(bytes.NewReader(cover))
	if err != nil {
		t.Fatal(err)
	}
	from, _ := mail.ParseAddress(m.Header.Get("From"))
	id := strings.Trim(strings.TrimSpace(m.Header.Get("Message-Id")), "<>")
	var lists []string
	for _, h := range []string{"To", "Cc"} {
		as, _ := m.Header.AddressList(h)
		for _, a := range as {
			lists = append(lists, a.Address)
		}
	}
	return reports.Thread{Subject: m.Header.Get("Subject"), MessageID: id, Author: reports.Address{Name: from.Name, Email: from.Address},
		Lists: lists, Version: 2, LoreURL: "https://lore.kernel.org/r/" + id}
}

// TestReplyReachesListThreaded sends a regression reply through the
// outbox and a real SMTP server (STARTTLS, AUTH), imports what the
// server received into a real public-inbox next to the series, and
// checks that the archive threads it under the cover letter.
func TestReplyReachesListThreaded(t *testing.T) {
	series := loadSeries(t)
	thread := threadOf(t, series[0])
	ms := smtptest.Start(t, smtptest.Options{User: "rdmabot", Password: "s3cret"})

	cfg := reports.DefaultConfig()
	cfg.From = "rdmabot <rdmabot@rdmabot.example.org>"
	cfg.ArchiveList = "rdmabot-reports@lists.example.org"
	rng := mrand.New(mrand.NewPCG(1, 2))
	base, cand := make([][]float64, 10), make([][]float64, 10)
	for i := range base {
		base[i] = []float64{16.4 + 0.1*rng.NormFloat64()}
		cand[i] = []float64{15.0 + 0.1*rng.NormFloat64()}
	}
	in := &reports.Input{Thread: thread, Base: reports.Base{Tree: "nfsd", Branch: "nfsd-next", SHA: "5d5bd0ab7e3e4c2f", Reason: "subject tag"},
		Metrics: []stats.Metric{{Name: "write", Unit: "MB/s", HigherIsBetter: true, Base: base, Cand: cand}}}
	v := reports.Judge(rng, cfg.Policy(), in)
	if v.Outcome != flow.Regression {
		t.Fatalf("fixture judged %v", v.Outcome)
	}
	now := time.Date(2026, 11, 30, 4, 5, 6, 0, time.UTC)
	id, _ := reports.NewMessageID(now, rng, cfg.From)
	m, err := reports.RenderEmail(&cfg, &v, id, now)
	if err != nil {
		t.Fatal(err)
	}
	r := FromMail(m, thread)
	if r.Undeliverable != "" {
		t.Fatal(r.Undeliverable)
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	sender := &SMTP{Addr: ms.Addr, StartTLS: true, TLSConfig: ms.ClientTLS, User: "rdmabot", Password: "s3cret",
		From: "rdmabot@rdmabot.example.org", Timeout: 10 * time.Second}
	o := newOutbox(t, db, t.TempDir(), Policy{Send: true, DailyLimit: 10, Self: cfg.From}, sender, &clock{t: now})
	ctx := context.Background()
	if _, err := o.Enqueue(ctx, r); err != nil {
		t.Fatal(err)
	}
	if n, err := o.Deliver(ctx); n != 1 || err != nil {
		t.Fatalf("deliver: %d %v", n, err)
	}
	if n, _ := o.Deliver(ctx); n != 0 {
		t.Fatal("sent twice")
	}
	got := ms.Messages()
	if len(got) != 1 || !got[0].TLS || got[0].From != "rdmabot@rdmabot.example.org" {
		t.Fatalf("server received %d messages (tls=%v)", len(got), len(got) > 0 && got[0].TLS)
	}
	want := []string{"cel@kernel.org", "linux-nfs@vger.kernel.org", "linux-rdma@vger.kernel.org", "rdmabot-reports@lists.example.org"}
	if strings.Join(got[0].To, ",") != strings.Join(want, ",") {
		t.Errorf("envelope %v, want %v", got[0].To, want)
	}
	rcvd := bytes.ReplaceAll(got[0].Data, []byte("\r\n"), []byte("\n"))

	srv := pitest.Start(t, pitest.Inbox{Name: "linux-rdma", Messages: series})
	srv.Add(t, "linux-rdma", rcvd)
	resp, err := http.Get(srv.InboxURL("linux-rdma") + "/" + thread.MessageID + "/t.mbox.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("thread mbox: %s", resp.Status)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	mbox, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(mbox, []byte("Message-ID: <"+id+">")) {
		t.Fatalf("the reply is not in the series' thread on the archive (%d bytes of thread)", len(mbox))
	}
	// The thread overview nests the reply under the cover letter.
	page, err := http.Get(srv.InboxURL("linux-rdma") + "/" + id + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer page.Body.Close()
	html, _ := io.ReadAll(page.Body)
	if page.StatusCode != 200 || !bytes.Contains(html, []byte(thread.MessageID)) {
		t.Errorf("the reply's page does not link its parent (%s)", page.Status)
	}
}
