package reply

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/outbox"
)

// goldenRig is what every reply golden starts from: a rig, the runs a
// measured comparison takes, the cover's and the patches' Message-IDs.
func goldenRig(t *testing.T) (g *replyRig, runs int, cover string, patchID func(n int) string) {
	t.Helper()
	g = newReplyRig(t)
	patchID = func(n int) string {
		m, err := mail.ReadMessage(bytes.NewReader(g.s.Patches[n-1].Raw))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Trim(m.Header.Get("Message-Id"), "<>")
	}
	cover = strings.Trim(must(mail.ReadMessage(bytes.NewReader(g.s.Cover.Raw))).Header.Get("Message-Id"), "<>")
	return g, 2 * g.r.Cfg.Runs, cover, patchID
}

// The replies as production sends them, one per mailed outcome the
// pipeline reaches: each golden file is the outbox's raw message.
// The outbox holds one verdict per series version, so each outcome gets
// its own.
func TestRepliesGolden(t *testing.T) {
	_, runs, cover, _ := goldenRig(t)
	measured := func(name string, id int, base, cand []flow.Sample) {
		t.Run(name, func(t *testing.T) {
			g := newReplyRig(t)
			d := decide(t, g.r, base, cand)
			rep := g.report(id, d.Verdict, d.Summary, d.Detail, base, cand)
			answers, to := cover, "cel@kernel.org"
			if o := d.Verdict; g.r.Cfg.Audience(o, reports.Occasion{}) == reports.Nobody {
				// Quiet: nothing is mailed unless someone asked, and
				// then only to them, in reply to the command.
				g.quiet(t, rep)
				rep.Origin.Command = &flow.Command{MsgID: "cmd-jlayton@kernel.org", From: "jlayton@kernel.org", Name: "Jeff Layton",
					Line: "#rdmabot test", References: []string{cover}}
				answers, to = "cmd-jlayton@kernel.org", "jlayton@kernel.org"
			}
			e := g.deliver(t, rep)
			golden(t, "replies/"+strings.ToLower(d.Verdict.String())+".eml", e.Raw)
			checkReply(t, e, d.Verdict, answers, to)
			checkFigures(t, e, d)
		})
	}
	measured("PASS", 1, samples(runs, 100, 2), samples(runs, 100, 2))
	measured("REGRESSION", 2, samples(runs, 100, 2), samples(runs, 52, 2))
	// A use-after-free only the debug profile's KASAN kernel reports: the
	// lab job booted each side's debug build first and stopped at the
	// candidate's crash, once its second boot had crashed the same way
	// (a crash of one boot is not mailed). Its report is the one serve decoded for
	// e2e.TestDebugCatchesUseAfterFree (the seeded svc-free-uaf.mbox),
	// as far as that reply showed it.
	kasan, err := os.ReadFile(filepath.Join("testdata", "consoles", "kasan-debug-uaf.txt"))
	if err != nil {
		t.Fatal(err)
	}
	debugBase := samples(1, 100, 2)[0]
	debugBase.Profile = flow.ProfileDebug
	crashed := []flow.Sample{{Profile: flow.ProfileDebug, Crash: "KASAN: slab-use-after-free Read in __wake_up", Log: string(kasan),
		// The lab kept the crashed boot's consoles: the reply links them all.
		Consoles: map[string]string{"server": strings.Repeat("a", 32), "client": strings.Repeat("b", 32)}}}
	measured("CRASH", 3, append(samples(4, 100, 2), debugBase), append(crashed, crashed[0]))
	// A hang that only the lossy profile brought out: the lab job ran
	// the lossy boots first and stopped at the candidate's crash, booted
	// once more to confirm it, so the candidate has no default-link boot
	// and the base's cached boots stand beside its two lossy ones. The
	// reply says which link crashed it.
	t.Run("CRASH_LOSSY", func(t *testing.T) {
		g := newReplyRig(t)
		lossyBase := samples(1, 100, 2)[0]
		lossyBase.Profile = "lossy"
		base := append(samples(4, 100, 2), lossyBase)
		cand := []flow.Sample{{Profile: "lossy", Crash: "INFO: task hung in __ib_drain_sq",
			Log: "INFO: task nfsd:231 blocked for more than 20 seconds.\n      Not tainted 6.12.118 #1\nCall Trace:\n <TASK>\n __schedule+0x275/0x5e0\n schedule+0x1b/0x90\n schedule_timeout+0x8e/0xf0\n __wait_for_common+0x93/0x1b0\n __ib_drain_sq+0xf5/0x130\n ib_drain_qp+0x1c/0x30\n svc_rdma_free+0x3e/0x2a0\n </TASK>"}}
		cand = append(cand, cand[0])
		d := decide(t, g.r, base, cand)
		if d.Verdict != flow.Crash {
			t.Fatalf("a crash over the lossy link: %s (%s)", d.Verdict, d.Summary)
		}
		e := g.deliver(t, g.report(8, d.Verdict, d.Summary, d.Detail, base, cand))
		golden(t, "replies/crash_lossy.eml", e.Raw)
		checkReply(t, e, d.Verdict, cover, "cel@kernel.org")
		for _, want := range []string{"booted with a lossy link (netem delay 1ms loss 0.01% on both guests), and not in the one base run with",
			"; 2 boots of the patched kernel and 1 of the base with a lossy link", "The patched kernel crashed or stalled in 2 of its boots"} {
			if !strings.Contains(strings.Join(strings.Fields(string(e.Raw)), " "), want) {
				t.Errorf("the reply lacks %q:\n%s", want, e.Raw)
			}
		}
	})
	// The file read back differs from the one written, with no crash:
	// the lab's cmp, as wire turns a boot into a sample, decides
	// DATA_CORRUPTION; the same in a base boot is the lab's problem.
	t.Run("DATA_CORRUPTION", func(t *testing.T) {
		g := newReplyRig(t)
		base, cand := samples(4, 100, 2), samples(2, 100, 2)
		cand[1].Corrupt = "iteration 3 of 4: the file read back over NFS/RDMA differs from the one written (cmp)"
		d := decide(t, g.r, base, cand)
		if d.Verdict != flow.DataCorruption {
			t.Fatalf("a mismatch: %s (%s)", d.Verdict, d.Summary)
		}
		e := g.deliver(t, g.report(9, d.Verdict, d.Summary, d.Detail, base, cand))
		golden(t, "replies/data_corruption.eml", e.Raw)
		checkReply(t, e, d.Verdict, cover, "cel@kernel.org")
		if !strings.Contains(string(e.Raw), "cmp:\n\n  iteration 3 of 4: the file read back over NFS/RDMA differs from the one written (cmp)") {
			t.Errorf("the reply does not say what differed:\n%s", e.Raw)
		}
		base[2].Corrupt = cand[1].Corrupt
		if d := decide(t, g.r, base, cand); d.Verdict != flow.Infra || !strings.Contains(d.Summary, "base kernel corrupts data") {
			t.Errorf("a base boot's mismatch: %s (%s), want INFRA", d.Verdict, d.Summary)
		}
	})
	// A transport fault at unchanged throughput: its own golden file.
	t.Run("TRANSPORT", func(t *testing.T) {
		g := newReplyRig(t)
		base, cand := samples(runs, 100, 2), withRetrans(samples(runs, 100, 2), 7, 1, 2, 4)
		cand[4].Health["reconnects"] = 1
		d := decide(t, g.r, base, cand)
		e := g.deliver(t, g.report(7, d.Verdict, d.Summary, d.Detail, base, cand))
		golden(t, "replies/regression_transport.eml", e.Raw)
		checkReply(t, e, d.Verdict, cover, "cel@kernel.org")
		for _, want := range []string{"noticed transport errors with this series", "21 in 3/10 boots"} {
			if !strings.Contains(string(e.Raw), want) {
				t.Errorf("the reply lacks %q", want)
			}
		}
	})
}

