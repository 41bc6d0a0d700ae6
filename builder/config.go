package builder

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/internal/cfgtype"
	"github.com/rdmabot/rdmabot/internal/glob"
)

// Config is the [builder] section of config.toml.
type Config struct {
	// Trees are the kernel trees the bot knows, by name.
	Trees []TreeConfig `toml:"trees"`
	// Jobs is make -j; 0 means the number of CPUs.
	Jobs int `toml:"jobs"`
	// Committer signs the commits the bot makes when it applies a series
	// or imports a tarball.
	Committer Identity `toml:"committer"`
	// HeavyLock is flocked around every kernel build so that builds and
	// lab runs on one machine take turns; a relative path is in
	// cache_dir; "" = none.
	HeavyLock string `toml:"heavy_lock"`
	// BuildTimeout bounds one kernel build (configure and make); a build
	// that takes longer is the machine's fault and is retried.
	BuildTimeout cfgtype.Duration `toml:"build_timeout"`
	// FetchInterval is how often serve fetches every tree that has a URL;
	// a test whose tree's last fetch is older fetches it first.
	FetchInterval cfgtype.Duration `toml:"fetch_interval"`
}

// Identity is a git name and email.
type Identity struct {
	Name  string `toml:"name"`
	Email string `toml:"email"`
}

// TreeConfig is one kernel tree.
type TreeConfig struct {
	Name string `toml:"name"`
	// URL is fetched with git; empty for an imported tree.
	URL string `toml:"url"`
	// Branches are fetched to refs/trees/<name>/<branch>; the first
	// tree's first branch is the base when nothing else names one.
	Branches []string `toml:"branches"`
	// Tags maps subject tags ("rdma-next" in "[PATCH rdma-next 1/3]")
	// to the branch of this tree a series so tagged is based on.
	Tags map[string]string `toml:"tags"`
	// Paths (lore.paths' globs) claim a series for this tree when every
	// file it changes matches one: it is based on the head of the branch
	// the maintainers apply it to, before the pre-image blobs are asked
	// (they match mainline as well when the file is the same there).
	Paths []string `toml:"paths"`
	// FixesBranch takes a claimed series that is a fix (a Fixes: trailer,
	// or a subject tag such as [PATCH fixes] or [PATCH for-rc]); any
	// other claimed series goes on Branches[0]. "" = Branches[0] too.
	FixesBranch string `toml:"fixes_branch"`
}

// DefaultConfig knows mainline, the rdma tree and the nfsd tree.
func DefaultConfig() Config {
	return Config{
		Trees: []TreeConfig{
			{Name: "mainline", URL: "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git", Branches: []string{"master"}},
			{Name: "rdma", URL: "https://git.kernel.org/pub/scm/linux/kernel/git/rdma/rdma.git", Branches: []string{"for-next", "for-rc"},
				Tags:        map[string]string{"rdma-next": "for-next", "rdma-rc": "for-rc", "for-next": "for-next", "for-rc": "for-rc"},
				Paths:       []string{"drivers/infiniband/**", "include/rdma/**", "include/uapi/rdma/**"},
				FixesBranch: "for-rc"},
			// The nfsd maintainer applies to nfsd-testing, where a series
			// soaks under his CI for weeks before nfsd-next.
			{Name: "nfsd", URL: "https://git.kernel.org/pub/scm/linux/kernel/git/cel/linux.git",
				Branches: []string{"nfsd-testing", "nfsd-next", "nfsd-fixes"},
				Tags: map[string]string{"nfsd": "nfsd-testing", "nfsd-testing": "nfsd-testing", "nfsd-next": "nfsd-next",
					"nfsd-fixes": "nfsd-fixes"},
				Paths: []string{"fs/nfsd/**", "fs/lockd/**", "net/sunrpc/svc*", "net/sunrpc/xprtrdma/svc_rdma*",
					"include/linux/sunrpc/svc*"},
				FixesBranch: "nfsd-fixes"},
			// Debian's 6.12 source, imported by scripts/run.sh: the base
			// when no fetched tree is in the store (offline).
			{Name: "local", Branches: []string{"import"}},
		},
		Committer:     Identity{Name: "rdmabot", Email: "rdmabot@localhost"},
		HeavyLock:     "heavy.lock",
		BuildTimeout:  cfgtype.D(time.Hour),
		FetchInterval: cfgtype.D(time.Hour),
	}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	seen := map[string]bool{}
	for i, t := range c.Trees {
		if err := checkRefComponent(t.Name); err != nil {
			return fmt.Errorf("builder.trees[%d].name: %w", i, err)
		}
		for _, b := range t.Branches {
			if err := checkRefComponent(b); err != nil {
				return fmt.Errorf("builder.trees[%d] %s: branch: %w", i, t.Name, err)
			}
		}
		for tag, b := range t.Tags {
			if !slices.Contains(t.Branches, b) {
				return fmt.Errorf("builder.trees[%d] %s: tag %q names branch %q, not one of its branches", i, t.Name, tag, b)
			}
			if tag != strings.ToLower(tag) {
				return fmt.Errorf("builder.trees[%d] %s: tag %q must be lower case", i, t.Name, tag)
			}
		}
		for _, p := range t.Paths {
			if _, err := glob.Compile(p); err != nil {
				return fmt.Errorf("builder.trees[%d] %s: paths: %w", i, t.Name, err)
			}
		}
		if t.FixesBranch != "" && !slices.Contains(t.Branches, t.FixesBranch) {
			return fmt.Errorf("builder.trees[%d] %s: fixes_branch %q is not one of its branches", i, t.Name, t.FixesBranch)
		}
		if seen[t.Name] {
			return fmt.Errorf("builder.trees: %q named twice", t.Name)
		}
		seen[t.Name] = true
	}
	if c.Committer.Name == "" || c.Committer.Email == "" {
		return fmt.Errorf("builder.committer needs a name and an email")
	}
	if c.FetchInterval.Duration <= 0 {
		return fmt.Errorf("builder.fetch_interval must be positive")
	}
	if c.BuildTimeout.Duration <= 0 {
		return fmt.Errorf("builder.build_timeout must be positive")
	}
	if c.Jobs < 0 {
		return fmt.Errorf("builder.jobs must not be negative")
	}
	return nil
}
