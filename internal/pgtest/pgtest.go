// Package pgtest starts a real, throwaway PostgreSQL server for tests:
// Debian's postgresql 15 binaries, run as user postgres (initdb refuses
// root), on a random port of 127.0.0.1 with its socket in the temp dir.
package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

const binDir = "/usr/lib/postgresql/15/bin"

// Start returns the URL of an empty database, from RDMABOT_TEST_PG_URL
// when set, else from a server it starts and stops in t.Cleanup.
func Start(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("RDMABOT_TEST_PG_URL"); u != "" {
		return u
	}
	if _, err := os.Stat(filepath.Join(binDir, "initdb")); err != nil {
		t.Skipf("PostgreSQL 15 not installed at %s and RDMABOT_TEST_PG_URL unset: %v", binDir, err)
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	// The postgres user must reach the directory: t.TempDir's parents are
	// 0700 root, so make our own under /tmp.
	dir, err := os.MkdirTemp("", "rdmabot-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	asPostgres := func(args ...string) *exec.Cmd {
		if os.Getuid() == 0 {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
		}
		return exec.Command(args[0], args[1:]...)
	}
	data := filepath.Join(dir, "data")
	if os.Getuid() == 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := asPostgres(filepath.Join(binDir, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	logf := filepath.Join(dir, "log")
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100", port, dir)
	if out, err := asPostgres(filepath.Join(binDir, "pg_ctl"), "-D", data, "-l", logf, "-o", opts, "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		b, _ := os.ReadFile(logf)
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, b)
	}
	t.Cleanup(func() {
		asPostgres(filepath.Join(binDir, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop").Run()
	})
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return url
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres did not listen: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
