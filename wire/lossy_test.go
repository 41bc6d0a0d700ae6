package wire

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lab"
)

// Which series the lossy profile runs for: a change inside a drain
// function or a changed line naming teardown code asks for it; a comment
// after a label git took for the hunk's context ("flushed:", as the e2e's
// harmless series shows) does not, and neither does a real pair, whose
// RDMA traffic no qdisc shapes.
func TestLossyWhy(t *testing.T) {
	drain := patch("diff --git a/drivers/infiniband/core/verbs.c b/drivers/infiniband/core/verbs.c\n--- a/drivers/infiniband/core/verbs.c\n+++ b/drivers/infiniband/core/verbs.c\n" +
		"@@ -2838,3 +2838,4 @@ static void ib_drain_qp_done(struct ib_cq *cq, struct ib_wc *wc)\n \n-\tcomplete(&cqe->done);\n+\tif (wc->status == IB_WC_SUCCESS)\n+\t\tcomplete(&cqe->done);\n }\n")
	comment := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_sendto.c b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n" +
		"@@ -331,3 +331,4 @@ flushed:\n  * enough Send Queue that SQ exhaustion should be a rare event,\n+ * seen only when many threads reply on one transport at once.\n  */\n")
	teardown := patch("diff --git a/net/sunrpc/xprtrdma/verbs.c b/net/sunrpc/xprtrdma/verbs.c\n--- a/net/sunrpc/xprtrdma/verbs.c\n+++ b/net/sunrpc/xprtrdma/verbs.c\n" +
		"@@ -10,2 +10,3 @@ static int rpcrdma_ep_create(struct rpcrdma_xprt *r_xprt)\n \tint rc;\n+\trpcrdma_xprt_disconnect(r_xprt);\n }\n")
	l := &Lab{Cfg: lab.DefaultConfig()}
	p, err := NewLossy(l)
	if err != nil || p == nil {
		t.Fatalf("NewLossy on the defaults: %v %v", p, err)
	}
	for name, c := range map[string]struct {
		patches [][]byte
		want    string
	}{
		"drain":         {[][]byte{comment, drain}, "drain code (drivers/infiniband/core/verbs.c)"},
		"comment":       {[][]byte{comment}, ""},
		"teardown":      {[][]byte{teardown}, "disconnect code (net/sunrpc/xprtrdma/verbs.c)"},
		"not a message": {[][]byte{[]byte("\x00")}, ""},
	} {
		if got := p.Why(flow.Series{Patches: c.patches}); got != c.want {
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
// among them); a comment in those files does not, nor a change that
// touches none of them, nor a real pair (its HCA is no soft provider).
func TestPressureWhy(t *testing.T) {
	comment := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_sendto.c b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n" +
		"@@ -331,2 +331,3 @@ flushed:\n  * enough Send Queue that SQ exhaustion should be a rare event,\n+ * seen only when many threads reply on one transport at once.\n  */\n")
	backchannel := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_backchannel.c b/net/sunrpc/xprtrdma/svc_rdma_backchannel.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_backchannel.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_backchannel.c\n" +
		"@@ -10,2 +10,3 @@ static int svc_rdma_bc_sendto(struct svcxprt_rdma *rdma)\n \tint rc;\n+\trc = 0;\n }\n")
	verbs := patch("diff --git a/drivers/infiniband/core/verbs.c b/drivers/infiniband/core/verbs.c\n--- a/drivers/infiniband/core/verbs.c\n+++ b/drivers/infiniband/core/verbs.c\n" +
		"@@ -2838,3 +2838,4 @@ static void ib_drain_qp_done(struct ib_cq *cq, struct ib_wc *wc)\n \n-\tcomplete(&cqe->done);\n+\tif (wc->status == IB_WC_SUCCESS)\n+\t\tcomplete(&cqe->done);\n }\n")
	l := &Lab{Cfg: lab.DefaultConfig()}
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
		"comment":          {[][]byte{comment}, ""},
		"elsewhere":        {[][]byte{backchannel}, ""},
		"verbs":            {[][]byte{verbs}, "ib_drain/verbs.c code (drivers/infiniband/core/verbs.c)"},
		"sq-double-credit": {[][]byte{seeded("sq-double-credit")}, "sqecount/svc_rdma_rw.c/wake_send_waiters code (net/sunrpc/xprtrdma/svc_rdma_rw.c)"},
		"sq-credit-leak":   {[][]byte{seeded("sq-credit-leak")}, "sqecount/svc_rdma_rw.c/wake_send_waiters code (net/sunrpc/xprtrdma/svc_rdma_rw.c)"},
		"sq-depth-short":   {[][]byte{seeded("sq-depth-short")}, "sq_avail/sq_depth/svc_rdma_transport.c code (net/sunrpc/xprtrdma/svc_rdma_transport.c)"},
	} {
		if got := p.Why(flow.Series{Patches: c.patches}); got != c.want {
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

// patch is a one-patch mail around a diff body.
func patch(body string) []byte {
	return []byte("From: Dev <dev@example.org>\nSubject: [PATCH] x\nMessage-ID: <x@y>\n\nWhy.\n\nSigned-off-by: Dev <dev@example.org>\n---\n" + body + "-- \n2.43.0\n")
}
