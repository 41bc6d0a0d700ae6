package artifact

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// putKernel stores an artifact of a 1 MiB bzImage under key, last used
// at used.
func putKernel(t *testing.T, d Dir, key string, used time.Time) {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "bzImage"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(context.Background(), key, src); err != nil {
		t.Fatal(err)
	}
	if err := d.Touch(key, used); err != nil {
		t.Fatal(err)
	}
}

// recordGone is a Prune's gone that checks the kernel's files are still
// readable when it is told, and records its key in told.
func recordGone(t *testing.T, told *[]string) func(key, dir string) error {
	return func(key, dir string) error {
		if _, err := os.Stat(filepath.Join(dir, "bzImage")); err != nil {
			t.Errorf("gone(%s): %v", key, err)
		}
		*told = append(*told, key)
		return nil
	}
}

// Prune removes the least recently used artifacts until the store is
// within its bound, never one keep holds on to, and tells gone of each
// while its files are still readable.
func TestPruneLeastRecentlyUsed(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	t0 := time.Now().Add(-24 * time.Hour)
	for i, k := range []string{"a", "b", "c", "d"} {
		putKernel(t, d, k, t0.Add(time.Duration(i)*time.Hour))
	}
	all, err := d.List()
	if err != nil || len(all) != 4 || all[0].Key != "a" || all[3].Key != "d" || all[0].Size < 1<<20 {
		t.Fatalf("listed %+v, %v", all, err)
	}
	one := all[0].Size
	var told []string
	gone := recordGone(t, &told)
	keepB := func(s Stored) bool { return s.Key == "b" }
	removed, left, err := d.Prune(context.Background(), 2*one+one/2, keepB, gone)
	if err != nil || !slices.Equal(removed, []string{"a", "c"}) || !slices.Equal(told, removed) || left != 2*one {
		t.Fatalf("removed %v (told %v), %d bytes left (want %d), %v", removed, told, left, 2*one, err)
	}
	for k, want := range map[string]bool{"a": false, "b": true, "c": false, "d": true} {
		if d.Has(k) != want {
			t.Errorf("has %s: %v, want %v", k, d.Has(k), want)
		}
	}
	if ents, _ := os.ReadDir(d.Root); len(ents) != 2 {
		t.Errorf("the store holds %d entries, want 2: nothing left of the removed", len(ents))
	}

	// All held on to: nothing removed, the store stays above the bound.
	removed, left, err = d.Prune(context.Background(), 0, func(Stored) bool { return true }, gone)
	if err != nil || len(removed) != 0 || left != 2*one {
		t.Errorf("all kept: removed %v, %d left, %v", removed, left, err)
	}
	// Within the bound: nothing removed.
	if removed, _, err = d.Prune(context.Background(), 2*one, keepB, gone); err != nil || len(removed) != 0 {
		t.Errorf("within the bound: removed %v, %v", removed, err)
	}
}

// An artifact used after Prune listed it is kept: a job that just found
// it is about to boot it.
func TestPruneKeepsWhatIsUsedMeanwhile(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	t0 := time.Now().Add(-time.Hour)
	putKernel(t, d, "a", t0)
	putKernel(t, d, "b", t0.Add(time.Minute))
	keep := func(s Stored) bool {
		if s.Key == "a" {
			d.Touch("a", time.Now()) // used between List and the removal
		}
		return false
	}
	removed, _, err := d.Prune(context.Background(), 0, keep, func(string, string) error { return nil })
	if err != nil || !slices.Equal(removed, []string{"b"}) || !d.Has("a") {
		t.Errorf("removed %v, %v; a kept: %v", removed, err, d.Has("a"))
	}
}

