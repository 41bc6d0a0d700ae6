package wire

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lab"
)

// Which series the debug profile runs for: a change in a function that
// frees or tears down (svc_rdma_free) asks for it, a comment does not,
// nor a change on the send path alone; it runs on the QEMU pair only, is
// off with boots = 0, and a boot without a debug kernel is the bot's
// fault, never the series'.
func TestDebugWhy(t *testing.T) {
	free := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_transport.c b/net/sunrpc/xprtrdma/svc_rdma_transport.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_transport.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_transport.c\n" +
		"@@ -590,3 +590,4 @@ static void svc_rdma_free(struct svc_xprt *xprt)\n \tkfree(rdma);\n+\trdma->sc_port[0] = 0;\n }\n")
	comment := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_sendto.c b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n" +
		"@@ -331,3 +331,4 @@ flushed:\n  * enough Send Queue that SQ exhaustion should be a rare event,\n+ * seen only when many threads reply on one transport at once.\n  */\n")
	send := patch("diff --git a/net/sunrpc/xprtrdma/svc_rdma_sendto.c b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n--- a/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n+++ b/net/sunrpc/xprtrdma/svc_rdma_sendto.c\n" +
		"@@ -100,3 +100,4 @@ int svc_rdma_post_send(struct svcxprt_rdma *rdma, struct svc_rdma_send_ctxt *ctxt)\n \tint ret;\n+\tmight_sleep();\n }\n")
	l := &Lab{Cfg: lab.DefaultConfig()}
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
		if got := p.Why(flow.Series{Patches: c.patches}); got != c.want {
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

// A crash's frames are decoded with the vmlinux of the kernel that
// crashed, when the store kept one (a kernel with line tables); without
// one, or with one that is not an ELF file, the report stays as the
// console printed it, and the trace says why.
func TestDecodeFrames(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	src, err := filepath.Abs(filepath.Join("..", "lab", "symbolize", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	withLines, without, broken := t.TempDir(), t.TempDir(), t.TempDir()
	cmd := exec.Command("gcc", "-g", "-O2", "-o", filepath.Join(withLines, "vmlinux"), "a.c", "b.c")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(broken, "vmlinux"), []byte("#!/bin/sh\n"), 0o644)
	f, err := elf.Open(filepath.Join(withLines, "vmlinux"))
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols()
	f.Close()
	var report string
	for _, s := range syms {
		if s.Name == "conn_free" {
			report = fmt.Sprintf("[   12.5] Call Trace:\n[   12.5]  conn_free+0x8/0x%x\n", s.Size)
		}
	}
	var trace bytes.Buffer
	got := decodeFrames(context.Background(), report, withLines, &trace)
	if !strings.Contains(got, "a.c:15 [inline]") || trace.Len() != 0 {
		t.Errorf("with line tables:\n%s\ntrace: %s", got, trace.String())
	}
	if got := decodeFrames(context.Background(), report, without, &trace); got != report || trace.Len() != 0 {
		t.Errorf("without a vmlinux: %q, trace %q; want the report as it was, silently", got, trace.String())
	}
	if got := decodeFrames(context.Background(), report, broken, &trace); got != report || !strings.Contains(trace.String(), "not decoded") {
		t.Errorf("a vmlinux that is no ELF file: %q, trace %q", got, trace.String())
	}
}
