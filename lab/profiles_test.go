package lab

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore/intake"
)

// The side a series' kernel boots on comes from the files its patches
// change.
func TestLabCandidateSide(t *testing.T) {
	patch := func(file string) []byte {
		return []byte("From: Dev <dev@example.org>\nSubject: [PATCH] x\nMessage-ID: <" + file + "@x>\n\n---\n" +
			"diff --git a/" + file + " b/" + file + "\n--- a/" + file + "\n+++ b/" + file + "\n@@ -1,3 +1,3 @@ int f(void)\n a\n-b\n+c\n d\n")
	}
	l := defaultRunner()
	for _, c := range []struct {
		files []string
		want  string
	}{
		{[]string{"net/sunrpc/xprtrdma/verbs.c"}, SideClient},
		{[]string{"net/sunrpc/xprtrdma/svc_rdma_sendto.c"}, SideServer},
		{[]string{"net/sunrpc/xprtrdma/verbs.c", "drivers/infiniband/core/cq.c"}, SideServer},
	} {
		var raws [][]byte
		for _, f := range c.files {
			raws = append(raws, patch(f))
		}
		s := readSeries(t, raws...)
		if got := l.CandidateSide(s); got != c.want {
			t.Errorf("%v: %s, want %s", c.files, got, c.want)
		}
	}
}

