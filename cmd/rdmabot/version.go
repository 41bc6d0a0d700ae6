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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: rdmabot version [--json]", errUsage)
	}
	v := readVersion()
	if *asJSON {
		return writeJSON(e, v)
	}
	fmt.Fprintf(e.stdout, "rdmabot %s %s", v.Module, v.Version)
	if v.Revision != "" {
		fmt.Fprintf(e.stdout, " revision %s", v.Revision)
		if v.Time != "" {
			fmt.Fprintf(e.stdout, " (%s)", v.Time)
		}
		if v.Modified {
			fmt.Fprint(e.stdout, " modified")
		}
	}
	if v.GoVersion != "" {
		fmt.Fprintf(e.stdout, " %s", v.GoVersion)
	}
	fmt.Fprintln(e.stdout)
	return nil
}

// writeJSON prints v as indented JSON on stdout.
func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
