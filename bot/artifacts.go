package bot

import (
	"context"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/bot/artifact"
)

// maxJobTime is the longest a job that builds, pulls or boots kernels
// runs (the bisection job's timeout; TestNoKernelJobOutlivesMaxJobTime).
// A kernel used within it may be in a job's hands though no test names
// it yet: a build job's base while its candidate builds, a bisection
// step's kernel while it waits for its pair.
const maxJobTime = 4 * time.Hour

// kernelForgetter is a Builder that keeps its own copy of the kernels it
// built (kbuild's store, whose files the artifact directory links):
// a kernel pruned here is dropped there too, or no disk would be freed.
type kernelForgetter interface {
	// Forget drops the builder's copy of the kernel dir holds.
	Forget(dir string) error
}

// useArtifact records a use of key, which pruning goes by. A stamp that
// fails is not worth failing a job for: the kernel only looks older,
// and pruning still keeps it while a test needs it.
func (b *Bot) useArtifact(key string) {
	if err := b.art.Touch(key, time.Now()); err != nil {
		b.log.Warn("artifact use not recorded", "key", key, "err", err)
	}
}

// pruneArtifacts keeps the artifact directory within
// bot.artifacts_max_mib after a kernel was added: the least recently
// used kernels go first, never one a test not finished (or a running
// bisection of it) names, nor one used within maxJobTime. A pruned
// kernel is built, or pulled, again when a test needs it later. Its
// failures are logged, not returned: the kernel just added is good.
func (b *Bot) pruneArtifacts(ctx context.Context, tr *Trace) {
	if b.cfg.ArtifactsMaxMiB <= 0 {
		return
	}
	b.pruning.Lock()
	defer b.pruning.Unlock()
	inUse, err := b.st.ArtifactsInUse(ctx, b.st.DB)
	if err != nil {
		tr.Logf("artifact store not pruned: %v", err)
		b.log.Warn("artifact store not pruned", "err", err)
		return
	}
	now := time.Now()
	keep := func(s artifact.Stored) bool { return inUse[s.Key] || now.Sub(s.Used) < maxJobTime }
	forget, _ := b.stages.Build.(kernelForgetter)
	gone := func(key, dir string) error {
		if forget == nil {
			return nil
		}
		return forget.Forget(dir)
	}
	limit := b.cfg.ArtifactsMaxMiB << 20
	removed, left, err := b.art.Prune(ctx, limit, keep, gone)
	if len(removed) > 0 {
		tr.Logf("artifact store: removed the %d least recently used kernels (%s), %d MiB left of bot.artifacts_max_mib %d",
			len(removed), strings.Join(removed, ", "), left>>20, b.cfg.ArtifactsMaxMiB)
		b.log.Info("artifact store pruned", "removed", removed, "left_mib", left>>20)
	}
	switch {
	case err != nil:
		tr.Logf("artifact store: pruning failed: %v", err)
		b.log.Warn("artifact store: pruning failed", "err", err)
	case left > limit:
		tr.Logf("artifact store: %d MiB, above bot.artifacts_max_mib %d: every kernel left is needed by a test not finished or was used in the last %v",
			left>>20, b.cfg.ArtifactsMaxMiB, maxJobTime)
		b.log.Warn("artifact store above its bound: its kernels are in use", "mib", left>>20, "max_mib", b.cfg.ArtifactsMaxMiB)
	}
}
