package bot

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Trace is a job's log, stored line by line as it is written so that a
// crash keeps everything up to the crash. Stages get it as an io.Writer.
type Trace struct {
	ctx   context.Context
	b     *Bot
	jobID int64
	mu    sync.Mutex
	buf   []byte
	// held are the lines kept back while holding (hold): stored by
	// release, or dropped by a wait that only repeats the last one.
	held    []string
	holding bool
}

func (b *Bot) newTrace(ctx context.Context, jobID int64) *Trace {
	// A cancelled job still gets its last lines stored.
	return &Trace{ctx: context.WithoutCancel(ctx), b: b, jobID: jobID}
}

// Write stores each complete line.
func (t *Trace) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	i := bytes.LastIndexByte(t.buf, '\n')
	if i < 0 {
		return len(p), nil
	}
	lines := strings.Split(string(t.buf[:i]), "\n")
	t.buf = append(t.buf[:0], t.buf[i+1:]...)
	t.store(lines)
	return len(p), nil
}

// Logf writes one line.
func (t *Trace) Logf(format string, args ...any) {
	fmt.Fprintf(t, format+"\n", args...)
}

// Close stores a trailing partial line.
func (t *Trace) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > 0 {
		t.store([]string{string(t.buf)})
		t.buf = t.buf[:0]
	}
}

// hold keeps the lines back until release: a job that may find the lab
// pair busy and wait writes its trace once, not once per look.
func (t *Trace) hold() {
	t.mu.Lock()
	t.holding = true
	t.mu.Unlock()
}

// release stores the lines held back and every later one as it comes.
func (t *Trace) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.holding = false
	if len(t.held) > 0 {
		t.store(t.held)
		t.held = nil
	}
}

// dropRepeat drops the lines held back when they end as the job's
// stored trace does: another look at a busy pair, said already.
func (t *Trace) dropRepeat() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.holding || len(t.held) == 0 {
		return
	}
	last, err := t.b.st.LastTraceLine(t.ctx, t.jobID)
	if err == nil && last == t.held[len(t.held)-1] {
		t.held = nil
	}
}

func (t *Trace) store(lines []string) {
	if t.holding {
		t.held = append(t.held, lines...)
		return
	}
	if err := t.b.st.AppendTrace(t.ctx, t.jobID, lines...); err != nil {
		// The trace is for people; losing a line must not fail a build.
		t.b.log.Warn("trace lost lines", "job", t.jobID, "lines", len(lines), "err", err)
	}
	for _, l := range lines {
		t.b.log.Debug(l, slog.Int64("job", t.jobID))
	}
}
