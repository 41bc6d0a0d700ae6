package wire

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rdmabot/rdmabot/"

// layerViolation says why package pkg may not import imp (both relative
// to the module), "" when it may. wire is the one place that joins the
// stages: the shared leaves (flow, internal/) import no stage; a stage
// imports no other stage (what one read travels in flow), nor the engine; the
// engine (bot and its store, artifacts and bisection) knows no stage;
// nothing but the binary imports wire.
func layerViolation(pkg, imp string) string {
	under := func(p string, roots ...string) bool {
		for _, r := range roots {
			if p == r || strings.HasPrefix(p, r+"/") {
				return true
			}
		}
		return false
	}
	stageOf := func(p string) string {
		for _, s := range []string{"lore", "builder", "lab", "reports"} {
			if under(p, s) {
				return s
			}
		}
		return ""
	}
	switch {
	case pkg == "flow":
		return "flow is a leaf"
	case under(pkg, "internal") && !under(imp, "internal") && !(strings.HasPrefix(pkg, "internal/fake") && imp == "flow"):
		return "internal/ is a leaf (a stages' fake speaks flow)"
	case under(imp, "cmd"):
		return "nothing imports the binary"
	case imp == "wire" && !under(pkg, "cmd"):
		return "only the binary imports wire"
	case stageOf(pkg) != "" && under(imp, "bot", "wire"):
		return "a stage does not know the engine"
	case stageOf(pkg) != "" && stageOf(imp) != "" && stageOf(imp) != stageOf(pkg):
		return "a stage imports no other stage"
	case slices.Contains([]string{"bot", "bot/store", "bot/artifact", "bot/bisect"}, pkg) && stageOf(imp) != "":
		return "the engine knows no stage"
	}
	return ""
}

func TestLayers(t *testing.T) {
	for _, c := range [][2]string{{"flow", "internal/redact"}, {"internal/flock", "lab"}, {"lab", "reports"},
		{"reports/outbox", "bot/store"}, {"bot", "lore"}, {"bot/store", "reports/stats"}, {"lore", "wire"}, {"wire", "cmd/rdmabot"}, {"builder", "lore"}} {
		if layerViolation(c[0], c[1]) == "" {
			t.Errorf("%s importing %s passes", c[0], c[1])
		}
	}
	for _, c := range [][2]string{{"builder", "internal/gitmail"}, {"reports/outbox", "reports"}, {"lab", "flow"}, {"bot", "flow"},
		{"clients/dashboard", "reports"}, {"cmd/rdmabot", "wire"}, {"internal/testenv", "internal/flock"}} {
		if why := layerViolation(c[0], c[1]); why != "" {
			t.Errorf("%s importing %s refused: %s", c[0], c[1], why)
		}
	}

	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				checked++
				if why := layerViolation(pkg, rel); why != "" {
					t.Errorf("%s imports %s: %s", pkg, rel, why)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d imports of the module's own packages checked: go list printed\n%s", checked, out)
	}
}
