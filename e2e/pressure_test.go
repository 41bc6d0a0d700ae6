package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/wire"
)

// The seed regression's mechanism, caught on the list: a 6.12 port of
// bug 218743's double credit of Write chunk Send Queue entries
// (examples/seeded/sq-double-credit.mbox) is posted while serve runs with
// config.toml's Send Queue pressure profile. The default test cannot see
// it (it was answered PASS before the profile existed); under pressure
// the provider refuses Sends, the transport reconnects and teardown
// warns in the drain, none of which the base shows. The reply names the
// profile and the evidence, and no default boot was needed.
//
// Only rxe runs here (config.toml has rxe and siw; each catches it,
// lab/PRESSURE.md): one provider keeps the scenario to a few minutes of
// CI's hour.
func TestPressureCatchesDoubleCredit(t *testing.T) {
	m := needMachine(t)
	b := startBot(t, m, func(c *wire.Config) { c.Lab.Pressure.Providers = []string{"rxe"} })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := b.postSeeded(ctx, "sq-double-credit.mbox")

	outcome := r.Header.Get("X-Rdmabot-Outcome")
	flat := strings.Join(strings.Fields(r.Body), " ")
	// Which of the two decides depends on whether teardown warned in
	// this boot (it did in every one measured): a WARN is a CRASH, the
	// refused Sends alone a REGRESSION. Both are the bug caught.
	switch outcome {
	case "CRASH":
		if !strings.Contains(flat, "booted with Send Queue pressure on rxe") {
			t.Errorf("the crash reply does not say it showed under pressure:\n%s", r.Body)
		}
	case "REGRESSION":
		if !strings.Contains(flat, "noticed transport errors with this series under Send Queue pressure (rxe under TCG") {
			t.Errorf("the regression reply does not say the pressure profile decided:\n%s", r.Body)
		}
	default:
		t.Fatalf("outcome %s, want CRASH or REGRESSION: the double credit went unseen\n%s", outcome, r.Body)
	}
	for _, want := range []string{"Under Send Queue pressure (rxe under TCG", "Sends refused: Send Queue full", "Write chunk segments (client)",
		"Reported-by:", "under Send Queue pressure (rxe under TCG; 24 O_DIRECT 1 MiB readers"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the reply does not say %q", want)
		}
	}
	// The evidence is the candidate's alone: a base row of zeros.
	if row := regexp.MustCompile(`Sends refused: Send Queue full +0 in 0/1 boots +([0-9]+) in 1/1 boots`).FindStringSubmatch(r.Body); row == nil || row[1] == "0" {
		t.Errorf("the pressure table does not show refused Sends in the patched boot alone:\n%s", r.Body)
	}
	// Decided by the profile: no default boot of the candidate.
	for _, tv := range b.tests(t) {
		for _, j := range tv.Jobs {
			t.Logf("test %d: %s job %.0f s", tv.ID, j.Kind, j.Took)
		}
	}
}

// postSeeded posts examples/seeded/name (one patch) and waits for the
// reply in its thread: the mbox's From line off, and dated now, as the
// list would have it when it is posted (the watcher reads recent mail).
func (b *bot) postSeeded(ctx context.Context, name string) reply {
	t := b.t
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root(t), "examples", "seeded", name))
	if err != nil {
		t.Fatal(err)
	}
	msg := raw[bytes.IndexByte(raw, '\n')+1:]
	msg = regexp.MustCompile(`(?m)^Date: .*$`).ReplaceAll(msg, []byte("Date: "+time.Now().UTC().Format(time.RFC1123Z)))
	start := time.Now()
	b.post(msg)
	r := b.waitReply(ctx, messageID(t, msg))
	t.Logf("reply %s after posting %s:\n%s", time.Since(start).Round(time.Second), name, r)
	return r
}