// readSeries is a series of raw mails as intake hands it on: each mail
// parsed and its diffs read, once (lore reads the diffs the profiles
// judge).
func readSeries(t testing.TB, raws ...[]byte) flow.Series {
	t.Helper()
	var s flow.Series
	for _, r := range raws {
		s.Patches = append(s.Patches, &flow.Message{Raw: r})
	}
	if _, err := intake.Reread(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// defaultRunner is the lab on the default configuration, as serve makes
// it (wire.NewRunner) less the parts no profile's choice reads.
func defaultRunner() *Runner {
	cfg := DefaultConfig()
	return &Runner{Cfg: cfg, Test: cfg.Test, Log: slog.New(slog.DiscardHandler)}
}

// Which series the lossy profile runs for: a change inside a drain
// function or a changed line naming teardown code asks for it; a comment
// after a label git took for the hunk's context ("flushed:", as the e2e's
// harmless series shows) does not, and neither does a real pair, whose
// RDMA traffic no qdisc shapes.
func TestLossyWhy(t *testing.T) {
	drain := patch("diff --git a/drivers/infiniband/core/verbs.c b/drivers/infiniband/core/verbs.c\n--- a/drivers/infiniband/core/verbs.c\n+++ b/drivers/infiniband/core/verbs.c\n" +
		"@@ -2838,3 +2838,4 @@ static void ib_drain_qp_done(struct ib_cq *cq, struct ib_wc *wc)\n \n-\tcomplete(&cqe->done);\n+\tif (wc->status == IB_WC_SUCCESS)\n+\t\tcomplete(&cqe->done);\n }\n")
	comment := commentOnly()
	teardown := patch("diff --git a/net/sunrpc/xprtrdma/verbs.c b/net/sunrpc/xprtrdma/verbs.c\n--- a/net/sunrpc/xprtrdma/verbs.c\n+++ b/net/sunrpc/xprtrdma/verbs.c\n" +
		"@@ -10,2 +10,3 @@ static int rpcrdma_ep_create(struct rpcrdma_xprt *r_xprt)\n \tint rc;\n+\trpcrdma_xprt_disconnect(r_xprt);\n }\n")
	l := defaultRunner()
	p, err := NewLossy(l)
	if err != nil || p == nil {
		t.Fatalf("NewLossy on the defaults: %v %v", p, err)
	}
	for name, c := range map[string]struct {
		patches [][]byte
		want    string
	}{
		"drain":    {[][]byte{comment, drain}, "drain code (drivers/infiniband/core/verbs.c)"},
		"comment":  {[][]byte{comment}, ""},
		"teardown": {[][]byte{teardown}, "disconnect code (net/sunrpc/xprtrdma/verbs.c)"},
	} {
		if got := p.Why(readSeries(t, c.patches...)); got != c.want {
			t.Errorf("%s: Why = %q, want %q", name, got, c.want)
		}
	}
	if !p.Shapes("qemu") || p.Shapes("opa1") {
		t.Errorf("Shapes: qemu %v, real pair opa1 %v; want only the QEMU pair", p.Shapes("qemu"), p.Shapes("opa1"))
	}
	l.Cfg.Lossy.Netem = ""
	if p, err := NewLossy(l); p != nil || err != nil {
		t.Errorf("lab.lossy.netem empty: %v %v, want the profile off", p, err)
	}
}

// Which series the pressure profile runs for: a code change in svcrdma's
// send or rw paths, in verbs' queue code or one naming Send Queue
// accounting asks for it (the seeded accounting bugs of examples/seeded
// among them, and the seeded functional bugs, which pass it); a comment
// in those files does not, nor a change that touches none of them, nor
// a real pair (its HCA is no soft provider).
func TestPressureWhy(t *testing.T) {
	comment := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_sendto.c b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n" +
		"@@ -331,2 +331,3 @@ flushed:\n  * enough Send Queue that SQ exhaustion should be a rare event,\n+ * seen only when many threads reply on one transport at once.\n  */\n")
	backchannel := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_backchannel.c b/net/sunrpc/xprtrdma/svc_rdma_backchannel.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_backchannel.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_backchannel.c\n" +
		"@@ -10,2 +10,3 @@ static int svc_rdma_bc_sendto(struct svcxprt_rdma *rdma)\n \tint rc;\n+\trc = 0;\n }\n")
	verbs := patch("diff --git a/drivers/infiniband/core/verbs.c b/drivers/infiniband/core/verbs.c\n--- a/drivers/infiniband/core/verbs.c\n+++ b/drivers/infiniband/core/verbs.c\n" +
		"@@ -2838,3 +2838,4 @@ static void ib_drain_qp_done(struct ib_cq *cq, struct ib_wc *wc)\n \n-\tcomplete(&cqe->done);\n+\tif (wc->status == IB_WC_SUCCESS)\n+\t\tcomplete(&cqe->done);\n }\n")
	l := defaultRunner()
	p, err := NewPressure(l)
	if err != nil || p == nil {
		t.Fatalf("NewPressure on the defaults: %v %v", p, err)
	}
	seeded := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "examples", "seeded", name+".mbox"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, c := range map[string]struct {
		patches [][]byte
		want    string
	}{
		"comment":           {[][]byte{comment}, ""},
		"elsewhere":         {[][]byte{backchannel}, ""},
		"verbs":             {[][]byte{verbs}, "ib_drain/verbs.c code (drivers/infiniband/core/verbs.c)"},
		"sq-double-credit":  {[][]byte{seeded("sq-double-credit")}, "sqecount/svc_rdma_rw.c/wake_send_waiters code (net/sunrpc/xprtrdma/svc_rdma_rw.c)"},
		"sq-credit-leak":    {[][]byte{seeded("sq-credit-leak")}, "sqecount/svc_rdma_rw.c/wake_send_waiters code (net/sunrpc/xprtrdma/svc_rdma_rw.c)"},
		"sq-depth-short":    {[][]byte{seeded("sq-depth-short")}, "sq_avail/sq_depth/svc_rdma_transport.c code (net/sunrpc/xprtrdma/svc_rdma_transport.c)"},
		"chunk-tail-round":  {[][]byte{seeded("chunk-tail-round")}, "rpc_rdma.c code (net/sunrpc/xprtrdma/rpc_rdma.c)"},
		"reply-chunk-pages": {[][]byte{seeded("reply-chunk-pages")}, "svc_rdma_rw.c code (net/sunrpc/xprtrdma/svc_rdma_rw.c)"},
	} {
		if got := p.Why(readSeries(t, c.patches...)); got != c.want {
			t.Errorf("%s: Why = %q, want %q", name, got, c.want)
		}
	}
	if !p.Shapes("qemu") || p.Shapes("opa1") || p.Boots() != 2 || p.Name() != "pressure" {
		t.Errorf("Shapes: qemu %v, opa1 %v; boots %d; name %q", p.Shapes("qemu"), p.Shapes("opa1"), p.Boots(), p.Name())
	}
	l.Cfg.Pressure.Providers = nil
	if p, err := NewPressure(l); p != nil || err != nil {
		t.Errorf("no providers: %v %v, want the profile off", p, err)
	}
}

