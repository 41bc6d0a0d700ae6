package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// Each limit applies to its files and to hunks in its functions, not to
// code that only calls them, and never on a real pair.
func TestEmulationLimits(t *testing.T) {
	c := DefaultConfig()
	for name, tc := range map[string]struct {
		changes []flow.Change
		want    []string // the limits' What, in order
	}{
		"core/rw.c": {[]flow.Change{{File: "drivers/infiniband/core/rw.c", Text: "+\tif (rdma_rw_io_needs_mr(dev, port, dir, sg_cnt))"}},
			[]string{"the RDMA R/W API (core/rw.c)"}},
		"a caller of the R/W API": {[]flow.Change{{File: "net/sunrpc/xprtrdma/svc_rdma_rw.c", Text: "+\tret = rdma_rw_ctx_init(&ctxt->rw_ctx, qp, port,"}}, nil},
		"frwr_ops.c and mr_pool.c": {[]flow.Change{{File: "net/sunrpc/xprtrdma/frwr_ops.c"}, {File: "drivers/infiniband/core/mr_pool.c"}},
			[]string{"memory registration (mr_pool.c, ib_map_mr_sg, FRWR)"}},
		"a hunk in ib_map_mr_sg": {[]flow.Change{{File: "drivers/infiniband/core/verbs.c", Text: "int ib_map_mr_sg(struct ib_mr *mr, struct scatterlist *sg, int sg_nents,", Context: true}},
			[]string{"memory registration (mr_pool.c, ib_map_mr_sg, FRWR)"}},
		"a changed line calling ib_map_mr_sg": {[]flow.Change{{File: "drivers/infiniband/core/verbs.c", Text: "+\tn = ib_map_mr_sg(mr, sg, nents, NULL, PAGE_SIZE);"}}, nil},
		"the DMA API and a provider": {[]flow.Change{{File: "kernel/dma/mapping.c"}, {File: "drivers/infiniband/hw/mlx5/mr.c"}},
			[]string{"IOMMU and DMA mapping", "hardware provider drivers"}},
		"ib_dma_map_sg": {[]flow.Change{{File: "include/rdma/ib_verbs.h", Text: "static inline int ib_dma_map_sg(struct ib_device *dev,", Context: true}},
			[]string{"IOMMU and DMA mapping"}},
		"svcrdma alone": {[]flow.Change{{File: "net/sunrpc/xprtrdma/svc_rdma_sendto.c", Text: "+\tsvc_rdma_send_ctxt_put(rdma, ctxt);"}}, nil},
	} {
		got := c.EmulationLimits("qemu", tc.changes)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %q, want %d limits", name, got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(got[i], "Not exercised here: this series changes "+w+", and ") {
				t.Errorf("%s: limit %d is %q, want %s", name, i, got[i], w)
			}
		}
		if c.EmulationLimits("opa1", tc.changes) != nil {
			t.Errorf("%s: a real pair has limits", name)
		}
	}
	if got := c.EmulationLimits("qemu", []flow.Change{{File: "drivers/infiniband/core/rw.c"}}); !strings.Contains(got[0], "rxe and siw use virtual addressing") || !strings.Contains(got[0], "force_mr=1") {
		t.Errorf("the core/rw.c limit: %q", got[0])
	}
}

// docs/lab.md shows the table the code has, as EmulationTable renders it.
func TestEmulationTableDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "lab.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), emulationTable()) {
		t.Errorf("docs/lab.md lacks the table of what emulation cannot see; it is:\n%s", emulationTable())
	}
}

// emulationTable is the limits as docs/lab.md shows them.
func emulationTable() string {
	var b strings.Builder
	b.WriteString("| code | files, or the functions a hunk is in | what rxe/siw under TCG do instead | to test it |\n|---|---|---|---|\n")
	for _, l := range emulationLimits {
		funcs := ""
		if l.Funcs != nil {
			funcs = ", `" + l.Funcs.String() + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", l.What, strings.ReplaceAll("`"+l.Paths.String()+"`"+funcs, "|", `\|`), l.Limit, l.Instead)
	}
	return b.String()
}
