// Package reports compares patched against base runs with sound
// statistics, decides the verdict and writes and delivers the reply:
// an in-thread email, a GitHub comment, the outbox, the dashboard page.
package reports

import "fmt"

// Config is the [reports] section of config.toml.
type Config struct {
	// MinEffect is the smallest relative change reported (0.05 = 5 %).
	MinEffect float64 `toml:"min_effect"`
	// Alpha is the significance level of the rank test.
	Alpha float64 `toml:"alpha"`
}

// DefaultConfig asks for a 5 % effect at alpha 0.01.
func DefaultConfig() Config {
	return Config{MinEffect: 0.05, Alpha: 0.01}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	if c.MinEffect <= 0 || c.MinEffect >= 1 {
		return fmt.Errorf("reports.min_effect must be in (0, 1), got %v", c.MinEffect)
	}
	if c.Alpha <= 0 || c.Alpha >= 0.5 {
		return fmt.Errorf("reports.alpha must be in (0, 0.5), got %v", c.Alpha)
	}
	return nil
}
