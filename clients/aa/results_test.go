package aa

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// copyFile copies src to dst, making dst's directory.
func copyFile(t *testing.T, src, dst string) int {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// The dashboard reads the A/A files `lab aa` writes in <cache_dir>/aa
// (the measured ones of this repository here), not the power bench's;
// a seeded comparison in an A/A file is left out, the profiles of a
// comparison are named once each, and a bad line fails its file after
// the comparisons before it.
func TestAAResultsReadsLabAAFiles(t *testing.T) {
	dir := Dir(t.TempDir())
	n := copyFile(t, filepath.Join("..", "..", "measurements", "aa.jsonl"), filepath.Join(dir, "aa.jsonl"))
	n += copyFile(t, filepath.Join("..", "..", "measurements", "aa-pressure.jsonl"), filepath.Join(dir, "aa-pressure.jsonl"))
	copyFile(t, filepath.Join("..", "..", "measurements", "power.jsonl"), filepath.Join(dir, "power.jsonl"))
	a := Results{Dir: dir}
	cs, err := a.AAComparisons(context.Background())
	if err != nil || len(cs) != n || n < 40 {
		t.Fatalf("%d comparisons of %d, %v", len(cs), n, err)
	}
	for _, c := range cs {
		if c.File == "aa-pressure.jsonl" && strings.Join(c.Profiles, ",") != "pressure-rxe,pressure-siw" {
			t.Fatalf("profiles %q", c.Profiles)
		}
		if c.Verdict == flow.None || c.Time.IsZero() || c.Condition == "" {
			t.Fatalf("comparison %+v", c)
		}
	}
	os.WriteFile(filepath.Join(dir, "aa-seeded.jsonl"), []byte(`{"condition":"idle","verdict":"REGRESSION","seeded":"udelay(60)"}
{"condition":"idle","verdict":"PASS"}
x
`), 0o644)
	cs, err = a.AAComparisons(context.Background())
	if err == nil || !strings.Contains(err.Error(), "aa-seeded.jsonl") || len(cs) != n+1 {
		t.Fatalf("%d comparisons of %d+1, %v", len(cs), n, err)
	}
	if got := a.Where(); got != filepath.Join(dir, "aa*.jsonl") {
		t.Errorf("where: %s", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.AAComparisons(ctx); err == nil {
		t.Error("a cancelled read went on")
	}
}
