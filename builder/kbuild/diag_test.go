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
	got, _ := ParseLog(strings.NewReader(log), "/kbuild/src/", "../src/")
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

// Warnings come apart from errors, and each diagnostic keeps the source
// excerpt gcc printed under it.
func TestParseLogWarningsAndContext(t *testing.T) {
	log := `../src/net/sunrpc/xprtrdma/svc_rdma_sendto.c: In function 'svc_rdma_sendto':
../src/net/sunrpc/xprtrdma/svc_rdma_sendto.c:342:9: error: implicit declaration of function 'svc_rdma_post_chain' [-Werror=implicit-function-declaration]
  342 |         svc_rdma_post_chain(rdma, ctxt);
      |         ^~~~~~~~~~~~~~~~~~~
../src/net/sunrpc/xprtrdma/svc_rdma_sendto.c:330:13: warning: unused variable 'ret' [-Wunused-variable]
  330 |         int ret;
      |             ^~~
make[4]: *** [../src/scripts/Makefile.build:229: net/sunrpc/xprtrdma/svc_rdma_sendto.o] Error 1
`
	errs, warns := ParseLog(strings.NewReader(log), "../src/")
	if len(errs) != 1 || len(warns) != 1 {
		t.Fatalf("errors %+v warnings %+v", errs, warns)
	}
	if errs[0].Line != 342 || errs[0].Context != "  342 |         svc_rdma_post_chain(rdma, ctxt);\n      |         ^~~~~~~~~~~~~~~~~~~\n" {
		t.Errorf("error %+v", errs[0])
	}
	if warns[0].File != "net/sunrpc/xprtrdma/svc_rdma_sendto.c" || warns[0].Message != "unused variable 'ret' [-Wunused-variable]" ||
		!strings.HasPrefix(warns[0].Context, "  330 |") {
		t.Errorf("warning %+v", warns[0])
	}
}

// A build log is the patch's output: parsing it never panics, whatever
// the compiler (or a hostile Makefile) printed.
func FuzzParseLog(f *testing.F) {
	f.Add("net/sunrpc/xprtrdma/svc_rdma_sendto.c:12:9: error: implicit declaration of function 'x'\n   12 |  x();\n      |  ^\n")
	f.Add("In file included from a.h:1:\nb.c:1:1: warning: unused\n")
	f.Fuzz(func(t *testing.T, log string) {
		ParseLog(strings.NewReader(log), "/src/", "../src/")
	})
}
