package bot_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/cfgtype"
	"github.com/rdmabot/rdmabot/internal/fakestage"
)

// watchedIngest is a fake lists' reader whose local inbox says what it
// holds unread, as intake.Reader.UnreadLocal does.
type watchedIngest struct {
	*fakestage.Ingest
	mu     sync.Mutex
	unread []string
	err    error
	block  chan struct{} // a poll waits for it to close, when set
}

func (w *watchedIngest) Poll(ctx context.Context) ([]flow.Series, error) {
	w.mu.Lock()
	block := w.block
	w.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return w.Ingest.Poll(ctx)
}

func (w *watchedIngest) UnreadLocal(context.Context) ([]string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.unread...), w.err
}

func (w *watchedIngest) set(err error, unread ...string) {
	w.mu.Lock()
	w.unread, w.err = unread, err
	w.mu.Unlock()
}

// watchedHarness is a bot whose lists are polled every hour, and at once
// when its watched inbox says it holds unread mail; polls counts the
// polls, the one at start done.
func watchedHarness(t *testing.T) (*harness, *watchedIngest, func() int) {
	t.Helper()
	cfg := testConfig()
	cfg.IngestInterval = cfgtype.D(time.Hour)
	var w *watchedIngest
	h := newHarnessWith(t, cfg, "", "", func(o *bot.Options) {
		w = &watchedIngest{Ingest: o.Stages.Ingest.(*fakestage.Ingest)}
		o.Stages.Ingest = w
		o.MailWatch = 50 * time.Millisecond
	})
	polls := func() int { return h.calls.Count("poll 0") + h.calls.Count("poll 1") }
	h.wait("the poll at start", 10*time.Second, func() bool { return polls() == 1 })
	return h, w, polls
}

// A posting to a local inbox is polled within the mail watch, not at
// the next periodic poll (an hour here); mail a poll left unread starts
// no second poll until newer mail comes; a watch that fails polls
// nothing.
func TestMailWatchPollsAtOnce(t *testing.T) {
	h, w, polls := watchedHarness(t)

	w.set(errors.New("inbox unreadable"))
	time.Sleep(300 * time.Millisecond)
	if n := polls(); n != 1 {
		t.Fatalf("a failing watch polled: %d polls", n)
	}

	h.ingest.Add(series("<local@x>", "[PATCH] svcrdma: harmless"))
	w.set(nil, "local 0:aaaa")
	h.wait("the posting polled", 10*time.Second, func() bool { return h.calls.Count("poll 1") == 1 })
	h.wait("its verdict", 60*time.Second, func() bool { return h.report.Count() == 1 })

	// Still unread after its poll (the reader passed over it): no more
	// polls for it.
	n := polls()
	time.Sleep(500 * time.Millisecond)
	if polls() != n {
		t.Fatalf("the same unread mail polled again: %d polls, %d before", polls(), n)
	}
	w.set(nil, "local 0:bbbb")
	h.wait("newer mail polled", 10*time.Second, func() bool { return polls() == n+1 })
}

// Mail that comes while a poll runs is not taken as read by it: the
// watch finds a poll queued or running (River's unique insert skips its
// own), and polls again once that one is done.
func TestMailWatchPollsAgainAfterARunningPoll(t *testing.T) {
	h, w, polls := watchedHarness(t)
	block := make(chan struct{})
	w.mu.Lock()
	w.block = block
	w.mu.Unlock()
	w.set(nil, "local 0:aaaa")
	time.Sleep(300 * time.Millisecond) // the watch queues a poll; it runs and waits
	w.set(nil, "local 0:bbbb")         // mail the running poll may not have read
	time.Sleep(300 * time.Millisecond)
	w.mu.Lock()
	w.block = nil
	w.mu.Unlock()
	close(block)
	h.wait("a poll after the running one", 10*time.Second, func() bool { return polls() == 3 })
	time.Sleep(300 * time.Millisecond)
	if n := polls(); n != 3 {
		t.Fatalf("%d polls, want 3: the one at start, the one for aaaa, one for bbbb", n)
	}
}
