package kbuild

import (
	"strings"
	"testing"
)

func TestParseDiagnostics(t *testing.T) {
	log := `  CC      net/sunrpc/xprtrdma/svc_rdma_sendto.o
../src/net/sunrpc/xprtrdma/svc_rdma_sendto.c: In function 'svc_rdma_sendto':
../src/net/sunrpc/xprtrdma/svc_rdma_sendto.c:1012:16: error: 'ctxt2' undeclared (first use in this function); did you mean 'ctxt'?
../src/net/sunrpc/xprtrdma/svc_rdma_sendto.c:1012:16: note: each undeclared identifier is reported only once for each function it appears in
../src/net/sunrpc/xprtrdma/svc_rdma_sendto.c:1012:16: error: 'ctxt2' undeclared (first use in this function); did you mean 'ctxt'?
/kbuild/src/include/linux/sunrpc/svc_rdma.h:99:1: warning: no previous prototype [-Wmissing-prototypes]
/kbuild/src/include/linux/sunrpc/svc_rdma.h:10:10: fatal error: rdma/missing.h: No such file or directory
make[5]: *** [../src/scripts/Makefile.build:229: net/sunrpc/xprtrdma/svc_rdma_sendto.o] Error 1
ld: net/sunrpc/xprtrdma/svc_rdma.o: in function ` + "`svc_rdma_init'" + `:
svc_rdma.c:(.text+0x1a): undefined reference to ` + "`rdmabot_missing'" + `
ld: vmlinux.o: undefined reference to ` + "`other'" + `
ERROR: modpost: "ib_foo" [drivers/infiniband/hw/hfi1/hfi1.ko] undefined!
make[1]: *** No rule to make target 'net/sunrpc/gone.o', needed by 'net/sunrpc/built-in.a'.  Stop.
`
	got := ParseDiagnostics(strings.NewReader(log), "/kbuild/src/", "../src/")
	var lines []string
	for _, d := range got {
		lines = append(lines, d.String())
	}
	want := []string{
		"net/sunrpc/xprtrdma/svc_rdma_sendto.c:1012:16: 'ctxt2' undeclared (first use in this function); did you mean 'ctxt'?",
		"include/linux/sunrpc/svc_rdma.h:10:10: rdma/missing.h: No such file or directory",
		"net/sunrpc/xprtrdma/svc_rdma.o: undefined reference to `rdmabot_missing' (in svc_rdma_init)",
		"ld: vmlinux.o: undefined reference to `other'",
		"modpost: \"ib_foo\" [drivers/infiniband/hw/hfi1/hfi1.ko] undefined!",
		"make: No rule to make target 'net/sunrpc/gone.o', needed by 'net/sunrpc/built-in.a'.  Stop.",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