// commentOnly is a patch that changes a comment after a label git took
// for the hunk's context ("flushed:", as the e2e's harmless series
// shows): no profile runs for it.
func commentOnly() []byte {
	return patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_sendto.c b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n" +
		"@@ -331,3 +331,4 @@ flushed:\n  * enough Send Queue that SQ exhaustion should be a rare event,\n+ * seen only when many threads reply on one transport at once.\n  */\n")
}

// patch is a one-patch mail around a diff body.
func patch(body string) []byte {
	return []byte("From: Dev <dev@example.org>\nSubject: [PATCH] x\nMessage-ID: <x@y>\n\nWhy.\n\nSigned-off-by: Dev <dev@example.org>\n---\n" + body + "-- \n2.43.0\n")
}

// Which series boot on the client too (the client-side profile): a code
// change to ib_core or a soft provider, whose kernel otherwise boots on
// the server only; not a comment there, not svcrdma (the server's alone),
// not a client-only series (it boots on the client already).
func TestClientSideWhy(t *testing.T) {
	verbs := patch("diff --git a/drivers/infiniband/core/verbs.c b/drivers/infiniband/core/verbs.c\n--- a/drivers/infiniband/core/verbs.c\n+++ b/drivers/infiniband/core/verbs.c\n" +
		"@@ -2791,1 +2791,1 @@ int ib_sg_to_pages(struct ib_mr *mr, struct scatterlist *sgl, int sg_nents,\n-\t\tif (i && (last_page_off != 0 || page_addr != dma_addr)) {\n+\t\tif (i && last_page_off != 0) {\n")
	rxe := patch("diff --git a/drivers/infiniband/sw/rxe/rxe_mr.c b/drivers/infiniband/sw/rxe/rxe_mr.c\n--- a/drivers/infiniband/sw/rxe/rxe_mr.c\n+++ b/drivers/infiniband/sw/rxe/rxe_mr.c\n" +
		"@@ -10,2 +10,3 @@ int rxe_map_mr_sg(struct ib_mr *ibmr)\n \tint n;\n+\tn = 0;\n }\n")
	svc := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_sendto.c b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n" +
		"@@ -100,3 +100,4 @@ int svc_rdma_post_send(struct svcxprt_rdma *rdma, struct svc_rdma_send_ctxt *ctxt)\n \tint ret;\n+\tmight_sleep();\n }\n")
	coreComment := patch("diff --git a/drivers/infiniband/core/verbs.c b/drivers/infiniband/core/verbs.c\n--- a/drivers/infiniband/core/verbs.c\n+++ b/drivers/infiniband/core/verbs.c\n" +
		"@@ -2786,2 +2786,3 @@ int ib_sg_to_pages(struct ib_mr *mr, struct scatterlist *sgl, int sg_nents,\n \t\t/*\n+\t\t * Elements may be coalesced.\n \t\t */\n")
	client := patch("diff --git a/net/sunrpc/xprtrdma/frwr_ops.c b/net/sunrpc/xprtrdma/frwr_ops.c\n--- a/net/sunrpc/xprtrdma/frwr_ops.c\n+++ b/net/sunrpc/xprtrdma/frwr_ops.c\n" +
		"@@ -10,2 +10,3 @@ int frwr_map(struct rpcrdma_xprt *r_xprt)\n \tint n;\n+\tn = 0;\n }\n")
	l := defaultRunner()
	p, err := NewClientSide(l)
	if err != nil || p == nil {
		t.Fatalf("NewClientSide on the defaults: %v %v", p, err)
	}
	for name, c := range map[string]struct {
		patches [][]byte
		want    string
	}{
		"ib_core":            {[][]byte{verbs}, "verbs.c code (drivers/infiniband/core/verbs.c)"},
		"rxe and svcrdma":    {[][]byte{svc, rxe}, "rxe_mr.c code (drivers/infiniband/sw/rxe/rxe_mr.c)"},
		"an ib_core comment": {[][]byte{coreComment}, ""},
		"svcrdma alone":      {[][]byte{svc}, ""},
		"the client's alone": {[][]byte{client}, ""},
	} {
		if got := p.Why(readSeries(t, c.patches...)); got != c.want {
			t.Errorf("%s: Why = %q, want %q", name, got, c.want)
		}
	}
	if !p.Shapes("qemu") || !p.Shapes("opa1") || p.Boots() != 2 || p.Name() != flow.ProfileClientSide || !p.SeriesOnly() {
		t.Errorf("Shapes: qemu %v, opa1 %v; boots %d; name %q", p.Shapes("qemu"), p.Shapes("opa1"), p.Boots(), p.Name())
	}
	l.Cfg.ClientSide.Boots = 0
	if p, err := NewClientSide(l); p != nil || err != nil {
		t.Errorf("lab.client_side.boots 0: %v %v, want the profile off", p, err)
	}
}

