package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/flock"
)

// HeavyLockPath is the test run's own heavy lock, the one
// scripts/prepare-lab.sh builds under: $RDMABOT_TEST_CACHE/heavy.lock.
// It is never a production serve's (that one is in serve's cache_dir):
// a serve, an A/A bench or a second checkout's tests running on the
// machine must not hold a test run for hours, nor the other way round.
// "" (no lock) when no test cache is set, or when the caller holds the
// lock around the whole run (RDMABOT_TEST_LOCKED=1), since taking it
// again would wait for ever.
func HeavyLockPath() string {
	c := os.Getenv("RDMABOT_TEST_CACHE")
	if c == "" || os.Getenv("RDMABOT_TEST_LOCKED") == "1" {
		return ""
	}
	return filepath.Join(c, "heavy.lock")
}

// heavyLockWait bounds a test's wait for the lock: a holder that never
// lets go fails the test with its path instead of hanging the run until
// go test's timeout.
const heavyLockWait = 30 * time.Minute

// HoldHeavyLock takes HeavyLockPath until the test ends, so the test's
// builds and boots run back to back instead of queueing for each one.
func HoldHeavyLock(tb testing.TB) {
	tb.Helper()
	path := HeavyLockPath()
	if path == "" {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), heavyLockWait)
	defer cancel()
	release, err := flock.Exclusive(ctx, path)
	if err != nil {
		tb.Fatalf("the tests' heavy lock: %v (another test run holds it?)", err)
	}
	if waited := time.Since(start); waited > time.Second {
		tb.Logf("waited %v for %s", waited.Round(time.Second), path)
	}
	tb.Cleanup(release)
}
