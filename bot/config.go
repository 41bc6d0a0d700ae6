// Package bot runs the pipeline as durable jobs: new series, GitHub
// commands and cron ticks become River jobs that go lore -> builder ->
// lab -> reports, survive crashes, and bisect mainline regressions.
package bot

import "fmt"

// Config is the [bot] section of config.toml.
type Config struct {
	// DBURL is empty for the embedded SQLite database in the data
	// directory, or a postgres:// URL when several machines share work.
	DBURL string `toml:"db_url"`
	// Listen is the dashboard and webhook address.
	Listen string `toml:"listen"`
}

// DefaultConfig is one machine, SQLite, dashboard on loopback.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:8480"}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	if c.Listen == "" {
		return fmt.Errorf("bot.listen is empty")
	}
	return nil
}
