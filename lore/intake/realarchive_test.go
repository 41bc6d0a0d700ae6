package intake

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/lore"
)

// A real series (Chuck Lever's svcrdma v2, 12 patches and a cover) read
// from an mbox as `rdmabot test --mbox` does.
func TestReadMboxRealSeries(t *testing.T) {
	sh := testenv.Shared(t, "the real threads live there")
	l := newReader(lore.DefaultConfig(), newMemStore(), slog.New(slog.DiscardHandler))
	s, err := l.ReadMbox(context.Background(), testenv.Mbox(t, filepath.Join(sh, "corpus", "threads", "svcrdma-v2")))
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 2 || len(s.Patches) < 2 || s.Cover == nil || s.MsgID == "" || len(s.Changes) == 0 || len(s.Files) == 0 {
		t.Fatalf("series: v%d, %d patches, cover %v, id %q, %d changes, files %v", s.Version, len(s.Patches), s.Cover != nil, s.MsgID, len(s.Changes), s.Files)
	}
	t.Logf("%q v%d: %d patches", s.Subject, s.Version, len(s.Patches))
}

// Polling the real 2024 linux-rdma archive stores every message, finds
// the relevant complete series of the window, and a second poll finds
// the same ones without reading the archive again.
func TestPollRealArchive(t *testing.T) {
	sh := testenv.Shared(t, "the real archives live there")
	if testing.Short() {
		t.Skip("-short: reads a year of linux-rdma")
	}
	cfg := lore.DefaultConfig()
	cfg.Lists = cfg.Lists[:1]
	cfg.Lists[0].URL = filepath.Join(sh, "corpus", "linux-rdma-2024.git")
	ctx := context.Background()
	st := newMemStore()
	l := newReader(cfg, st, slog.New(slog.DiscardHandler))
	l.DataDir = t.TempDir()
	l.Now = func() time.Time { return time.Date(2024, 12, 31, 0, 0, 0, 0, time.UTC) }
	l.Window = 21 * 24 * time.Hour
	start := time.Now()
	first, err := l.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	mail, _ := st.MailSince(ctx, time.Time{})
	if len(mail) < 6000 {
		t.Fatalf("%d messages stored, want the whole archive", len(mail))
	}
	if len(first) == 0 {
		t.Fatal("no relevant series in the last three weeks of 2024")
	}
	second, err := l.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != len(first) {
		t.Fatalf("second poll found %d series, first %d", len(second), len(first))
	}
	again, _ := st.MailSince(ctx, time.Time{})
	if len(again) != len(mail) {
		t.Fatalf("second poll stored %d more messages", len(again)-len(mail))
	}
	t.Logf("%d messages in %v; %d relevant complete series in the window, e.g. %q", len(mail), took.Round(time.Millisecond), len(first), first[0].Subject)
	// A command naming one of them finds it in the stored mail (the list
	// is a local archive: nothing to fetch over HTTP).
	got, err := l.Fetch(ctx, "<"+first[0].MsgID+">")
	if err != nil {
		got, err = l.Fetch(ctx, first[0].RootMail().MessageID)
	}
	if err != nil || got.Subject != first[0].Subject || len(got.Patches) != len(first[0].Patches) {
		t.Fatalf("fetch from stored mail: %q %v", got.Subject, err)
	}
}
