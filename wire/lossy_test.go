package wire

import (
	"testing"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/lab"
)

// Which series the lossy profile runs for: a change inside a drain
// function or a changed line naming teardown code asks for it; a comment
// after a label git took for the hunk's context ("flushed:", as the e2e's
// harmless series shows) does not, and neither does a real pair, whose
// RDMA traffic no qdisc shapes.
func TestLossyWhy(t *testing.T) {
	patch := func(body string) []byte {
		return []byte("From: Dev <dev@example.org>\nSubject: [PATCH] x\nMessage-ID: <x@y>\n\nWhy.\n\nSigned-off-by: Dev <dev@example.org>\n---\n" + body + "-- \n2.43.0\n")
	}
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
		if got := p.Why(bot.Series{Patches: c.patches}); got != c.want {
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