// Prune's failures: gone's error stops it with the artifact removed and
// no temporary directory left; a cancelled context stops it before any
// removal; a store not made yet is empty; Touch takes only keys.
func TestPruneErrors(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	t0 := time.Now().Add(-time.Hour)
	putKernel(t, d, "a", t0)
	putKernel(t, d, "b", t0.Add(time.Minute))
	keep := func(Stored) bool { return false }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if removed, _, err := d.Prune(ctx, 0, keep, nil); !errors.Is(err, context.Canceled) || len(removed) != 0 {
		t.Errorf("cancelled: removed %v, %v", removed, err)
	}
	boom := errors.New("boom")
	removed, _, err := d.Prune(context.Background(), 0, keep, func(string, string) error { return boom })
	if !errors.Is(err, boom) || !slices.Equal(removed, []string{"a"}) || d.Has("a") || !d.Has("b") {
		t.Errorf("gone failing: removed %v, %v", removed, err)
	}
	if ents, _ := os.ReadDir(d.Root); len(ents) != 1 {
		t.Errorf("left %d entries, want b alone", len(ents))
	}
	none := Dir{Root: filepath.Join(t.TempDir(), "not-yet")}
	if all, err := none.List(); err != nil || len(all) != 0 {
		t.Errorf("a store not made yet: %v, %v", all, err)
	}
	if err := d.Touch("../b", time.Now()); err == nil {
		t.Error("touched a bad key")
	}
	if err := d.Touch("gone", time.Now()); err == nil {
		t.Error("touched a missing artifact")
	}
	// A root that is a file cannot be listed.
	file := Dir{Root: filepath.Join(d.Root, "b", "bzImage")}
	if _, _, err := file.Prune(context.Background(), 0, keep, nil); err == nil {
		t.Error("pruned a file")
	}
}

// A process killed in the middle of a Prune (here while gone drops the
// store's copy) and of a Put leaves a kernel out of place and a half
// copy. The next Prune tells gone of the kernel and removes both; a copy
// a live writer holds stays, however old.
func TestPruneFinishesWhatACrashLeft(t *testing.T) {
	if root := os.Getenv("ARTIFACT_CRASH_CHILD"); root != "" {
		d := Dir{Root: root}
		half, _, err := d.temp("b")
		if err != nil {
			os.Exit(3)
		}
		os.WriteFile(filepath.Join(half, "bzImage"), []byte("half"), 0o644)
		d.Prune(context.Background(), 0, func(Stored) bool { return false }, func(key, dir string) error {
			os.Stdout.WriteString(dir + "\n")
			select {} // killed here
		})
		os.Exit(4)
	}
	d := Dir{Root: t.TempDir()}
	putKernel(t, d, "a", time.Now().Add(-24*time.Hour))
	child := exec.Command(os.Args[0], "-test.run=^TestPruneFinishesWhatACrashLeft$")
	child.Env = append(os.Environ(), "ARTIFACT_CRASH_CHILD="+d.Root)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := out.Read(buf)
	child.Process.Kill()
	child.Wait()
	movedTo := strings.TrimSpace(string(buf[:n]))
	if filepath.Base(movedTo) != "a" || d.Has("a") {
		t.Fatalf("the child's Prune did not stop in gone with a out of place: %q", movedTo)
	}
	live, release, err := d.temp("c")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// The crash was an hour ago.
	ents, _ := os.ReadDir(d.Root)
	hourAgo := time.Now().Add(-time.Hour)
	for _, e := range ents {
		os.Chtimes(filepath.Join(d.Root, e.Name()), hourAgo, hourAgo)
	}
	if len(ents) != 3 {
		t.Fatalf("after the crash the store holds %d entries, want 3 (.gone-a, .tmp-b, .tmp-c)", len(ents))
	}
	var told []string
	gone := recordGone(t, &told)
	removed, left, err := d.Prune(context.Background(), 1<<30, func(Stored) bool { return false }, gone)
	if err != nil || len(removed) != 0 || left != 0 || !slices.Equal(told, []string{"a"}) {
		t.Fatalf("removed %v, told %v, %d left, %v", removed, told, left, err)
	}
	ents, _ = os.ReadDir(d.Root)
	if len(ents) != 1 || filepath.Join(d.Root, ents[0].Name()) != live {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("the store holds %v, want only the live writer's %s", names, filepath.Base(live))
	}
}

// Finishing a crashed prune can fail (its store copy cannot be dropped):
// the prune still bounds the store, and says what failed.
func TestPruneGoesOnWhenACrashLeftoverFails(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	putKernel(t, d, "a", time.Now().Add(-24*time.Hour))
	left := filepath.Join(d.Root, ".gone-b-1234", "b")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	hourAgo := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Dir(left), hourAgo, hourAgo)
	failed := errors.New("the store copy of b cannot be removed")
	gone := func(key, dir string) error {
		if key == "b" {
			return failed
		}
		return nil
	}
	removed, _, err := d.Prune(context.Background(), 0, func(Stored) bool { return false }, gone)
	if !errors.Is(err, failed) || !slices.Equal(removed, []string{"a"}) {
		t.Fatalf("removed %v, %v; want a removed and the leftover's error", removed, err)
	}
}