// A regression shown by its evidence, its first bad patch, its fix and
// a GitHub comment.
func TestRegressionRepliesGolden(t *testing.T) {
	_, runs, cover, patchID := goldenRig(t)
	// The pressure profile's evidence with no default boot: the counts
	// of the seeded double credit's rxe and siw boots (lab/PRESSURE.md,
	// 2026-12-04) against a clean base, the teardown warnings left out.
	// The reply says what the load was, what is emulated, and shows what
	// it reached beside the faults.
	t.Run("REGRESSION_PRESSURE", func(t *testing.T) {
		g := newReplyRig(t)
		clean := func(prov string, w, r int) flow.Sample {
			h := counts(map[string]int{"write_chunks": w, "read_chunks": r, "sq_starve": 1000000})
			return flow.Sample{Profile: "pressure-" + prov, Health: h, Metrics: map[string]float64{"read_MBps": 6.1, "write_MBps": 0.79}}
		}
		base := append(samples(4, 100, 2), clean("rxe", 2045, 261), clean("siw", 224, 64))
		rxe := counts(map[string]int{"retrans": 2601, "reconnects": 166, "sq_full": 175, "write_chunks": 24252, "read_chunks": 3513})
		siw := counts(map[string]int{"retrans": 761, "reconnects": 117, "write_chunks": 962, "read_chunks": 160})
		cand := []flow.Sample{{Profile: "pressure-rxe", Health: rxe}, {Profile: "pressure-siw", Health: siw}}
		d := decide(t, g.r, base, cand)
		if d.Verdict != flow.Regression {
			t.Fatalf("the double credit's evidence: %s (%s)", d.Verdict, d.Summary)
		}
		e := g.deliver(t, g.report(9, d.Verdict, d.Summary, d.Detail, base, cand))
		golden(t, "replies/regression_pressure.eml", e.Raw)
		checkReply(t, e, d.Verdict, cover, "cel@kernel.org")
		flat := strings.Join(strings.Fields(string(e.Raw)), " ")
		for _, want := range []string{"under Send Queue pressure (rxe and siw under TCG", "175 Sends refused: Send Queue full in 1 of 2 boots of the patched kernel", "3362 in 2/2 boots",
			"latched CQ overflow behind the original Omni-Path hang are not emulated"} {
			if !strings.Contains(flat, want) {
				t.Errorf("the reply lacks %q:\n%s", want, e.Raw)
			}
		}
	})

	// A regression whose series' prefixes were tested: the reply names
	// the first bad patch and what finding it cost, and answers that
	// patch, not the cover letter.
	t.Run("REGRESSION_FIRST_BAD", func(t *testing.T) {
		g := newReplyRig(t)
		base, cand := samples(runs, 100, 2), samples(runs, 52, 2)
		d := decide(t, g.r, base, cand)
		rep := g.report(8, d.Verdict, d.Summary, d.Detail, base, cand)
		rep.FirstBad = &flow.FirstBad{Patch: 2, Commit: "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", Summary: "first bad: patch 2/2", Steps: 1, Boots: 5, Took: 150 * time.Second}
		e := g.deliver(t, rep)
		golden(t, "replies/regression_first_bad.eml", e.Raw)
		m, err := mail.ReadMessage(bytes.NewReader(e.Raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get("In-Reply-To"); got != "<"+patchID(2)+">" {
			t.Errorf("In-Reply-To %s, want patch 2's <%s>", got, patchID(2))
		}
		if want := "found the first bad patch: patch 2/12,"; !strings.Contains(strings.Join(strings.Fields(string(e.Raw)), " "), want) {
			t.Errorf("no %q in\n%s", want, e.Raw)
		}
	})

	// A fix follow-up: the regression's reply is what the fix's Closes:
	// names (the outbox tells which series version it answered); the
	// fix's reply says what it closes and that it is confirmed fixed.
	t.Run("FIX_CONFIRMED", func(t *testing.T) {
		ctx := context.Background()
		reg := newReplyRig(t)
		base := samples(runs, 100, 2)
		d := decide(t, reg.r, base, samples(runs, 52, 2))
		reported := reg.deliver(t, reg.report(9, d.Verdict, d.Summary, d.Detail, base, samples(runs, 52, 2)))
		thread, version, ok, err := reg.r.Answered(ctx, reported.MessageID)
		if err != nil || !ok || thread != cover || thread != reg.s.Root || version != 2 {
			t.Fatalf("the regression's reply answered %q v%d (%v %v), want %q v2, the series' Root %q", thread, version, ok, err, cover, reg.s.Root)
		}
		if _, _, ok, err := reg.r.Answered(ctx, "20261130040506.000000000000-rdmabot@example.org"); ok || err != nil {
			t.Fatalf("an unknown Message-ID: %v %v", ok, err)
		}
		g := newReplyRig(t)
		d = decide(t, g.r, base, samples(runs, 100, 2))
		rep := g.report(10, d.Verdict, d.Summary, d.Detail, base, samples(runs, 100, 2))
		rep.BaseReason = "the reported test 9" // as bot's test job says it
		rep.Fix = &flow.FixFollowUp{Test: 9, Verdict: flow.Regression, URL: "http://127.0.0.1:8480/tests/9", Reply: reported.MessageID, OnTop: true, Confirmed: true}
		e := g.deliver(t, rep)
		golden(t, "replies/fix_confirmed.eml", e.Raw)
		checkReply(t, e, d.Verdict, cover, "cel@kernel.org")
		if want := "This series closes rdmabot's report " + g.r.Cfg.CloseURL(reported.MessageID) + " (REGRESSION in test 9)."; !strings.Contains(strings.Join(strings.Fields(string(e.Raw)), " "), want) {
			t.Errorf("no %q in\n%s", want, e.Raw)
		}
		// A PASS reported nothing to fix: a Closes: naming it is no fix.
		if _, _, ok, err := g.r.Answered(ctx, e.MessageID); ok || err != nil {
			t.Fatalf("a PASS reply: %v %v", ok, err)
		}
	})

	// Asked for in a GitHub issue: the same judgement, as a comment in
	// the issue (and no mail).
	t.Run("GITHUB_REGRESSION", func(t *testing.T) {
		g := newReplyRig(t)
		base, cand := samples(runs, 100, 2), samples(runs, 52, 2)
		d := decide(t, g.r, base, cand)
		rep := g.report(6, d.Verdict, d.Summary, d.Detail, base, cand)
		rep.Key += ":github:rdmabot/linux#12"
		rep.Origin = flow.Origin{Kind: "github", Repo: "rdmabot/linux", Issue: 12, Comment: 99, User: "chuck"}
		e := g.deliver(t, rep)
		golden(t, githubGolden("reply_regression.md"), e.Raw)
		if e.Channel != "github:rdmabot/linux#12" || e.Recipient != "github:chuck" || e.State != outbox.Held || len(e.Envelope) != 0 {
			t.Errorf("comment entry %s to %s, %s, envelope %q", e.Channel, e.Recipient, e.State, e.Envelope)
		}
		body := string(e.Raw)
		for _, want := range []string{"@chuck **REGRESSION**: rdmabot noticed a 48.0% regression of copy (MB/s)",
			"| copy MB/s | 100.", "<!-- rdmabot:" + e.MessageID + " -->\n"} {
			if !strings.Contains(body, want) {
				t.Errorf("the comment lacks %q:\n%s", want, body)
			}
		}
		checkFigures(t, e, d)
	})
}

// A mainline bisection: mailed, with a culprit, unconfirmed, on GitHub.
func TestBisectionRepliesGolden(t *testing.T) {
	_, runs, _, _ := goldenRig(t)
	bisection := func(o flow.Origin) flow.Report { return bisectionReport(o, runs) }
	t.Run("BISECTION", func(t *testing.T) {
		g := newReplyRig(t)
		e := g.deliver(t, bisection(flow.Origin{Kind: "mainline"}))
		golden(t, "replies/bisection.eml", e.Raw)
		m, err := mail.ReadMessage(bytes.NewReader(e.Raw))
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("In-Reply-To") != "" || m.Header.Get("References") != "" || m.Header.Get("Auto-Submitted") != "auto-generated" {
			t.Errorf("a new thread has headers %v", m.Header)
		}
		// The local inbox's address never resolves: not a recipient.
		if fmt.Sprint(e.Envelope) != "[linux-rdma@vger.kernel.org linux-nfs@vger.kernel.org]" {
			t.Errorf("envelope %q", e.Envelope)
		}
		if !strings.Contains(string(e.Raw), "fails again (once), its parent passes again (once)") || !strings.Contains(string(e.Raw), "\nlab:           two QEMU TCG guests") {
			t.Errorf("confirmations:\n%s", e.Raw)
		}
	})
	// A culprit the tree names: the report goes To its author, Cc the
	// lists and the maintainer who signed it off, with the tags a fix
	// carries and the line regzbot tracks it by.
	t.Run("BISECTION_CULPRIT", func(t *testing.T) {
		g := newReplyRig(t)
		rep := bisection(flow.Origin{Kind: "mainline"})
		rep.Bisect.CulpritTitle = "svcrdma: Add Write chunk WRs to the RPC's Send WR chain"
		rep.Bisect.CulpritAuthor = "Chuck Lever <chuck.lever@oracle.com>"
		rep.Bisect.CulpritSignoffs = []string{"Anna Schumaker <anna@kernel.org>", "<linux-nfs@vger.kernel.org>"}
		// The culprit's files are linux-nfs's (MAINTAINERS L:): the
		// report goes to that configured list alone.
		rep.Bisect.CulpritFiles = []string{"net/sunrpc/xprtrdma/svc_rdma_sendto.c"}
		g.r.ListsOf = listsAt{"a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", []string{"linux-nfs@vger.kernel.org", "netdev@vger.kernel.org"}}
		e := g.deliver(t, rep)
		golden(t, "replies/bisection_culprit.eml", e.Raw)
		m, err := mail.ReadMessage(bytes.NewReader(e.Raw))
		if err != nil {
			t.Fatal(err)
		}
		if to := m.Header.Get("To"); to != `"Chuck Lever" <chuck.lever@oracle.com>` {
			t.Errorf("To: %q, want the culprit's author alone", to)
		}
		if fmt.Sprint(e.Envelope) != "[chuck.lever@oracle.com linux-nfs@vger.kernel.org anna@kernel.org regressions@lists.linux.dev]" {
			t.Errorf("envelope %q: each address once", e.Envelope)
		}
		body := string(e.Raw)
		ref := `a1b2c3d4e5f6 ("svcrdma: Add Write chunk WRs to the RPC's Send WR chain")`
		for _, want := range []string{"commit: " + ref + "\nauthor: Chuck Lever <chuck.lever@oracle.com>\n",
			"| Reported-by: rdmabot <rdmabot@rdmabot.invalid>\n| Closes: https://lore.kernel.org/r/" + strings.Trim(m.Header.Get("Message-ID"), "<>") + "/\n| Fixes: " + ref + "\n",
			"\n#regzbot introduced: a1b2c3d4e5f6\n#regzbot title: [mainline] 0f1e2d3c4b5a: nfs-rdma copy_MBps -48% regression\n"} {
			if !strings.Contains(body, want) {
				t.Errorf("the report lacks %q:\n%s", want, body)
			}
		}
	})
	// Unconfirmed, the bisection is mailed to no one (the dashboard has
	// it); rendered, it blames no one: the lists alone, no tags.
	t.Run("BISECTION_UNCONFIRMED", func(t *testing.T) {
		g := newReplyRig(t)
		rep := bisection(flow.Origin{Kind: "mainline"})
		rep.Bisect.Confirmed, rep.Summary = false, "the confirmation runs disagree: not blaming a1b2c3d4e5f6"
		rep.Bisect.CulpritAuthor = "Chuck Lever <chuck.lever@oracle.com>"
		g.quiet(t, rep)
		m, err := reports.RenderBisection(&g.r.Cfg, &reports.Bisection{Title: rep.Title, Confirmed: false, Culprit: rep.Bisect.Culprit,
			CulpritAuthor: rep.Bisect.CulpritAuthor, To: []string{"linux-rdma@vger.kernel.org"}}, "x@rdmabot.invalid", replyNow)
		if err != nil || fmt.Sprint(m.To, m.Cc) != "[<linux-rdma@vger.kernel.org>] []" || strings.Contains(m.Body, "Fixes:") || strings.Contains(m.Body, "#regzbot") {
			t.Errorf("an unconfirmed culprit is blamed (%v): To %v Cc %v\n%s", err, m.To, m.Cc, m.Body)
		}
	})
	t.Run("GITHUB_BISECTION", func(t *testing.T) {
		g := newReplyRig(t)
		e := g.deliver(t, bisection(flow.Origin{Kind: "github", Repo: "rdmabot/linux", Issue: 13, Comment: 7, User: "chuck"}))
		golden(t, githubGolden("reply_bisection.md"), e.Raw)
		if e.Channel != "github:rdmabot/linux#13" || !strings.Contains(string(e.Raw), "First bad commit: `a1b2c3d4e5f60718293a4b5c6d7e8f9012345678` (confirmed: fails again once, its parent passes again once") {
			t.Errorf("%s:\n%s", e.Channel, e.Raw)
		}
	})

}

// A series that does not apply or build: the tree's own error, answering
// the patch it names.
func TestFailureRepliesGolden(t *testing.T) {
	_, _, cover, patchID := goldenRig(t)
	t.Run("APPLY_FAILED", func(t *testing.T) {
		g := newReplyRig(t)
		// The real series on a tree that lacks its files: the builder's
		// own error, as the build job stores it (the fixture's).
		e := g.deliver(t, g.failed(t, 4, flow.ApplyFailed, "apply_failed"))
		golden(t, "replies/apply_failed.eml", e.Raw)
		checkReply(t, e, flow.ApplyFailed, patchID(1), "cel@kernel.org")
		// The answered patch's page on the series' own archive.
		if !strings.Contains(string(e.Raw), "patch link:    https://lore.kernel.org/linux-nfs/"+patchID(1)+"/\n") {
			t.Error("the patch link is not the answered patch's page on the series' archive")
		}
	})
	t.Run("BUILD_FAILED", func(t *testing.T) {
		g := newReplyRig(t)
		// gcc 12's output for an error in svc_rdma_backchannel.c, which
		// only patch 8 touches: the reply answers patch 8.
		e := g.deliver(t, g.failed(t, 5, flow.BuildFailed, "build_failed"))
		golden(t, "replies/build_failed.eml", e.Raw)
		checkReply(t, e, flow.BuildFailed, patchID(8), "cel@kernel.org")
		body := string(e.Raw)
		for _, want := range []string{
			">> net/sunrpc/xprtrdma/svc_rdma_backchannel.c:12:9: error: implicit declaration of function 'svc_rdma_post_send_chain'",
			"      12 |         svc_rdma_post_send_chain(rdma, ctxt);",
			"net/sunrpc/xprtrdma/svc_rdma_backchannel.c:10:13: warning: unused variable 'len'",
			"net/sunrpc/xprtrdma/svc_rdma_backchannel.c:3:12: warning: 'svc_rdma_bc_unused' defined but not used",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("the reply lacks %q", want)
			}
		}
	})
	// A series that drops a config option the lab needs: the tree's
	// finding, named in the reply, never retried as the machine's fault.
	t.Run("BUILD_FAILED_CONFIG", func(t *testing.T) {
		g := newReplyRig(t)
		e := g.deliver(t, g.failed(t, 5, flow.BuildFailed, "build_failed_config"))
		if want := "All errors of make olddefconfig (new ones prefixed by >>):\n\n>> config option lost: CONFIG_RDMA_RXE=m (got absent, from qemu-softroce.config)\n"; !strings.Contains(string(e.Raw), want) {
			t.Errorf("the reply lacks %q:\n%s", want, e.Raw)
		}
	})
	// A series whose changed files compile to the base's objects is a
	// PASS decided in the check lane, with the account wire stores and
	// the summary the bot writes: quiet, and answered only to a command
	// that asked, saying that nothing was booted and offering no tag.
	t.Run("PASS_UNCHANGED", func(t *testing.T) {
		g := newReplyRig(t)
		detail := must(json.Marshal(reports.Detail{Unchanged: &reports.UnchangedCode{Objects: []string{"net/sunrpc/xprtrdma/svc_rdma_sendto.o"}}}))
		rep := g.report(6, flow.Pass, "the series changes no generated code: the files it changes compile to the base's objects, byte for byte "+
			"(net/sunrpc/xprtrdma/svc_rdma_sendto.o); not booted", detail, nil, nil)
		g.quiet(t, rep)
		rep.Origin.Command = &flow.Command{MsgID: "cmd-jlayton@kernel.org", From: "jlayton@kernel.org", Name: "Jeff Layton",
			Line: "#rdmabot test", References: []string{cover}}
		e := g.deliver(t, rep)
		golden(t, "replies/pass_unchanged.eml", e.Raw)
		msg := must(mail.ReadMessage(bytes.NewReader(e.Raw)))
		if msg.Header.Get("In-Reply-To") != "<cmd-jlayton@kernel.org>" || msg.Header.Get("To") != `"Jeff Layton" <jlayton@kernel.org>` ||
			msg.Header.Get("Cc") != "" || len(e.Lists) > 0 {
			t.Errorf("not an answer to the command's sender alone: %v, lists %q", msg.Header, e.Lists)
		}
		body := string(e.Raw)
		for _, want := range []string{"to the same objects, byte for byte (net/sunrpc/xprtrdma/svc_rdma_sendto.o)", "was not booted",
			"make -j$(nproc) net/sunrpc/xprtrdma/svc_rdma_sendto.o cp net/sunrpc/xprtrdma/svc_rdma_sendto.o /tmp/base-1.o",
			"| git am make -j$(nproc) net/sunrpc/xprtrdma/svc_rdma_sendto.o cmp /tmp/base-1.o net/sunrpc/xprtrdma/svc_rdma_sendto.o"} {
			if !strings.Contains(strings.Join(strings.Fields(body), " "), want) {
				t.Errorf("the reply lacks %q", want)
			}
		}
		for _, not := range []string{"Tested-by:", "\ntest: ", "\nlab: ", "\nreproduce: ", "no change of", "bzImage", "boot it"} {
			if strings.Contains(body, not) {
				t.Errorf("the reply of an unbooted kernel has %q:\n%s", not, body)
			}
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// checkReply checks the conventions independently of the golden text.
func checkReply(t *testing.T, e *outbox.Entry, verdict flow.Outcome, answers, to string) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(e.Raw))
	if err != nil {
		t.Fatal(err)
	}
	h := msg.Header
	if got := h.Get("In-Reply-To"); got != "<"+answers+">" {
		t.Errorf("In-Reply-To %s, want <%s>", got, answers)
	}
	if refs := h.Get("References"); !strings.HasSuffix(refs, "<"+answers+">") {
		t.Errorf("References %q do not end with the answered mail", refs)
	}
	if h.Get("Auto-Submitted") != "auto-generated" || h.Get("X-Rdmabot-Outcome") != verdict.String() {
		t.Errorf("headers %v", h)
	}
	if got, _ := h.AddressList("To"); len(got) != 1 || got[0].Address != to {
		t.Errorf("To %v, want %s", got, to)
	}
	if to != "cel@kernel.org" && (len(e.Lists) > 0 || h.Get("Cc") != "") {
		t.Errorf("an answer to the one who asked goes to lists %q, Cc %q", e.Lists, h.Get("Cc"))
	}
	b, _ := io.ReadAll(msg.Body)
	body := string(b)
	if !strings.Contains(body, "base:          https://git.kernel.org/pub/scm/linux/kernel/git/cel/linux.git nfsd-next 6613476e225e090cc9aad49be7fa504e290dd33d\n") {
		t.Error("base is not tree URL, branch and commit")
	}
	config := "config:        x86_64 tinyconfig + kvm_guest.config + rdmabot's qemu-softroce.config (https://github.com/rdmabot/rdmabot/blob/main/builder/kbuild/configs/qemu-softroce.config)"
	if strings.Contains(body, "patched kernel's debug build") { // its build's configuration
		config = "config:        x86_64 tinyconfig + kvm_guest.config + rdmabot's qemu-softroce.config + rdmabot's debug.config (https://github.com/rdmabot/rdmabot/blob/main/builder/kbuild/configs/qemu-softroce.config https://github.com/rdmabot/rdmabot/blob/main/builder/kbuild/configs/debug.config)"
	}
	for _, want := range []string{config,
		"compiler:      gcc (Debian 12.2.0-14+deb12u1) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40",
		"\n-- \n"} {
		if !strings.Contains(body, want) {
			t.Errorf("the reply lacks %q", want)
		}
	}
	o := verdict
	ran := o != flow.ApplyFailed && o != flow.BuildFailed
	for _, want := range []string{
		"lab:           two QEMU TCG guests (1024 MiB each) joined by soft-RoCE (rxe) over a socket link, instruction-counted clock (-icount shift=3,sleep=on): emulation, not hardware",
		"test:          a 16 MiB file copied to the NFS mount, back, and compared, 4 iterations per boot, NFSv3 (the reference mount) over RDMA",
	} {
		if strings.Contains(body, want) != ran {
			t.Errorf("%s: the lab and test are described %v, want %v: %q", verdict, !ran, ran, want)
		}
	}
	if strings.Contains(body, "parameters:") || strings.Contains(body, "copy_MBps") || strings.Contains(body, "icount(") {
		t.Error("the reply shows an internal name or cache key")
	}
	if hasTags := strings.Contains(body, "| Reported-by: "); hasTags != reports.OffersTags(o) {
		t.Errorf("Reported-by block present=%v for %v", hasTags, verdict)
	}
	if reports.OffersTags(o) && !strings.Contains(body, "| Closes: https://lore.kernel.org/r/"+e.MessageID+"/") {
		t.Error("Closes: must point at this reply on lore")
	}
	if strings.Contains(body, "Tested-by") != (o == flow.Pass) {
		t.Error("Tested-by offer only on PASS")
	}
}

// checkFigures checks that the reply shows the stored decision's figures
// and sentence: one judgement, mailed as stored and shown.
func checkFigures(t *testing.T, e *outbox.Entry, d flow.Decision) {
	t.Helper()
	_, body, _ := strings.Cut(string(e.Raw), "\n\n")
	if strings.HasPrefix(e.Channel, "github:") {
		body = string(e.Raw) // a comment has no header
	}
	var det reports.Detail
	if err := json.Unmarshal(d.Detail, &det); err != nil || det.Judgement == nil {
		t.Fatalf("decision detail %s: %v", d.Detail, err)
	}
	flat := strings.Join(strings.Fields(body), " ")
	if !strings.Contains(flat, d.Summary) {
		t.Errorf("the reply does not say the stored summary %q", d.Summary)
	}
	pc := func(r float64) string { return fmt.Sprintf("%+.1f%%", 100*(r-1)) }
	for _, c := range det.Judgement.Decision.Comparisons {
		if want := pc(c.CI.Lo) + ".." + pc(c.CI.Hi); !strings.Contains(body, want) {
			t.Errorf("%s: the reply lacks the stored interval %s", c.Name, want)
		}
		if want := fmt.Sprintf("%.4f", c.Test.P); c.Test.P >= 0.0001 && !strings.Contains(body, want) {
			t.Errorf("%s: the reply lacks the stored p %s", c.Name, want)
		}
	}
}

// maintainersAt is MAINTAINERS at one commit: it lists addrs there and
// nobody anywhere else.
type maintainersAt struct {
	commit string
	addrs  []string
}

func (m maintainersAt) MaintainersAt(_ context.Context, commit string, _ []string) ([]string, error) {
	if commit != m.commit {
		return nil, nil
	}
	return m.addrs, nil
}

// The maintainers and reviewers MAINTAINERS lists for the touched files
// at the base the series was tested on are copied
// (reports.cc_maintainers), once each and never the author; with the
// setting off, only the lists are.
func TestReplyCcsMaintainers(t *testing.T) {
	for _, on := range []bool{true, false} {
		g := everyListTakesReplies(newReplyRig(t))
		g.r.Cfg.CCMaintainers = on
		runs := 2 * g.r.Cfg.Runs
		base, cand := samples(runs, 100, 2), samples(runs, 52, 2)
		d := decide(t, g.r, base, cand)
		rep := g.report(1, d.Verdict, d.Summary, d.Detail, base, cand)
		g.r.Maintainers = maintainersAt{rep.Base, []string{"jlayton@kernel.org", "cel@kernel.org", "JLayton@kernel.org"}}
		e := g.deliver(t, rep)
		m, err := mail.ReadMessage(bytes.NewReader(e.Raw))
		if err != nil {
			t.Fatal(err)
		}
		cc := m.Header.Get("Cc")
		if got := strings.Count(strings.ToLower(cc), "jlayton@kernel.org"); got != map[bool]int{true: 1, false: 0}[on] {
			t.Errorf("cc_maintainers=%v: Cc %q names jlayton %d times", on, cc, got)
		}
		if strings.Contains(cc, "cel@kernel.org") {
			t.Errorf("the author (To) is in Cc too: %q", cc)
		}
		if !strings.Contains(cc, "linux-nfs@vger.kernel.org") {
			t.Errorf("the list is not in Cc: %q", cc)
		}
	}
}

// A thread reply copies whom the posting was sent to (lists and people)
// and the maintainers of the touched files, each once; an address that
// opted out is left out of the Cc, not the reply. An answer someone
// asked for, even a REGRESSION, goes to the one who asked alone and
// spends no list's daily replies.
func TestReplyCcsThePostingsRecipients(t *testing.T) {
	g := everyListTakesReplies(newReplyRig(t, func(c *reports.Config) { c.OptOut = []string{"opted@example.org", "@quiet.example"} }))
	root := g.s.RootMail()
	root.Cc = append(root.Cc, flow.Address{Name: "Pat Peer", Email: "pat@example.org"}, flow.Address{Email: "opted@example.org"},
		flow.Address{Email: "list@quiet.example"})
	g.r.Maintainers = maintainersAt{"6613476e225e090cc9aad49be7fa504e290dd33d", []string{"jlayton@kernel.org", "opted@example.org"}}
	runs := 2 * g.r.Cfg.Runs
	base, cand := samples(runs, 100, 2), samples(runs, 52, 2)
	d := decide(t, g.r, base, cand)
	e := g.deliver(t, g.report(1, d.Verdict, d.Summary, d.Detail, base, cand))
	m, err := mail.ReadMessage(bytes.NewReader(e.Raw))
	if err != nil {
		t.Fatal(err)
	}
	cc := strings.Join(strings.Fields(m.Header.Get("Cc")), " ")
	if want := `<linux-nfs@vger.kernel.org>, <linux-rdma@vger.kernel.org>, "Pat Peer" <pat@example.org>, <jlayton@kernel.org>`; cc != want {
		t.Errorf("Cc %s, want %s", cc, want)
	}
	if e.State == outbox.Suppressed || len(e.Lists) != 2 {
		t.Errorf("the reply is %s, lists %v", e.State, e.Lists)
	}
	rep := g.report(2, d.Verdict, d.Summary, d.Detail, base, cand)
	rep.Origin.Command = &flow.Command{Verb: flow.CommandRetest, MsgID: "retest@throwaway.example", From: "x@throwaway.example", Line: "#rdmabot retest"}
	if err := g.r.Deliver(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
	es, err := g.ob.Ledger().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	e = nil
	for _, x := range es {
		if strings.HasSuffix(x.Key, "|retest@throwaway.example") {
			e = x
		}
	}
	if e == nil {
		t.Fatal("no answer to the retest in the ledger")
	}
	if m, err = mail.ReadMessage(bytes.NewReader(e.Raw)); err != nil {
		t.Fatal(err)
	}
	if to := m.Header.Get("To"); to != "<x@throwaway.example>" || m.Header.Get("Cc") != "" || len(e.Lists) != 0 {
		t.Errorf("an asked-for REGRESSION: To %s, Cc %q, lists %v", to, m.Header.Get("Cc"), e.Lists)
	}
}

// everyListTakesReplies sets every list's habit to "list" (lore.lists
// reply): the tests of the posting's own recipients read them without
// any list's habit.
func everyListTakesReplies(g *replyRig) *replyRig {
	g.r.MaintainersOnly = nil
	return g
}

// lore.lists reply: by default linux-rdma hears of a reply and linux-nfs
// only through its maintainers. A posting to both is answered on
// linux-rdma alone (with whom it addressed and the maintainers); one to
// linux-nfs alone goes to its author and the maintainers of its files,
// not to the list or the others it addressed.
func TestListReplyHabits(t *testing.T) {
	maint := []string{"jlayton@kernel.org"}
	regression := func(g *replyRig) (*outbox.Entry, string) {
		g.r.Maintainers = maintainersAt{"6613476e225e090cc9aad49be7fa504e290dd33d", maint}
		runs := 2 * g.r.Cfg.Runs
		base, cand := samples(runs, 100, 2), samples(runs, 52, 2)
		d := decide(t, g.r, base, cand)
		e := g.deliver(t, g.report(1, d.Verdict, d.Summary, d.Detail, base, cand))
		m, err := mail.ReadMessage(bytes.NewReader(e.Raw))
		if err != nil {
			t.Fatal(err)
		}
		return e, strings.Join(strings.Fields(m.Header.Get("To")+" | "+m.Header.Get("Cc")), " ")
	}
	g := newReplyRig(t)
	root := g.s.RootMail()
	root.Cc = append(root.Cc, flow.Address{Name: "Pat Peer", Email: "pat@example.org"})
	e, rcpt := regression(g)
	if want := `"Chuck Lever" <cel@kernel.org> | <linux-rdma@vger.kernel.org>, "Pat Peer" <pat@example.org>, <jlayton@kernel.org>`; rcpt != want || len(e.Lists) != 1 {
		t.Errorf("to both lists: %s (lists %v), want %s", rcpt, e.Lists, want)
	}

	g = newReplyRig(t)
	root = g.s.RootMail()
	root.To, root.Cc = []flow.Address{{Email: "linux-nfs@vger.kernel.org"}}, []flow.Address{{Name: "Pat Peer", Email: "pat@example.org"}}
	for _, p := range g.s.Patches {
		p.To, p.Cc = root.To, root.Cc
	}
	e, rcpt = regression(g)
	if want := `"Chuck Lever" <cel@kernel.org> | <jlayton@kernel.org>`; rcpt != want || len(e.Lists) != 0 {
		t.Errorf("to linux-nfs alone: %s (lists %v), want %s", rcpt, e.Lists, want)
	}
}

// A review by another bot in the thread (Sashiko's, as the lore stage
// keeps it) is linked, not repeated; a syzbot mail by its lore page.
func TestReplyLinksOtherReviews(t *testing.T) {
	g := newReplyRig(t)
	g.s.Reviews = []flow.Review{{By: "Sashiko AI review", MessageID: "20260515115959.3D9D2C2BCB0@smtp.kernel.org",
		URL: "https://sashiko.dev/#/patchset/170708844422.28128.2979813721958631192.stgit%40bazille.1015granger.net?part=1"},
		{By: "syzbot", MessageID: "000000000000abcd@google.com"}}
	runs := 2 * g.r.Cfg.Runs
	base, cand := samples(runs, 100, 2), samples(runs, 52, 2)
	d := decide(t, g.r, base, cand)
	e := g.deliver(t, g.report(1, d.Verdict, d.Summary, d.Detail, base, cand))
	golden(t, "replies/regression_reviewed.eml", e.Raw)
	for _, want := range []string{"Reviews by other bots in this thread (not repeated here):\n" +
		"  Sashiko AI review: https://sashiko.dev/#/patchset/170708844422.28128.2979813721958631192.stgit%40bazille.1015granger.net?part=1\n" +
		"  syzbot: https://lore.kernel.org/r/000000000000abcd@google.com/\n"} {
		if !strings.Contains(string(e.Raw), want) {
			t.Errorf("no %q in\n%s", want, e.Raw)
		}
	}
}

// listsAt is MAINTAINERS' lists for any files at one commit.
type listsAt struct {
	commit string
	lists  []string
}

func (l listsAt) ListsAt(_ context.Context, commit string, _ []string) ([]string, error) {
	if commit != l.commit {
		return nil, fmt.Errorf("no tree has %s", commit)
	}
	return l.lists, nil
}

// bisectionReport is a confirmed bisection's report as bot hands it
// over: a new thread on the lists (mainline), or a comment in the issue
// that asked for it (o); runs are the confirmation's boots of each side.
func bisectionReport(o flow.Origin, runs int) flow.Report {
	return flow.Report{Key: "bisect:3", Kind: "bisect", Title: "[mainline] 0f1e2d3c4b5a: nfs-rdma copy_MBps -48% regression",
		Verdict: flow.Regression, Tree: "mainline", Base: "6613476e225e090cc9aad49be7fa504e290dd33d",
		Candidate: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c", URL: "http://127.0.0.1:8480/bisect/3", TraceURL: "http://127.0.0.1:8480/bisect/3",
		Origin: o, Bisect: &flow.BisectReport{Good: "6613476e225e090cc9aad49be7fa504e290dd33d", Bad: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
			Culprit: "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", Metric: "copy_MBps", Change: -0.48, Confirmed: true,
			Steps: []flow.BisectStep{
				{N: 1, Phase: "bisect", Commit: "5555555555555555555555555555555555555555", Outcome: "good", Detail: "copy -0.4%"},
				{N: 2, Phase: "bisect", Commit: "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", Outcome: "bad", Detail: "copy -47.9%"},
				{N: 3, Phase: "confirm-culprit", Commit: "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", Outcome: "bad", Detail: "copy -48.2%"},
				{N: 4, Phase: "confirm-parent", Commit: "5555555555555555555555555555555555555555", Outcome: "good", Detail: "copy +0.3%"},
				{N: 5, Phase: "confirm-revert", Commit: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c", Outcome: "good", Detail: "copy -0.1%"},
			},
			// What the confirmation measured: the parent at 100, the
			// culprit at 52, as the steps' details say.
			Parent: "5555555555555555555555555555555555555555", ParentSamples: samples(runs, 100, 2), CulpritSamples: samples(runs, 52, 2)}}
}
