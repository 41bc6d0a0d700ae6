// Package cfgtype holds small value types shared by the configuration
// sections of every package, so that config.toml can say "5m" and "90s".
package cfgtype
