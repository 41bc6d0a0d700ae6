package lore

import (
	"fmt"
	"net"
	"net/mail"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/internal/cfgtype"
	"github.com/rdmabot/rdmabot/internal/glob"
)

// Config is the [lore] section of config.toml.
type Config struct {
	// Lists are the mailing lists to watch.
	Lists []ListConfig `toml:"lists"`
	// Paths are the globs a patch must touch for its series to be tested.
	Paths []string `toml:"paths"`
	// PollInterval is how often the sources are read.
	PollInterval cfgtype.Duration `toml:"poll_interval"`
	// WatchInterval is how often the local inboxes (lists whose URL is a
	// path) are looked at for new mail between polls, which is then read
	// at once; 0 leaves them to PollInterval.
	WatchInterval cfgtype.Duration `toml:"watch_interval"`
	// GracePeriod is how long an incomplete series waits for its missing
	// patches before it is reported as incomplete.
	GracePeriod cfgtype.Duration `toml:"grace_period"`
	// BotAddresses are the From addresses of the bot's own mail: such mail
	// is never read as input, so the bot cannot answer or trigger itself.
	BotAddresses []string `toml:"bot_addresses"`
	// Maintainers are the addresses of the trees' maintainers and
	// committers: their "Applied, thanks!" means a series was taken and
	// needs no test. Anyone else's is ignored.
	Maintainers []string `toml:"maintainers"`
	// CommandAllow are addresses that may ask for tests by mail
	// ("#rdmabot test|retest" in a reply) on any series, besides the
	// series' author and whom MAINTAINERS lists for its files.
	CommandAllow []string `toml:"command_allow"`
	// CommandDKIM makes a command act only when its mail proves with
	// DKIM that it comes from its From: (DKIM.Authenticate); off, From:
	// is taken at its word, for a private inbox whose mail is not signed.
	CommandDKIM bool `toml:"command_dkim"`
	// DKIMResolver is the "host:port" of the DNS server the signers'
	// keys are looked up at; "" is the system's resolver.
	DKIMResolver string `toml:"dkim_resolver"`
}

// ListConfig names one archived list.
type ListConfig struct {
	// Name is the inbox name on lore (linux-rdma).
	Name string `toml:"name"`
	// URL is the inbox base URL (https://lore.kernel.org/linux-rdma).
	URL string `toml:"url"`
	// Address is the list's posting address, used in Cc of replies.
	Address string `toml:"address"`
	// Reply is the list's habit for bots' replies to postings on it:
	// ReplyList (Cc the list and whom the posting addressed) or
	// ReplyMaintainers (not the list: the author and the maintainers of
	// the files only).
	Reply string `toml:"reply"`
}

// The reply policies of a list (ListConfig.Reply).
const (
	ReplyList        = "list"
	ReplyMaintainers = "maintainers"
)

// DefaultConfig watches both lists for svcrdma and ib_core changes.
func DefaultConfig() Config {
	return Config{
		Lists: []ListConfig{
			// The lists' habits as they took to the AI reviewer on both
			// (2026): replies to the list on linux-rdma, to the NFS
			// maintainers only on linux-nfs.
			{Name: "linux-rdma", URL: "https://lore.kernel.org/linux-rdma", Address: "linux-rdma@vger.kernel.org", Reply: ReplyList},
			{Name: "linux-nfs", URL: "https://lore.kernel.org/linux-nfs", Address: "linux-nfs@vger.kernel.org", Reply: ReplyMaintainers},
			// The inbox scripts/post.sh feeds, in data_dir: what an operator
			// posts is tested like the lists' mail, online or not.
			{Name: "local", URL: "inbox/local", Address: "local@rdmabot.invalid", Reply: ReplyList},
		},
		Paths: []string{
			"net/sunrpc/xprtrdma/**",
			"drivers/infiniband/core/**",
			"include/rdma/**",
			"include/linux/sunrpc/svc_rdma*",
			"include/trace/events/rpcrdma.h",
		},
		PollInterval:  cfgtype.D(2 * time.Minute),
		WatchInterval: cfgtype.D(2 * time.Second),
		GracePeriod:   cfgtype.D(6 * time.Hour),
		BotAddresses:  []string{},
		Maintainers:   []string{},
		CommandAllow:  []string{},
		CommandDKIM:   true,
	}
}

// Assembler returns the AssemblerConfig this configuration means; now is
// the clock (nil: time.Now).
func (c *Config) Assembler(now func() time.Time) AssemblerConfig {
	return AssemblerConfig{
		Paths:        c.Paths,
		Lists:        c.Lists,
		BotAddresses: c.BotAddresses,
		GracePeriod:  c.GracePeriod.Duration,
		Now:          now,
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
		if l.Reply != "" && l.Reply != ReplyList && l.Reply != ReplyMaintainers {
			return fmt.Errorf("lore.lists[%d] %s: reply %q: want %q or %q", i, l.Name, l.Reply, ReplyList, ReplyMaintainers)
		}
	}
	if len(c.Paths) == 0 {
		return fmt.Errorf("lore.paths is empty: no series would ever be tested")
	}
	if c.PollInterval.Duration <= 0 {
		return fmt.Errorf("lore.poll_interval must be positive")
	}
	if c.WatchInterval.Duration < 0 {
		return fmt.Errorf("lore.watch_interval must not be negative")
	}
	if c.GracePeriod.Duration < 0 {
		return fmt.Errorf("lore.grace_period must not be negative")
	}
	for _, p := range c.Paths {
		if _, err := glob.Compile(p); err != nil {
			return fmt.Errorf("lore.paths: %w", err)
		}
	}
	for _, m := range c.Maintainers {
		if a, err := mail.ParseAddress(m); err != nil || a.Address != m {
			return fmt.Errorf("lore.maintainers: %q is not a bare address", m)
		}
	}
	for _, m := range c.CommandAllow {
		if a, err := mail.ParseAddress(m); err != nil || a.Address != m || m != strings.ToLower(m) {
			return fmt.Errorf("lore.command_allow: %q is not a bare lower-case address", m)
		}
	}
	if c.DKIMResolver != "" {
		if _, port, err := net.SplitHostPort(c.DKIMResolver); err != nil || port == "" {
			return fmt.Errorf("lore.dkim_resolver: %q is not host:port", c.DKIMResolver)
		}
	}
	return nil
}
