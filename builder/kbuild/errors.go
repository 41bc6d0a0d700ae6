package kbuild

import (
	"fmt"
	"strings"
)

// InfraError is a failure of the machine or of the bot, never of the
// patch: bwrap missing, disk full, the build killed by its timeout or
// cancelled. The series must not be blamed; the job can be retried.
type InfraError struct {
	Op  string // checkout, configure, sandbox, make, store ...
	Err error
}

func (e *InfraError) Error() string { return "kbuild " + e.Op + " (infrastructure): " + e.Err.Error() }
func (e *InfraError) Unwrap() error { return e.Err }

// Infra says the machine or the bot, not the patch, failed (flow.IsInfra).
func (e *InfraError) Infra() bool { return true }

// BuildError is a kernel that does not build: the source's fault. Whether
// the patch or its base is to blame is decided by comparing Diagnostics
// with the base's build (NewSince).
type BuildError struct {
	Tree   string // the tree id built
	Target string // the make target that failed
	// Diagnostics are the first compiler and linker errors, in log order.
	Diagnostics []Diagnostic
	// Warnings are the first compiler warnings of the same log.
	Warnings []Diagnostic
	// Tail is the end of the log, for failures without a recognised error
	// line (a Makefile or script error).
	Tail string
	Log  string // path of the whole build log
}

func (e *BuildError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kernel build failed (%s)", e.Target)
	for i, d := range e.Diagnostics {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Diagnostics)-3)
			break
		}
		b.WriteString("; ")
		b.WriteString(d.String())
	}
	if len(e.Diagnostics) == 0 && e.Tail != "" {
		lines := strings.Split(strings.TrimSpace(e.Tail), "\n")
		b.WriteString(": ")
		b.WriteString(lines[len(lines)-1])
	}
	return b.String()
}

// NewSince returns the diagnostics of e that the base build did not have:
// what the series broke. Line numbers are ignored, since a patch moves
// the lines of old errors; file, severity and message must match. A nil
// base (the base built cleanly) returns all of e's diagnostics.
func (e *BuildError) NewSince(base *BuildError) []Diagnostic {
	if base == nil {
		return e.Diagnostics
	}
	old := map[string]int{}
	for _, d := range base.Diagnostics {
		old[d.key()]++
	}
	var out []Diagnostic
	for _, d := range e.Diagnostics {
		if old[d.key()] > 0 {
			old[d.key()]--
			continue
		}
		out = append(out, d)
	}
	return out
}

// ConfigError says that requested config options did not survive
// olddefconfig on this tree: a finding about the tree (a series that
// removes or renames a symbol the lab needs), not an infrastructure error.
// Compare with the base's Lost to tell a series' doing from a stale
// fragment.
type ConfigError struct {
	Lab  string
	Lost []ConfigLoss
}

func (e *ConfigError) Error() string {
	var parts []string
	for _, l := range e.Lost {
		parts = append(parts, l.String())
	}
	return fmt.Sprintf("kernel config for lab %s lost %d requested options: %s", e.Lab, len(e.Lost), strings.Join(parts, ", "))
}

// ConfigLoss is one requested option and what the final .config has.
type ConfigLoss struct {
	Option string // CONFIG_...
	Want   string // y, m, a number or string; "n" for "is not set"
	Got    string // "" when the symbol is absent
	Source string // the fragment that asked for it
}

func (l ConfigLoss) String() string {
	got := l.Got
	if got == "" {
		got = "absent"
	}
	return fmt.Sprintf("%s=%s (got %s, from %s)", l.Option, l.Want, got, l.Source)
}
