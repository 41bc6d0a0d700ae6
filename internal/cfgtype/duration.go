package cfgtype

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written in config.toml as a Go duration
// string ("45s", "5m", "2h30m"). TOML has no duration type.
type Duration struct{ time.Duration }

// D makes a Duration.
func D(d time.Duration) Duration { return Duration{d} }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("bad duration %q: %w", b, err)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as Go prints it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
