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

func (t *Trace) store(lines []string) {
	if err := t.b.st.AppendTrace(t.ctx, t.jobID, lines...); err != nil {
		// The trace is for people; losing a line must not fail a build.
		t.b.log.Warn("trace lost lines", "job", t.jobID, "lines", len(lines), "err", err)
	}
	for _, l := range lines {
		t.b.log.Debug(l, slog.Int64("job", t.jobID))
	}
}
