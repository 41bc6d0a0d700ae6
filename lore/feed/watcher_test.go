package feed

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log sink shared by the watcher goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A failing source backs off without holding the others up; bad mail is
// logged with its reason and skipped; nothing stalls.
func TestWatcherFailuresAndBadMail(t *testing.T) {
	emlDir := t.TempDir()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	writeAged(t, filepath.Join(emlDir, "1.eml"), "Subject: good\n\n", t0)
	writeAged(t, filepath.Join(emlDir, "2.eml"), "Subject: unparseable\n\n", t0)
	writeAged(t, filepath.Join(emlDir, "3.eml"), "Subject: huge\n\n"+strings.Repeat("x", 4096), t0)
	writeAged(t, filepath.Join(emlDir, "4.eml"), "Subject: after\n\n", t0)
	gitDir := filepath.Join(t.TempDir(), "0.git") // not there yet

	var logs syncBuffer
	clock := newFakeClock()
	passes := make(chan time.Time, 10)
	w := &Watcher{
		Sources: []Source{
			&Git{List: "linux-rdma", Dir: gitDir},
			&EMLDir{List: "linux-nfs", Dir: emlDir},
		},
		Checkpoints: &MemCheckpoints{},
		Interval:    time.Minute,
		MaxSize:     1024,
		Clock:       clock,
		Passes:      passes,
		Log:         slog.New(slog.NewTextHandler(&logs, nil)),
	}
	c := newSyncCollector()
	consume := func(ctx context.Context, it Item) error {
		if subjectOf(it.Raw) == "unparseable" {
			return Skip(errors.New("no From header"))
		}
		return c.consume(ctx, it)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx, consume) }()

	<-passes
	same(t, "first pass", c.take(), []string{"good", "after"})
	for _, want := range []string{"source failed", "neither a public-inbox directory nor a git repository",
		"reason=\"skipped bad message: no From header\"", "over the 1024 byte cap"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, logs.String())
		}
	}

	// The archive appears; the failed source is retried after its backoff.
	a := newArchive(t, gitDir)
	a.add(1)
	clock.waitForWaiters(t, 1)
	clock.Advance(time.Minute)
	<-passes
	same(t, "retry", c.take(), []string{"message 1"})

	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