// Which series the debug profile runs for: a change in a function that
// frees or tears down (svc_rdma_free) asks for it, a comment does not,
// nor a change on the send path alone; it runs on the QEMU pair only, is
// off with boots = 0, and a boot without a debug kernel is the bot's
// fault, never the series'.
func TestDebugWhy(t *testing.T) {
	free := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_transport.c b/net/sunrpc/xprtrdma/svc_rdma_transport.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_transport.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_transport.c\n" +
		"@@ -590,3 +590,4 @@ static void svc_rdma_free(struct svc_xprt *xprt)\n \tkfree(rdma);\n+\trdma->sc_port[0] = 0;\n }\n")
	comment := commentOnly()
	send := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_sendto.c b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n" +
		"@@ -100,3 +100,4 @@ int svc_rdma_post_send(struct svcxprt_rdma *rdma, struct svc_rdma_send_ctxt *ctxt)\n \tint ret;\n+\tmight_sleep();\n }\n")
	l := defaultRunner()
	p, err := NewDebug(l)
	if err != nil || p == nil {
		t.Fatalf("NewDebug on the defaults: %v %v", p, err)
	}
	for name, c := range map[string]struct {
		patches [][]byte
		want    string
	}{
		"free":    {[][]byte{comment, free}, "free code (net/sunrpc/xprtrdma/svc_rdma_transport.c)"},
		"comment": {[][]byte{comment}, ""},
		"send":    {[][]byte{send}, ""},
	} {
		if got := p.Why(readSeries(t, c.patches...)); got != c.want {
			t.Errorf("%s: Why = %q, want %q", name, got, c.want)
		}
	}
	if !p.Shapes("qemu") || p.Shapes("opa1") {
		t.Errorf("Shapes: qemu %v, real pair opa1 %v; want only the QEMU pair", p.Shapes("qemu"), p.Shapes("opa1"))
	}
	if _, err := p.Run(context.Background(), "qemu", flow.Boot{Dir: t.TempDir()}, 0, &bytes.Buffer{}); !flow.IsInfra(err) {
		t.Errorf("a boot without a debug kernel: %v, want an infra error", err)
	}
	l.Cfg.Debug.Boots = 0
	if p, err := NewDebug(l); p != nil || err != nil {
		t.Errorf("lab.debug.boots 0: %v %v, want the profile off", p, err)
	}
}

// Which series the fstests profile runs for, read from real diffs: a
// change in the Write list code asks for it, a backchannel change does
// not (TestFstestsProfile holds the file list).
func TestFstestsWhy(t *testing.T) {
	l := defaultRunner()
	l.Cfg.Fstests.Providers = []string{"rxe", "siw"}
	p, err := NewFstests(l)
	if err != nil || p == nil {
		t.Fatalf("NewFstests: %v %v", p, err)
	}
	rw := patch("diff --git a/net/sunrpc/xprtrdma/rpc_rdma.c b/net/sunrpc/xprtrdma/rpc_rdma.c\n--- a/net/sunrpc/xprtrdma/rpc_rdma.c\n+++ b/net/sunrpc/xprtrdma/rpc_rdma.c\n" +
		"@@ -10,2 +10,3 @@ static int rpcrdma_encode_write_list(struct rpcrdma_xprt *r_xprt)\n \tint nsegs;\n+\tnsegs = 0;\n }\n")
	backchannel := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_backchannel.c b/net/sunrpc/xprtrdma/svc_rdma_backchannel.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_backchannel.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_backchannel.c\n" +
		"@@ -10,2 +10,3 @@ static int svc_rdma_bc_sendto(struct svcxprt_rdma *rdma)\n \tint rc;\n+\trc = 0;\n }\n")
	if got := p.Why(readSeries(t, rw)); got != "rpc_rdma.c code (net/sunrpc/xprtrdma/rpc_rdma.c)" {
		t.Errorf("a Write list change: Why = %q", got)
	}
	if got := p.Why(readSeries(t, backchannel)); got != "" {
		t.Errorf("a backchannel change: Why = %q, want nothing", got)
	}
}
