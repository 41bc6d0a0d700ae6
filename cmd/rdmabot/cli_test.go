package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHelp: -h and --help, for the top level and every command and
// verb, print usage on stdout, nothing on stderr, and exit 0.
func TestHelp(t *testing.T) {
	// Run where no config.toml is: help must not need one.
	wd, _ := os.Getwd()
	t.Chdir(t.TempDir())
	defer os.Chdir(wd)
	cases := [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}, {"help", "status"}}
	for name := range commands() {
		cases = append(cases, []string{name, "-h"}, []string{name, "--help"})
	}
	for _, v := range [][]string{{"tree", "import"}, {"tree", "fetch"}, {"tree", "list"}, {"lab", "image"}, {"lab", "run"},
		{"lab", "bench"}, {"lab", "aa"}, {"lab", "compare"}, {"lab", "queue"}, {"lore", "scan"}, {"outbox", "list"}, {"outbox", "show"}, {"outbox", "approve", "ID"}, {"config", "check"}} {
		cases = append(cases, append(v, "--help"), append(append([]string{}, v...), "-h"))
	}
	for _, args := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		if code != 0 || errb.Len() != 0 || !strings.Contains(out.String(), "usage") {
			t.Errorf("rdmabot %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out.String(), errb.String())
		}
	}
	// A bare command or an unknown one is still a usage error.
	for _, args := range [][]string{nil, {"nope"}, {"tree"}, {"outbox", "nope"}, {"lab", "aa", "--side", "sideways"}, {"lab", "compare", "--base", "a", "--candidate", "b", "--side", "sideways"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("rdmabot %v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// TestFlagStyle: every usage string writes flags as --flag.
func TestFlagStyle(t *testing.T) {
	single := regexp.MustCompile(`(^|[\s\[(|])-[a-z]`)
	texts := []string{treeUsage, applyUsage, labUsage, loreUsage, outboxUsage, reproduceUsage}
	for _, c := range commands() {
		texts = append(texts, c.summary)
	}
	var out bytes.Buffer
	for name := range commands() {
		run(context.Background(), []string{name, "--help"}, &out, &out)
	}
	texts = append(texts, out.String())
	for _, s := range texts {
		for _, l := range strings.Split(s, "\n") {
			if !strings.Contains(l, "\t") && single.MatchString(l) { // "\t": a flag's help text
				t.Errorf("single-dash flag in usage: %q", l)
			}
		}
	}
	// The README and the pages it sends readers to under docs/.
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("docs/*.md: %v files, %v", len(docs), err)
	}
	cmd := regexp.MustCompile(`rdmabot (status|outbox|tree|version|serve|config)\b.*`)
	for _, path := range append([]string{filepath.Join("..", "..", "README.md")}, docs...) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(text), "\n") {
			if m := cmd.FindString(l); m != "" && single.MatchString(m) {
				t.Errorf("%s: single-dash flag: %q", filepath.Base(path), l)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "rdmabot github.com/rdmabot/rdmabot ") {
		t.Errorf("version: exit %d %q %s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"version", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("version --json: exit %d %s", code, errb.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v["module"] != "github.com/rdmabot/rdmabot" || v["version"] == "" || v["go_version"] == "" {
		t.Errorf("version --json: %v", v)
	}
}

// `lab aa --profiles` chooses from the lab job's own profile list
// (wire.Profiles): an unknown name and a profile the configuration
// turns off are usage errors that say which exist and which key is off.
func TestLabAAProfilesFromTheOneList(t *testing.T) {
	dir := t.TempDir()
	kernel := filepath.Join(dir, "bzImage")
	if err := os.WriteFile(kernel, []byte("not booted"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte("data_dir = '"+dir+"/data'\ncache_dir = '"+dir+"/cache'\n[lab.lossy]\nnetem = ''\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ profiles, want string }{
		{"nosuch", `profile "nosuch": want one of lossy, client-side, pressure, fstests`},
		{"pressure,lossy", "the lossy profile is off (lab.lossy.netem is empty)"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"lab", "aa", "--config", cfg, "--kernel", kernel, "--profiles", tc.profiles, "--comparisons", "1"}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("--profiles %s: exit %d, stderr %q, want %q", tc.profiles, code, errb.String(), tc.want)
		}
	}
}
