package glob

import "testing"

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"net/sunrpc/xprtrdma/**", "net/sunrpc/xprtrdma/svc_rdma_rw.c", true},
		{"net/sunrpc/xprtrdma/**", "net/sunrpc/xprtrdma/sub/x.c", true},
		{"net/sunrpc/xprtrdma/**", "net/sunrpc/svc.c", false},
		{"include/linux/sunrpc/svc_rdma*", "include/linux/sunrpc/svc_rdma.h", true},
		{"include/linux/sunrpc/svc_rdma*", "include/linux/sunrpc/svc_rdma/x.h", false},
		{"**/Makefile", "drivers/infiniband/core/Makefile", true},
		{"**/Makefile", "Makefile", true},
		{"drivers/**/core/*.c", "drivers/infiniband/core/cma.c", true},
		{"include/trace/events/rpcrdma.h", "include/trace/events/rpcrdma.h", true},
	}
	for _, tc := range tests {
		g, err := Compile(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Match(tc.path); got != tc.want {
			t.Errorf("%s ~ %s = %v", tc.pattern, tc.path, got)
		}
	}
	if _, err := Compile("a/[x"); err == nil {
		t.Error("a/[x compiled")
	}
}
