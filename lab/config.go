// Package lab boots base and patched kernels on a lab pair (two QEMU
// guests joined by soft-RoCE, or real hosts over SSH), runs the NFS/RDMA
// transfer test and watches both consoles for hangs, oopses and panics.
package lab

import "fmt"

// Config is the [lab] section of config.toml.
type Config struct {
	// Default is the name of the pair used when a job names none.
	Default string `toml:"default"`
}

// DefaultConfig uses the built-in QEMU pair.
func DefaultConfig() Config {
	return Config{Default: "qemu"}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	if c.Default == "" {
		return fmt.Errorf("lab.default is empty")
	}
	return nil
}
