package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
)

// versionInfo is what rdmabot version prints; the JSON names are stable.
type versionInfo struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Revision  string `json:"vcs_revision,omitempty"`
	Time      string `json:"vcs_time,omitempty"`
	Modified  bool   `json:"vcs_modified"`
}

// readVersion reads the module version and VCS stamp of the binary.
func readVersion() versionInfo {
	v := versionInfo{Module: "github.com/rdmabot/rdmabot", Version: "(unknown)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.GoVersion = bi.GoVersion
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// runVersion prints the module version and VCS revision of the binary.
func runVersion(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "version")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	v := readVersion()
	if *asJSON {
		return writeJSON(e, v)
	}
	fmt.Fprintf(e.stdout, "rdmabot %s\n", v)
	return nil
}

// String is the version in one line, as rdmabot version prints it.
func (v versionInfo) String() string {
	s := v.Module + " " + v.Version
	if v.Revision != "" {
		s += " revision " + v.Revision
		if v.Time != "" {
			s += " (" + v.Time + ")"
		}
		if v.Modified {
			s += " modified"
		}
	}
	if v.GoVersion != "" {
		s += " " + v.GoVersion
	}
	return s
}

// writeJSON prints v as indented JSON on stdout.
func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
