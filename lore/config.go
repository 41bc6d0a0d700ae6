// Package lore watches the linux-rdma and linux-nfs archives, parses the
// mail, assembles patch series and keeps those that touch the paths the
// bot tests. It is the first stage of the pipeline: bot asks it for new
// series and hands them to builder.
package lore

import (
	"fmt"
	"time"

	"github.com/rdmabot/rdmabot/internal/cfgtype"
)

// Config is the [lore] section of config.toml.
type Config struct {
	// Lists are the mailing lists to watch.
	Lists []ListConfig `toml:"lists"`
	// Paths are the globs a patch must touch for its series to be tested.
	Paths []string `toml:"paths"`
	// PollInterval is how often the sources are read.
	PollInterval cfgtype.Duration `toml:"poll_interval"`
	// GracePeriod is how long an incomplete series waits for its missing
	// patches before it is reported as incomplete.
	GracePeriod cfgtype.Duration `toml:"grace_period"`
}

// ListConfig names one archived list.
type ListConfig struct {
	// Name is the inbox name on lore (linux-rdma).
	Name string `toml:"name"`
	// URL is the inbox base URL (https://lore.kernel.org/linux-rdma).
	URL string `toml:"url"`
	// Address is the list's posting address, used in Cc of replies.
	Address string `toml:"address"`
}

// DefaultConfig watches both lists for svcrdma and ib_core changes.
func DefaultConfig() Config {
	return Config{
		Lists: []ListConfig{
			{Name: "linux-rdma", URL: "https://lore.kernel.org/linux-rdma", Address: "linux-rdma@vger.kernel.org"},
			{Name: "linux-nfs", URL: "https://lore.kernel.org/linux-nfs", Address: "linux-nfs@vger.kernel.org"},
		},
		Paths: []string{
			"net/sunrpc/xprtrdma/**",
			"drivers/infiniband/core/**",
			"include/rdma/**",
			"include/linux/sunrpc/svc_rdma*",
			"include/trace/events/rpcrdma.h",
		},
		PollInterval: cfgtype.D(2 * time.Minute),
		GracePeriod:  cfgtype.D(6 * time.Hour),
	}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	if len(c.Lists) == 0 {
		return fmt.Errorf("lore.lists is empty: nothing to watch")
	}
	for i, l := range c.Lists {
		if l.Name == "" {
			return fmt.Errorf("lore.lists[%d].name is empty", i)
		}
	}
	if len(c.Paths) == 0 {
		return fmt.Errorf("lore.paths is empty: no series would ever be tested")
	}
	if c.PollInterval.Duration <= 0 {
		return fmt.Errorf("lore.poll_interval must be positive")
	}
	return nil
}
