package main

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The table "Config keys and the tests that prove them" in docs/config.md
// names, for every key of config.toml, the tests that show the key doing
// what the file says, or "no test". It must cover every key, name no key the
// file lacks, and name only tests that exist in the package it gives, so
// the list of gaps cannot go stale.
func TestConfigKeysHaveTests(t *testing.T) {
	keys := configKeys(t, filepath.Join("..", "..", "config.toml"))
	if len(keys) < 80 {
		t.Fatalf("config.toml: %d keys read, the file has about 90: the parser is wrong", len(keys))
	}
	rows := keyTable(t, filepath.Join("..", "..", "docs", "config.md"))

	for _, k := range keys {
		if _, ok := rows[k]; !ok {
			t.Errorf("config.toml key %s has no row in docs/config.md's table", k)
		}
	}
	for k := range rows {
		if !slices.Contains(keys, k) {
			t.Errorf("docs/config.md's table names %s, which config.toml does not have", k)
		}
	}

	defined := testFuncs(t, filepath.Join("..", ".."))
	untested := 0
	for _, k := range keys {
		cell, ok := rows[k]
		if !ok {
			continue
		}
		names := testRef.FindAllStringSubmatch(cell, -1)
		for _, n := range names {
			if !defined[n[1]][n[2]] {
				t.Errorf("%s: %s.%s: no func %s( in %s's *_test.go", k, n[1], n[2], n[2], n[1])
			}
		}
		switch {
		case strings.HasPrefix(cell, "no test"):
			untested++
		case len(names) == 0:
			t.Errorf("%s: %q names no package.TestName and does not say \"no test\"", k, cell)
		}
	}
	t.Logf("%d config keys: %d with tests, %d with no test", len(keys), len(keys)-untested, untested)
}

// testRef is a test named as package.TestName, the package by its
// directory under the module (cmd/rdmabot, reports/outbox, wire).
var testRef = regexp.MustCompile(`([a-z0-9]+(?:/[a-z0-9]+)*)\.(Test[A-Za-z0-9_]+)`)

var (
	tableHeader = regexp.MustCompile(`^\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?\s*(#.*)?$`)
	keyLine     = regexp.MustCompile(`^([A-Za-z0-9_-]+)\s*=`)
)

// configKeys are the file's keys as section.key, in file order, each
// once: an array of tables gives its keys once however many entries it
// has, and an inline table ({ ... }) is one key. Lines inside multi-line
// arrays start with a value, never with key =, so they are skipped.
func configKeys(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []string
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := tableHeader.FindStringSubmatch(line); m != nil {
			section = m[1]
			continue
		}
		if m := keyLine.FindStringSubmatch(line); m != nil {
			k := m[1]
			if section != "" {
				k = section + "." + k
			}
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// keyTable reads the section's rows in the file at path: key -> tests cell.
func keyTable(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## Config keys and the tests that prove them\n"
	_, sec, ok := strings.Cut(string(b), heading)
	if !ok {
		t.Fatalf("%s has no %q", path, strings.TrimSpace(heading))
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	rows := map[string]string{}
	for _, l := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		if len(cells) != 3 {
			t.Errorf("%s row %q: want | key | what it does | tests |", path, l)
			continue
		}
		k := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if _, dup := rows[k]; dup {
			t.Errorf("%s's table has %s twice", path, k)
		}
		rows[k] = strings.TrimSpace(cells[2])
	}
	if len(rows) == 0 {
		t.Fatalf("%s's config key table has no rows", path)
	}
	return rows
}

var testFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)

// testFuncs are the Test functions of every *_test.go under root, by
// package directory relative to root.
func testFuncs(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			if out[pkg] == nil {
				out[pkg] = map[string]bool{}
			}
			out[pkg][string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
