package wire

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// The shipped config.toml documents every setting: it must load, and it
// must say exactly what the built-in defaults say, so the file never
// drifts from the code.
func TestShippedConfigIsTheDefault(t *testing.T) {
	path := filepath.Join("..", "config.toml")
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	if !reflect.DeepEqual(got, want) {
		gb, _ := toml.Marshal(got)
		wb, _ := toml.Marshal(want)
		t.Fatalf("config.toml differs from Default():\n--- config.toml\n%s\n--- Default()\n%s", gb, wb)
	}
}

func TestUnknownKeyIsAnError(t *testing.T) {
	_, err := Parse([]byte("[lore]\npoll_intervall = \"1m\"\n"))
	if err == nil || !strings.Contains(err.Error(), "poll_intervall") {
		t.Fatalf("want an error naming the unknown key, got %v", err)
	}
}

func TestBadValueIsAnError(t *testing.T) {
	for _, in := range []string{
		"[lore]\npoll_interval = \"often\"\n",
		"[reports]\nalpha = 0.9\n",
		"data_dir = \"\"\n",
	} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("%q: want an error", in)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("want a not-exist error, got %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

// The heavy locks live in cache_dir unless a path is absolute: a serve,
// or a test run, given its own cache_dir never waits on another's lock,
// and serve (which owns cache_dir) can always open it.
func TestHeavyLockIsInCacheDir(t *testing.T) {
	c, err := Parse([]byte("cache_dir = \"/srv/cache\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Builder.HeavyLock != "/srv/cache/heavy.lock" || c.Lab.QEMU.HeavyLock != "/srv/cache/heavy.lock" {
		t.Errorf("default locks with cache_dir /srv/cache: builder %q, lab %q", c.Builder.HeavyLock, c.Lab.QEMU.HeavyLock)
	}
	c, err = Parse([]byte("cache_dir = \"/srv/cache\"\n[builder]\nheavy_lock = \"/run/lock/kernel.lock\"\n[lab.qemu]\nheavy_lock = \"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Builder.HeavyLock != "/run/lock/kernel.lock" || c.Lab.QEMU.HeavyLock != "" {
		t.Errorf("an absolute lock and no lock: builder %q, lab %q", c.Builder.HeavyLock, c.Lab.QEMU.HeavyLock)
	}
	if d := Default(); d.Builder.HeavyLock != filepath.Join(d.CacheDir, "heavy.lock") {
		t.Errorf("Default: %q", d.Builder.HeavyLock)
	}
}

// Serve and the CLI find the lab's cache (its guest images) and the
// hosts' leases in the same places.
func TestLabDirs(t *testing.T) {
	c := Default()
	c.CacheDir, c.DataDir = "/c", "/d"
	if d := c.LabDirs(); d.Cache != "/c/lab" || d.Leases != "/d/lab-leases" {
		t.Fatalf("LabDirs = %+v", d)
	}
}
