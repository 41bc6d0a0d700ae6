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
	// Relative paths are the file's neighbours, as Load reads them.
	if err := want.resolveBeside(path); err != nil {
		t.Fatal(err)
	}
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

// parseErr parses in and returns its error, failing the test when there
// is none.
func parseErr(t *testing.T, in string) string {
	t.Helper()
	_, err := Parse([]byte(in))
	if err == nil {
		t.Fatalf("%q: want an error", in)
	}
	return err.Error()
}

// Once replies leave the machine (mail, a GitHub repository, patchwork
// checks), the defaults' loopback bot.url and .invalid From are refused,
// each error naming its key; with a public URL and mailbox the same
// settings load.
func TestGoingLiveNeedsPublicURLAndFrom(t *testing.T) {
	const public = "[bot]\nurl = \"https://rdmabot.example.org\"\n"
	const smtp = "[reports]\nmail = true\nfrom = \"rdmabot <rdmabot@example.org>\"\n[reports.smtp]\naddr = \"smtp.example.org:587\"\n"
	for _, c := range []struct{ in, want string }{
		{"[reports]\nmail = true\n[reports.smtp]\naddr = \"smtp.example.org:587\"\n", `bot.url "http://127.0.0.1:8480" is reachable only from this machine, but reports.mail is on`},
		{"[reports]\nmail = true\n[reports.smtp]\naddr = \"smtp.example.org:587\"\n", `reports.from "rdmabot <rdmabot@rdmabot.invalid>" is not a deliverable mailbox`},
		{public + "[reports]\nmail = true\nfrom = \"bot@localhost\"\n[reports.smtp]\naddr = \"smtp.example.org:587\"\n", `reports.from "bot@localhost"`},
		{"[bot.github]\nrepo = \"o/r\"\n", `bot.url "http://127.0.0.1:8480" is reachable only from this machine, but bot.github.repo is set`},
		{"[bot]\nurl = \"http://localhost:8480\"\n[bot.github]\nrepo = \"o/r\"\n", `bot.url "http://localhost:8480"`},
		{"[bot]\nurl = \"http://[::1]:8480\"\n[bot.github]\nrepo = \"o/r\"\n", `bot.url "http://[::1]:8480"`},
		{"[bot]\nurl = \"http://0.0.0.0:8480\"\n[bot.github]\nrepo = \"o/r\"\n", `bot.url "http://0.0.0.0:8480"`},
		{"[bot]\nurl = \"https://bot.test\"\n[bot.github]\nrepo = \"o/r\"\n", `bot.url "https://bot.test"`},
		{"[reports.patchwork]\nurl = \"https://patchwork.kernel.org\"\ntoken_file = \"/t\"\n", "but reports.patchwork.url is set"},
	} {
		if got := parseErr(t, c.in); !strings.Contains(got, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	// A GitHub repository needs no mailbox: its comments have no From.
	for _, in := range []string{public + smtp, public + "[bot.github]\nrepo = \"o/r\"\n"} {
		if _, err := Parse([]byte(in)); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// A lore.lists url intake cannot read (intake.TestCheckListURL) is
// refused at load, naming the list.
func TestListURLMustBeReadable(t *testing.T) {
	got := parseErr(t, "[[lore.lists]]\nname = \"x\"\nurl = \"htps:/lore kernel.org/linux-rdma\"\n")
	if !strings.Contains(got, `lore.lists[0] x: url "htps:/lore kernel.org/linux-rdma": `) {
		t.Error(got)
	}
}

// bot.mainline.trees names configured trees only.
func TestMainlineTreesMustBeConfigured(t *testing.T) {
	got := parseErr(t, "[bot.mainline]\ntrees = [\"linus\"]\n")
	if !strings.Contains(got, `bot.mainline.trees: "linus" is not a configured tree ([[builder.trees]] names: mainline, rdma, nfsd, local)`) {
		t.Errorf("%s", got)
	}
	if _, err := Parse([]byte("[bot.mainline]\ntrees = [\"rdma\", \"local\"]\n")); err != nil {
		t.Error(err)
	}
}
