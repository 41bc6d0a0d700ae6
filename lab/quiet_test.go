package lab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeHost is a /proc/stat whose busy time grows by the given cores for
// each second a fake clock sleeps.
type fakeHost struct {
	cores   []float64 // per second slept; the last repeats
	busy    float64   // seconds of CPU
	now     time.Time
	slept   int
	readErr error
	niced   bool // the busy time is niced programs'
}

func (h *fakeHost) read() ([]byte, error) {
	if h.readErr != nil {
		return nil, h.readErr
	}
	ticks := int64(h.busy * clockTicks)
	if h.niced {
		return fmt.Appendf(nil, "cpu  0 %d 0 0 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n", ticks), nil
	}
	return fmt.Appendf(nil, "cpu  %d 0 0 0 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n", ticks), nil
}

func (h *fakeHost) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := h.cores[min(h.slept, len(h.cores)-1)]
	h.slept++
	h.busy += c * d.Seconds()
	h.now = h.now.Add(d)
	return nil
}

func (h *fakeHost) clock() time.Time { return h.now }

// A boot waits for other programs to leave the host's CPUs: at once on an
// idle host, three quiet looks in a row after a neighbour was seen, at
// most the configured wait, never on an unreadable host, and not past
// the job's end.
func TestWaitQuiet(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		cores  []float64
		waited time.Duration
		quiet  bool
	}{
		{"idle", []float64{0.02}, time.Second, true},
		{"a neighbour for 4 s", []float64{1, 1, 1, 1, 0.1}, 7 * time.Second, true},
		{"a pause is not the end", []float64{1, 0, 0, 1, 0}, 7 * time.Second, true},
		{"at the limit is quiet", []float64{0.3}, time.Second, true},
		{"busy throughout", []float64{1.5}, 10 * time.Second, false},
	} {
		h := &fakeHost{cores: c.cores, now: time.Unix(1e9, 0)}
		waited, quiet, err := waitQuiet(ctx, h.read, h.clock, h.sleep, 0.3, 10*time.Second)
		if err != nil || waited != c.waited || quiet != c.quiet {
			t.Errorf("%s: waited %s quiet %v (%v), want %s %v", c.name, waited, quiet, err, c.waited, c.quiet)
		}
	}

	h := &fakeHost{cores: []float64{2}, niced: true, now: time.Unix(1e9, 0)}
	if waited, quiet, err := waitQuiet(ctx, h.read, h.clock, h.sleep, 0.3, time.Minute); waited != time.Second || !quiet || err != nil {
		t.Errorf("a niced neighbour: waited %s quiet %v %v, want no wait (it takes only idle time)", waited, quiet, err)
	}

	h = &fakeHost{cores: []float64{2}, readErr: errors.New("no /proc")}
	if waited, quiet, err := waitQuiet(ctx, h.read, h.clock, h.sleep, 0.3, time.Minute); waited != 0 || !quiet || err != nil {
		t.Errorf("unreadable host: waited %s quiet %v %v, want no wait", waited, quiet, err)
	}
	h = &fakeHost{cores: []float64{2}}
	n := 0
	flaky := func() ([]byte, error) {
		if n++; n > 2 {
			return nil, errors.New("gone")
		}
		return h.read()
	}
	if waited, quiet, err := waitQuiet(ctx, flaky, h.clock, h.sleep, 0.3, time.Minute); waited != 2*time.Second || !quiet || err != nil {
		t.Errorf("host unreadable while waiting: waited %s quiet %v %v, want the wait to end", waited, quiet, err)
	}
	h = &fakeHost{cores: []float64{2}}
	if _, _, err := waitQuiet(ctx, func() ([]byte, error) { return []byte("intr 1\n"), nil }, h.clock, h.sleep, 0.3, time.Minute); err != nil {
		t.Errorf("a /proc/stat without a cpu line: %v, want no wait", err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	h = &fakeHost{cores: []float64{2}}
	if _, quiet, err := waitQuiet(cancelled, h.read, h.clock, h.sleep, 0.3, time.Minute); quiet || !errors.Is(err, context.Canceled) {
		t.Errorf("stopped job: quiet %v %v, want context.Canceled", quiet, err)
	}

	if err := sleepCtx(cancelled, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("sleepCtx on an ended context: %v", err)
	}
	if err := sleepCtx(ctx, time.Millisecond); err != nil {
		t.Errorf("sleepCtx: %v", err)
	}
}

// On the real pair, with a real neighbour spinning on the host for a few
// seconds: the boot starts only once the neighbour is gone, and its
// result says how long it waited.
func TestPairWaitsForQuietHost(t *testing.T) {
	p, pids := testPair(t)
	p.cfg.QuietWait.Duration = time.Minute
	spin := exec.Command("sh", "-c", "while :; do :; done")
	spin.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	// The spinner outlives the boot's preparation (fresh test data, the
	// heavy lock), which takes seconds of its own on a loaded machine, so
	// the wait is sure to see it.
	const spinFor = 8 * time.Second
	var mu sync.Mutex
	var spinEnded time.Time
	stop := time.AfterFunc(spinFor, func() {
		syscall.Kill(-spin.Process.Pid, syscall.SIGKILL)
		mu.Lock()
		spinEnded = time.Now()
		mu.Unlock()
	})
	defer func() {
		stop.Stop()
		syscall.Kill(-spin.Process.Pid, syscall.SIGKILL)
		spin.Wait()
	}()
	var firstGuest time.Time
	started := p.hooks.started
	p.hooks.started = func(role string, pid int) {
		if firstGuest.IsZero() {
			firstGuest = time.Now()
		}
		started(role, pid)
	}
	res, err := p.Run(context.Background(), testKernel(t), DefaultTest())
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ended := spinEnded
	mu.Unlock()
	// Once a neighbour is seen the host must be quiet for quietSamples
	// looks in a row; an idle host boots after one.
	if res.QuietWait < quietSamples || res.QuietWait > 30 {
		t.Errorf("waited %.1f s for a quiet host, want at least %d s (a neighbour seen, then quiet looks)", res.QuietWait, quietSamples)
	}
	if ended.IsZero() || firstGuest.Sub(ended) < (quietSamples-1)*time.Second {
		t.Errorf("the first guest started %s after the neighbour left (at %v), want at least %d s of quiet first", firstGuest.Sub(ended), ended, quietSamples-1)
	}
	noSurvivors(t, *pids)
}
