// config.toml: one section per pipeline stage, each owned by its
// package. Unknown keys are an error, so a typo never silently falls
// back to a default.

package wire

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pelletier/go-toml/v2"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/lore"
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
	return c, nil
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
	)
}
