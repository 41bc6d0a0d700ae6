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

// The lab profiles, each caught on the list by a seeded bug of the class
// it is for, posted while one serve runs with config.toml's profiles
// (only rxe for the pressure profile: config.toml has rxe and siw, and
// each catches its bug, lab/PRESSURE.md; one provider keeps the scenario
// to a few minutes of CI's hour). Neither bug shows in the default test
// as the bot boots it for these series: each was answered PASS before
// its profile existed.
func TestProfilesCatchSeededBugs(t *testing.T) {
	m := needMachine(t)
	b := startBot(t, m, func(c *wire.Config) { c.Lab.Pressure.Providers = []string{"rxe"} })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	credit, sg := b.postSeeded("sq-double-credit.mbox"), b.postSeeded("sg-coalesce.mbox")
	creditReply, sgReply := b.waitSeeded(ctx, credit), b.waitSeeded(ctx, sg)
	t.Run("pressure", func(t *testing.T) { pressureCaught(t, creditReply) })
	t.Run("client-side", func(t *testing.T) { clientSideCaught(t, sgReply) })
	for _, tv := range b.tests(t) {
		for _, j := range tv.Jobs {
			t.Logf("test %d (%s): %s job %.0f s", tv.ID, tv.Subject, j.Kind, j.Took)
		}
	}
}

// pressureCaught checks the reply to the seed regression's mechanism: a
// 6.12 port of bug 218743's double credit of Write chunk Send Queue
// entries (examples/seeded/sq-double-credit.mbox). Under pressure the
// provider refuses Sends, the transport reconnects and teardown warns in
// the drain, none of which the base shows. The reply names the profile
// and the evidence, and no default boot was needed.
func pressureCaught(t *testing.T, r reply) {
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
	// The evidence is the candidate's alone: a base row of zeros. The
	// patched kernel's crash in its one boot under pressure was booted
	// once more to confirm it: both boots counted.
	if row := regexp.MustCompile(`Sends refused: Send Queue full +0 in 0/1 boots +([0-9]+) in 2/2 boots`).FindStringSubmatch(r.Body); row == nil || row[1] == "0" {
		t.Errorf("the pressure table does not show refused Sends in the patched boot alone:\n%s", r.Body)
	}
}

// clientSideCaught checks the reply to an ib_core bug only a client
// runs (examples/seeded/sg-coalesce.mbox: ib_sg_to_pages leaves
// contiguous pages out of an FRWR registration, which on rxe only the
// NFS/RDMA client makes). The series boots on the server by default,
// where it passed (3 boots each, copy -1.5 %, 2026-12-05); on the client,
// beside the base kernel on the server, rxe warns in rxe_mr_copy and the
// client's writeback hangs.
func clientSideCaught(t *testing.T, r reply) {
	if outcome := r.Header.Get("X-Rdmabot-Outcome"); outcome != "CRASH" && outcome != "DATA_CORRUPTION" {
		t.Fatalf("outcome %s, want CRASH or DATA_CORRUPTION: the client-side bug went unseen\n%s", outcome, r.Body)
	}
	flat := strings.Join(strings.Fields(r.Body), " ")
	for _, want := range []string{"the patched kernel on the client, beside the base kernel on the server", "Reported-by:",
		"# then boot it as the client and the base kernel as its peer"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the reply does not say %q:\n%s", want, r.Body)
		}
	}
	// Its writeback hangs after the warning: the reply shows where the
	// client's tasks were blocked and the RPCs they waited for.
	for _, want := range []string{"client (the kernel under test), last kernel lines:", "client, blocked tasks (SysRq w):",
		"client, RPC tasks in flight (rpc_debug):"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("the reply does not show the stalled client's %q:\n%s", want, r.Body)
		}
	}
	if !regexp.MustCompile(`(?m)^\s+\[\s*[0-9.]+\]\s+\d+ [0-9a-f]{4} .* nfsv[34] [A-Z]+ a:`).MatchString(r.Body) {
		t.Errorf("no RPC task in the reply:\n%s", r.Body)
	}
	// Decided by the profile: no default boot of the candidate.
	if strings.Contains(flat, "of the base, alternating") {
		t.Errorf("default boots ran after the profile had decided:\n%s", r.Body)
	}
}

// seeded is a posting of examples/seeded: its Message-ID, its name and
// when it was posted.
type seeded struct {
	msgID, name string
	at          time.Time
}

// postSeeded posts examples/seeded/name (one patch): the mbox's From line
// off, and dated now, as the list would have it when it is posted (the
// watcher reads recent mail).
func (b *bot) postSeeded(name string) seeded {
	t := b.t
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root(t), "examples", "seeded", name))
	if err != nil {
		t.Fatal(err)
	}
	msg := raw[bytes.IndexByte(raw, '\n')+1:]
	msg = regexp.MustCompile(`(?m)^Date: .*$`).ReplaceAll(msg, []byte("Date: "+time.Now().UTC().Format(time.RFC1123Z)))
	b.post(msg)
	return seeded{msgID: messageID(t, msg), name: name, at: time.Now()}
}

// waitSeeded waits for the reply in a seeded posting's thread.
func (b *bot) waitSeeded(ctx context.Context, s seeded) reply {
	b.t.Helper()
	r := b.waitReply(ctx, s.msgID)
	b.t.Logf("reply %s after posting %s:\n%s", time.Since(s.at).Round(time.Second), s.name, r)
	return r
}
