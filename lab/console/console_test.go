package console

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/console")

// sharedDir is ../shared next to the module root (read-only reference
// material; tests only read it).
func sharedDir(t *testing.T) string {
	return testenv.Shared(t, "the real console logs are read from it")
}

var hostStamp = regexp.MustCompile(`(?m)^\d+\.\d+ `)

// consoles returns every console to check: captured logs in testdata and
// real logs read from ../shared (never copied here).
func consoles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	logs, err := filepath.Glob("testdata/console/*.log")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".log")] = b
	}
	shared := sharedDir(t)
	// The motivating bug report: the whole mail, as a reader would paste it.
	eml, err := filepath.Glob(filepath.Join(shared, "corpus/threads/regression-218743/00-*.eml"))
	if err != nil || len(eml) != 1 {
		t.Fatalf("motivating report not found: %v %v", eml, err)
	}
	b, err := os.ReadFile(eml[0])
	if err != nil {
		t.Fatal(err)
	}
	out["shared-regression-218743"] = b
	// The reference lab's hung-task capture: host timestamp, then the line.
	b, err = os.ReadFile(filepath.Join(shared, "lab/results/run-selftest-hang.hungtask-excerpt.log"))
	if err != nil {
		t.Fatal(err)
	}
	out["shared-selftest-hang"] = hostStamp.ReplaceAll(b, nil)
	return out
}

func render(crashes []Crash) []byte {
	var b bytes.Buffer
	if len(crashes) == 0 {
		b.WriteString("NO CRASH\n")
	}
	for _, c := range crashes {
		fmt.Fprintf(&b, "TITLE: %s\nKIND: %s\nFATAL: %v\nCOMPLETE: %v\nLINES: %d-%d\nCOUNT: %d\n\n",
			c.Title, c.Kind, c.Fatal, c.Complete, c.StartLine, c.EndLine, c.Count)
	}
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	for name, log := range consoles(t) {
		t.Run(name, func(t *testing.T) {
			crashes, err := Scan(bytes.NewReader(log))
			if err != nil {
				t.Fatal(err)
			}
			got := render(crashes)
			testenv.Golden(t, filepath.Join("testdata/console", name+".golden"), got, *update)
			for _, c := range crashes {
				lines := strings.Split(string(log), "\n")
				first := strings.TrimRight(lines[c.StartLine-1], "\r")
				if !strings.HasPrefix(c.Report, first+"\n") {
					t.Errorf("report of %q does not start at line %d", c.Title, c.StartLine)
				}
			}
		})
	}
}

// The titles the issue names, checked directly so a golden update cannot
// silently change them.
func TestMotivatingTitles(t *testing.T) {
	all := consoles(t)
	for name, want := range map[string]string{
		"shared-regression-218743": "INFO: task hung in __ib_drain_sq",
		"shared-selftest-hang":     "INFO: task hung in nfs_wb_all",
	} {
		crashes, err := Scan(bytes.NewReader(all[name]))
		if err != nil {
			t.Fatal(err)
		}
		if len(crashes) == 0 || crashes[0].Title != want || !crashes[0].Complete {
			t.Errorf("%s: got %+v, want complete %q", name, crashes, want)
		}
	}
}

// Streaming: a report is pending from its header to its end, and the
// crash returned at the header fills as lines arrive.
func TestMonitorStreaming(t *testing.T) {
	log := consoles(t)["shared-selftest-hang"]
	m := NewMonitor()
	var started *Crash
	var pendingAtEnd []bool
	for _, l := range strings.Split(strings.TrimRight(string(log), "\n"), "\n") {
		if c := m.Line(l); c != nil && started == nil {
			started = c
		}
		if strings.Contains(l, "</TASK>") {
			pendingAtEnd = append(pendingAtEnd, m.Pending())
		}
	}
	if started == nil || started.Kind != Hang {
		t.Fatalf("no hang started: %+v", started)
	}
	for i, p := range pendingAtEnd {
		if p {
			t.Errorf("report %d still pending after </TASK>", i)
		}
	}
	f, ok := m.Fatal()
	if !ok || f.Title != "INFO: task hung in nfs_wb_all" {
		t.Errorf("Fatal() = %+v, %v", f, ok)
	}
	if got := len(m.Crashes()); got != 2 {
		t.Errorf("want 2 distinct hung tasks (dd, sync), got %d", got)
	}
}

// Repeats of one title are counted, not kept twice.
func TestRepeatsCounted(t *testing.T) {
	log := consoles(t)["shared-selftest-hang"]
	crashes, err := Scan(bytes.NewReader(append(append([]byte{}, log...), log...)))
	if err != nil {
		t.Fatal(err)
	}
	if len(crashes) != 2 || crashes[0].Count != 2 || crashes[1].Count != 2 {
		t.Errorf("got %s", render(crashes))
	}
}
