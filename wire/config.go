// config.toml: one section per pipeline stage, each owned by its
// package. Unknown keys are an error, so a typo never silently falls
// back to a default.

package wire

import (
	"bytes"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/lore/intake"
	"github.com/rdmabot/rdmabot/reports"
)

// Config is the whole of config.toml.
type Config struct {
	// DataDir holds the database, mirrors, trees and the outbox.
	DataDir string `toml:"data_dir"`
	// CacheDir holds what can be rebuilt: ccache, guest images, artifacts.
	CacheDir string `toml:"cache_dir"`

	Lore    lore.Config    `toml:"lore"`
	Builder builder.Config `toml:"builder"`
	Lab     lab.Config     `toml:"lab"`
	Reports reports.Config `toml:"reports"`
	Bot     bot.Config     `toml:"bot"`
}

// Default is the configuration with no file at all.
func Default() Config {
	c := defaults()
	c.resolvePaths()
	return c
}

// defaults are Default before relative paths are resolved: a file that
// sets cache_dir moves every path that is relative to it.
func defaults() Config {
	c := Config{
		DataDir:  "/var/lib/rdmabot",
		CacheDir: "/var/cache/rdmabot",
		Lore:     lore.DefaultConfig(),
		Builder:  builder.DefaultConfig(),
		Lab:      lab.DefaultConfig(),
		Reports:  reports.DefaultConfig(),
		Bot:      bot.DefaultConfig(),
	}
	c.Bot.IngestInterval = c.Lore.PollInterval
	return c
}

// LabDirs are where the lab keeps its cache (guest images, noise runs)
// and the leases of real hosts.
func (c Config) LabDirs() lab.Dirs {
	return lab.Dirs{Cache: filepath.Join(c.CacheDir, "lab"), Leases: filepath.Join(c.DataDir, "lab-leases")}
}

// Load reads a config file over the defaults and validates the result.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	if err := c.resolveBeside(path); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// resolveBeside makes lab.fstests.source, when a relative path, a path
// beside the config file at path (the checkout's snapshot), wherever
// serve starts.
func (c *Config) resolveBeside(path string) error {
	src := c.Lab.Fstests.Source
	if src == "" || filepath.IsAbs(src) || lab.IsURL(src) {
		return nil
	}
	abs, err := filepath.Abs(filepath.Join(filepath.Dir(path), src))
	if err != nil {
		return fmt.Errorf("lab.fstests.source: %w", err)
	}
	c.Lab.Fstests.Source = abs
	return nil
}

// resolvePaths makes the heavy locks' relative paths absolute in
// cache_dir, where serve may write (it owns cache_dir) and which a test
// run points elsewhere: a lock outside it is shared with whatever else
// uses that path. Absolute and empty paths stay as they are.
func (c *Config) resolvePaths() {
	for _, p := range []*string{&c.Builder.HeavyLock, &c.Lab.QEMU.HeavyLock} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(c.CacheDir, *p)
		}
	}
}

// Parse decodes TOML over the defaults, strictly, and validates.
func Parse(b []byte) (Config, error) {
	c := defaults()
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var strict *toml.StrictMissingError
		if errors.As(err, &strict) {
			return Config{}, fmt.Errorf("unknown keys:\n%s", strict.String())
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return Config{}, fmt.Errorf("line %d column %d: %s", row, col, de.Error())
		}
		return Config{}, err
	}
	c.resolvePaths()
	// The bot polls the lists as often as [lore] says.
	c.Bot.IngestInterval = c.Lore.PollInterval
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks every section.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("data_dir is empty")
	}
	if c.CacheDir == "" {
		return errors.New("cache_dir is empty")
	}
	return errors.Join(
		c.Lore.Validate(),
		c.Builder.Validate(),
		c.Lab.Validate(),
		c.Reports.Validate(),
		c.Bot.Validate(),
		c.checkListURLs(),
		c.checkMainlineTrees(),
		c.checkLive(),
	)
}

// checkListURLs rejects a lore.lists url that sources() would read as
// something it is not: a mistyped https:// URL has no "://" and would
// silently become a local inbox path that never receives mail.
func (c *Config) checkListURLs() error {
	var errs []error
	for i, l := range c.Lore.Lists {
		if err := intake.CheckListURL(l.URL); err != nil {
			errs = append(errs, fmt.Errorf("lore.lists[%d] %s: url %q: %w", i, l.Name, l.URL, err))
		}
	}
	return errors.Join(errs...)
}

// checkMainlineTrees: a scheduled run, and a GitHub command naming no
// tree, use bot.mainline.trees; a name builder.trees lacks would only
// fail when the job runs.
func (c *Config) checkMainlineTrees() error {
	var errs []error
	for _, name := range c.Bot.Mainline.Trees {
		if !slices.ContainsFunc(c.Builder.Trees, func(t builder.TreeConfig) bool { return t.Name == name }) {
			errs = append(errs, fmt.Errorf("bot.mainline.trees: %q is not a configured tree ([[builder.trees]] names: %s)", name, strings.Join(treeNames(c.Builder.Trees), ", ")))
		}
	}
	return errors.Join(errs...)
}

func treeNames(ts []builder.TreeConfig) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// checkLive refuses to publish what no one can use: once replies leave
// the machine (mail, GitHub comments, patchwork checks), their links go
// to bot.url, and mail comes from reports.from. The defaults, a loopback
// URL and an .invalid mailbox, are only right while nothing leaves.
func (c *Config) checkLive() error {
	var errs []error
	var publishers []string
	if c.Reports.Mail {
		publishers = append(publishers, "reports.mail is on")
	}
	if c.Bot.GitHub.Repo != "" {
		publishers = append(publishers, "bot.github.repo is set")
	}
	if c.Reports.Patchwork.URL != "" {
		publishers = append(publishers, "reports.patchwork.url is set")
	}
	if len(publishers) > 0 {
		if u, err := url.Parse(c.Bot.URL); err == nil && reports.LocalHost(u.Hostname()) {
			errs = append(errs, fmt.Errorf("bot.url %q is reachable only from this machine, but %s: replies would link to pages no reader can open; set bot.url to the address others reach the dashboard at (README, \"Going live\")",
				c.Bot.URL, strings.Join(publishers, " and ")))
		}
	}
	if c.Reports.Mail {
		if a, err := mail.ParseAddress(c.Reports.From); err == nil {
			_, domain, _ := strings.Cut(a.Address, "@")
			if reports.LocalHost(domain) {
				errs = append(errs, fmt.Errorf("reports.from %q is not a deliverable mailbox, but reports.mail is on: answers to the bot would bounce; set the bot's own address (README, \"Going live\")", c.Reports.From))
			}
		}
	}
	return errors.Join(errs...)
}
