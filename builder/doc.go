// Package builder turns an assembled series into kernels: it picks the
// base, applies the patches with go-git exactly as git am would, and
// builds the base and patched kernels for a lab, sandboxed and cached.
//
// Trees live in one Store (OpenStore(StorePath(dataDir))), kept current
// with Store.Fetch or seeded offline with Store.ImportTarball. A series
// (a flow.Series, as lore read it) then takes two calls:
//
//	base, err := st.SelectBase(ctx, series, cfg.Trees, 0) // base.Reason goes in the report
//	res, err := st.Apply(ctx, base.Commit, series.Patches, builder.ApplyOptions{
//		Committer: cfg.Committer, Now: clock, Ref: builder.SeriesRef(id, version)})
//
// Apply fails with *ApplyError when a patch does not apply and with
// *UnsafeError when it is refused; both are the series' fault. The
// kernel build itself is package kbuild.
package builder
