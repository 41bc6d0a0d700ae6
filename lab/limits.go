package lab

import (
	"fmt"
	"regexp"

	"github.com/rdmabot/rdmabot/flow"
)

// What the QEMU pair cannot see, per path. rxe and siw use virtual
// addressing (ib_uses_virt_dma: every ib_dma_map_* is the identity on a
// kernel address) and the TCG guests have no IOMMU, so code on the
// DMA-mapping and memory-registration paths that hardware takes never
// runs as it does there, however clean the boots. A reply to a series
// that changes such code says so, once per limit: docs/lab.md's table
// "What emulation cannot see" is this table, checked by a test.

// EmulationLimit is one row: the code it is about (files, or functions a
// changed line or hunk names), what the soft providers do instead, and
// how to get it tested where it runs.
type EmulationLimit struct {
	What  string
	Paths *regexp.Regexp // the files
	Funcs *regexp.Regexp // functions a hunk is in (nil: the paths alone decide)
	Limit string
	// Instead is how to get the code exercised.
	Instead string
}

var emulationLimits = []EmulationLimit{
	{What: "the RDMA R/W API (core/rw.c)",
		Paths:   regexp.MustCompile(`^(drivers/infiniband/core/rw\.c|include/rdma/rw\.h)$`),
		Limit:   "rxe and siw use virtual addressing: rdma_rw_ctx_init() maps no scatterlist through an IOMMU (ib_dma_map_sg() is the identity for them) and rxe (RoCE) registers no MR unless forced, so the DMA-mapping and MR paths a hardware HCA takes in core/rw.c never ran as they do there",
		Instead: "booting with rdma_rw's force_mr=1 module option (ib_core.force_mr=1 built in) makes RoCE take the MR path in software; the DMA mapping needs a real pair ([[lab.pairs]], \"#rdmabot test\" on it)"},
	{What: "memory registration (mr_pool.c, ib_map_mr_sg, FRWR)",
		Paths:   regexp.MustCompile(`^(drivers/infiniband/core/mr_pool\.c|include/rdma/mr_pool\.h|net/sunrpc/xprtrdma/frwr_ops\.c)$`),
		Funcs:   regexp.MustCompile(`\b(ib_map_mr_sg\w*|ib_sg_to_pages|ib_alloc_mr\w*|ib_mr_pool_\w+)\(`),
		Limit:   "rxe and siw register MRs in software over kernel virtual addresses: no IOMMU mapping, no device page-size or page-list limits, no HCA MR cache or invalidation hardware, so a registration bug that needs them does not show",
		Instead: "a real pair ([[lab.pairs]], \"#rdmabot test\" on it)"},
	{What: "IOMMU and DMA mapping",
		Paths:   regexp.MustCompile(`^(drivers/iommu/|kernel/dma/|include/linux/(dma-mapping|iommu)\.h$)`),
		Funcs:   regexp.MustCompile(`\bib_(uses_virt_dma|dma_(map|unmap|sync)_\w+)\(`),
		Limit:   "the TCG guests have no IOMMU and rxe and siw bypass the DMA API (ib_uses_virt_dma), so DMA mapping and IOMMU changes never run on the RDMA path",
		Instead: "a real pair with its IOMMU on ([[lab.pairs]], \"#rdmabot test\" on it)"},
	{What: "hardware provider drivers",
		Paths:   regexp.MustCompile(`^drivers/infiniband/hw/`),
		Limit:   "the QEMU pair runs rxe or siw only: the hardware provider this series changes is built but never loaded",
		Instead: "a real pair with that HCA ([[lab.pairs]], \"#rdmabot test\" on it)"},
}

// EmulationLimits says, one sentence per limit that applies, what the
// QEMU pair could not exercise of a series' changes; none for a real
// pair, which takes the hardware's paths.
func (c Config) EmulationLimits(pair string, changes []flow.Change) []string {
	if pair != "qemu" {
		return nil
	}
	var out []string
	for _, l := range emulationLimits {
		if l.applies(changes) {
			out = append(out, fmt.Sprintf("Not exercised here: this series changes %s, and %s. To test it: %s.", l.What, l.Limit, l.Instead))
		}
	}
	return out
}

func (l EmulationLimit) applies(changes []flow.Change) bool {
	for _, ch := range changes {
		if l.Paths.MatchString(ch.File) || ch.Context && l.Funcs != nil && l.Funcs.MatchString(ch.Text) {
			return true
		}
	}
	return false
}
