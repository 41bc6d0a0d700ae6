// Package layers checks the module's layout: which package may import
// which, for every file, production and test alike.
package layers

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/rdmabot/rdmabot/"

// root is the module's folder, from this package's.
const root = "../.."

// A layer is a group of packages (by path under the module; a trailing
// * matches any rest) and the groups its code may import: prod for every
// file, test further for _test.go files. A package in no layer fails.
type layer struct {
	name       string
	pkgs       []string
	prod, test []string
}

// layers, from the leaf up. A stage imports only its own subpackages
// (what one stage read travels in flow); the engine knows no stage; the
// clients use the engine and the stages from outside; wire joins them
// all and only the binary imports wire. Test support (fakes, the peers'
// servers, testenv) is for tests alone. Order matters: the first layer
// a package matches is its own (internal/fake* before internal/).
var layers = []layer{
	{name: "flow", pkgs: []string{"flow"}, test: []string{"testsupport"}},
	{name: "testsupport", pkgs: []string{"internal/fake*", "internal/testenv", "internal/pgtest", "internal/pitest", "internal/smtptest", "internal/dkimtest"},
		prod: []string{"flow", "internal", "testsupport"}},
	{name: "internal", pkgs: []string{"internal/*"}, prod: []string{"internal"}, test: []string{"testsupport"}},
	{name: "stages", pkgs: []string{"lore", "lore/*", "builder", "builder/*", "lab", "lab/*", "reports", "reports/*"},
		prod: []string{"flow", "internal", "stages"}, test: []string{"testsupport"}},
	{name: "engine", pkgs: []string{"bot", "bot/*"}, prod: []string{"flow", "internal", "engine"}, test: []string{"testsupport"}},
	{name: "clients", pkgs: []string{"clients/*"}, prod: []string{"flow", "internal", "stages", "engine"}, test: []string{"testsupport"}},
	{name: "wiring", pkgs: []string{"wire"}, prod: []string{"flow", "internal", "stages", "engine", "clients"}, test: []string{"testsupport"}},
	{name: "binary", pkgs: []string{"cmd/*"}, prod: []string{"flow", "internal", "stages", "engine", "clients", "wiring"}, test: []string{"testsupport"}},
	{name: "e2e", pkgs: []string{"e2e"}, test: []string{"flow", "internal", "stages", "engine", "clients", "wiring", "testsupport"}},
}

// allowed are the imports the layers refuse but that are right, each
// with its reason; one no file needs any more fails the test.
var allowed = []struct {
	from, to string
	test     bool
	why      string
}{
	{"clients/aa", "clients/dashboard", false, "the A/A bench's results are the dashboard's A/A page (dashboard.AAComparison)"},
	{"builder", "lore", true, "the builder is fed real series as lore parses them"},
	{"builder", "lore/intake", true, "the builder is fed real series as intake reads them"},
	{"lab", "lore/intake", true, "the profiles judge real diffs as intake reads them"},
	{"reports/bundle", "lore/feed", true, "a bundle's mbox is read back as the feed reads one"},
	{"bot", "clients/dashboard", true, "the dashboard's pages are tested on a running engine, whose test harness lives in bot's tests"},
	{"bot", "clients/aa", true, "the A/A bench and a series get one round policy: the test runs both, the series on bot's harness"},
	{"bot", "lab", true, "the round policy's test boots a lab.Runner on a steady fake pair"},
	{"bot", "reports", true, "a round's confirming boot is proven by whether the reply then mails the crash"},
	{"bot", "reports/reply", true, "a round's confirming boot is proven by whether the reply then mails the crash"},
}

func layerOf(pkg string) *layer {
	for i, l := range layers {
		for _, p := range l.pkgs {
			if prefix, ok := strings.CutSuffix(p, "*"); pkg == p || ok && strings.HasPrefix(pkg, prefix) {
				return &layers[i]
			}
		}
	}
	return nil
}

// stageOf is a stage package's stage: its first path element.
func stageOf(pkg string) string { return strings.Split(pkg, "/")[0] }

// layerRule says why pkg's file (a test file or not) may not import imp,
// "" when it may; used says which allowed entry let it pass (-1: none).
func layerRule(pkg, imp string, test bool) (why string, used int) {
	for i, a := range allowed {
		if a.from == pkg && a.to == imp && (test || !a.test) {
			return "", i
		}
	}
	from, to := layerOf(pkg), layerOf(imp)
	switch {
	case from == nil:
		return fmt.Sprintf("%s is in no layer: add it to one in layers", pkg), -1
	case to == nil:
		return fmt.Sprintf("%s is in no layer: add it to one in layers", imp), -1
	}
	may := from.prod
	kind := "code"
	if test {
		may, kind = append(slices.Clone(from.prod), from.test...), "tests"
	}
	switch {
	case !slices.Contains(may, to.name):
		return fmt.Sprintf("%s (%s) %s may import %v, not %s (%s)", pkg, from.name, kind, may, imp, to.name), -1
	case to.name == "stages" && from.name == "stages" && stageOf(pkg) != stageOf(imp):
		return fmt.Sprintf("%s imports another stage, %s: a stage imports only its own packages (what it read travels in flow)", pkg, imp), -1
	}
	return "", -1
}

func TestLayers(t *testing.T) {
	for _, c := range []struct {
		pkg, imp string
		test     bool
	}{{"flow", "internal/redact", false}, {"internal/flock", "lab", false}, {"lab", "reports", false}, {"reports/outbox", "bot/store", false},
		{"bot", "lore", false}, {"bot/store", "reports/stats", false}, {"lore", "wire", false}, {"wire", "cmd/rdmabot", false}, {"builder", "lore", false},
		{"lab", "internal/fakestage", false}, {"wire", "internal/testenv", false}, {"clients/ghbot", "wire", true}, {"lab", "reports", true}, {"nowhere", "flow", false}} {
		if why, _ := layerRule(c.pkg, c.imp, c.test); why == "" {
			t.Errorf("%s importing %s (test %v) passes", c.pkg, c.imp, c.test)
		}
	}
	for _, c := range []struct {
		pkg, imp string
		test     bool
	}{{"builder", "internal/gitmail", false}, {"reports/outbox", "reports", false}, {"lab", "flow", false}, {"bot", "flow", false}, {"clients/dashboard", "reports", false},
		{"cmd/rdmabot", "wire", false}, {"internal/testenv", "internal/flock", false}, {"internal/fakestage", "flow", false}, {"lab", "internal/testenv", true}, {"builder", "lore", true}} {
		if why, _ := layerRule(c.pkg, c.imp, c.test); why != "" {
			t.Errorf("%s importing %s (test %v) refused: %s", c.pkg, c.imp, c.test, why)
		}
	}

	used := make([]bool, len(allowed))
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			imp, ok := strings.CutPrefix(p, module)
			if !ok {
				continue
			}
			checked++
			why, i := layerRule(pkg, imp, strings.HasSuffix(path, "_test.go"))
			if why != "" {
				t.Errorf("%s imports %s: %s", rel, imp, why)
			}
			if i >= 0 {
				used[i] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 200 {
		t.Fatalf("only %d imports of the module's own packages checked", checked)
	}
	for i, u := range used {
		if !u {
			t.Errorf("allowed %s -> %s (%s): no file needs it any more: remove it", allowed[i].from, allowed[i].to, allowed[i].why)
		}
	}
}
