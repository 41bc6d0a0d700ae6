package feed

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Notifier is a Source that can tell when new mail arrives (IMAP IDLE).
type Notifier interface {
	// Wait blocks until the source may have mail after the checkpoint
	// `after` (nil), ctx ends (ctx.Err()), or it fails. ErrNoIdle means
	// it never can: poll.
	Wait(ctx context.Context, after string) error
}

// Clock is the time a Watcher sees; tests inject a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Watcher pumps its sources every Interval, and sooner when a Notifier
// source reports new mail. A failing source is retried with exponential
// backoff (Interval, 2x, 4x ... up to 16x) while the others go on; a bad
// message is logged and skipped by Pump. Run returns only when ctx ends.
type Watcher struct {
	Sources     []Source
	Checkpoints Checkpoints
	// Interval between polls; default 2 minutes.
	Interval time.Duration
	// MaxSize caps a message; default DefaultMaxSize.
	MaxSize int
	// Log receives progress, skipped mail and failures; nil discards.
	Log *slog.Logger
	// Clock defaults to the real one.
	Clock Clock
	// Passes, when set, receives the time each pass over the sources ends
	// (non-blocking send): tests and the dashboard watch progress with it.
	Passes chan<- time.Time

	mu     sync.Mutex
	totals map[string]PumpStats
}

// Totals returns, per source key, what every pump since Run started
// delivered, skipped and could not read: the dashboard shows them. It is
// safe to call while Run runs.
func (w *Watcher) Totals() map[string]PumpStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]PumpStats, len(w.totals))
	for k, v := range w.totals {
		out[k] = v
	}
	return out
}

func (w *Watcher) record(key string, st PumpStats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.totals == nil {
		w.totals = map[string]PumpStats{}
	}
	t := w.totals[key]
	t.Delivered += st.Delivered
	t.Skipped += st.Skipped
	t.Unreadable += st.Unreadable
	w.totals[key] = t
}

type sourceState struct {
	failures  int
	notBefore time.Time
	noIdle    bool
}

// Run watches until ctx ends and returns nil then.
func (w *Watcher) Run(ctx context.Context, consume func(context.Context, Item) error) error {
	clock := w.Clock
	if clock == nil {
		clock = realClock{}
	}
	log := w.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	interval := w.Interval
	if interval <= 0 {
		interval = 2 * time.Minute
	}
	state := make([]sourceState, len(w.Sources))
	for {
		for i, src := range w.Sources {
			st := &state[i]
			if clock.Now().Before(st.notBefore) {
				continue
			}
			stats, err := Pump(ctx, src, w.Checkpoints, PumpOptions{MaxSize: w.MaxSize, Log: log}, consume)
			if ctx.Err() != nil {
				return nil
			}
			w.record(src.Key(), stats)
			if err != nil {
				st.failures++
				backoff := interval << min(st.failures-1, 4)
				st.notBefore = clock.Now().Add(backoff)
				log.Error("feed: source failed; nothing acknowledged is lost, retrying later",
					"source", src.Key(), "err", err, "retry_in", backoff, "failures", st.failures)
				continue
			}
			st.failures, st.notBefore = 0, time.Time{}
			if stats.Delivered+stats.Skipped+stats.Unreadable > 0 {
				log.Info("feed: read mail", "source", src.Key(), "delivered", stats.Delivered, "skipped", stats.Skipped, "unreadable", stats.Unreadable)
			}
		}
		if w.Passes != nil {
			select {
			case w.Passes <- clock.Now():
			default:
			}
		}
		if !w.wait(ctx, clock, interval, state, log) {
			return nil
		}
	}
}

// wait sleeps one interval, or less when a notifier wakes it; false
// means ctx ended.
func (w *Watcher) wait(ctx context.Context, clock Clock, interval time.Duration, state []sourceState, log *slog.Logger) bool {
	wctx, cancel := context.WithCancel(ctx)
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for i, src := range w.Sources {
		n, ok := src.(Notifier)
		if !ok || state[i].noIdle || state[i].failures > 0 {
			continue
		}
		after, err := w.Checkpoints.Load(ctx, src.Key())
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Reconnect with backoff until the interval is over.
			for backoff := time.Second; ; backoff = min(2*backoff, interval) {
				err := n.Wait(wctx, after)
				switch {
				case err == nil:
					select {
					case wake <- struct{}{}:
					default:
					}
					return
				case errors.Is(err, ErrNoIdle):
					state[i].noIdle = true // read after wg.Wait
					log.Info("feed: source cannot push; polling it", "source", src.Key())
					return
				case wctx.Err() != nil:
					return
				}
				log.Warn("feed: waiting for new mail failed; reconnecting", "source", src.Key(), "err", err, "in", backoff)
				select {
				case <-clock.After(backoff):
				case <-wctx.Done():
					return
				}
			}
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	select {
	case <-clock.After(interval):
		return true
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}
