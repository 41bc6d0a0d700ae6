package lab

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Peer is the reference lab (shared/lab in the project's workspace): its
// own scripts boot the same kernel on its own image. The benchmark times it
// beside our pair in the same run, so the ratio it prints does not depend
// on how fast the machine happens to be today.
type Peer struct {
	// Dir holds the reference's run-pair.sh and build-rootfs.sh.
	Dir string
	// Work receives its image (built once by its build-rootfs.sh) and the
	// output of each run.
	Work string
}

// ensureRootfs builds the reference's guest image when it is missing.
func (p Peer) ensureRootfs(ctx context.Context) (string, error) {
	out := filepath.Join(p.Work, "rootfs.cpio.gz")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(p.Work, 0o755); err != nil {
		return "", err
	}
	tmp := out + ".tmp"
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(p.Dir, "build-rootfs.sh"), tmp)
	cmd.Env = append(os.Environ(), "W="+filepath.Join(p.Work, "build"))
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", &InfraError{Op: "reference image", Err: fmt.Errorf("%w: %s", err, tail(string(b), 5))}
	}
	return out, os.Rename(tmp, out)
}

// Run boots kernel with the reference's run-pair.sh, 32 MiB x 3 over rxe as
// its report measured, and returns the wall time its summary records.
func (p Peer) Run(ctx context.Context, kernel string, n int) (float64, error) {
	rootfs, err := p.ensureRootfs(ctx)
	if err != nil {
		return 0, err
	}
	out := filepath.Join(p.Work, fmt.Sprintf("run-%02d", n))
	if err := os.RemoveAll(out); err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(p.Dir, "run-pair.sh"), kernel, rootfs, out)
	cmd.Env = append(os.Environ(), "RDMA=rxe", "MB=32", "ITERS=3")
	b, err := cmd.CombinedOutput()
	if err != nil {
		return 0, &InfraError{Op: "reference run", Err: fmt.Errorf("%w: %s", err, tail(string(b), 5))}
	}
	return parsePeerSummary(filepath.Join(out, "summary.txt"))
}

// parsePeerSummary reads "wall_s=23.7 watch_rc=0 ..." from run-pair.sh's
// summary; a run its watcher did not pass is an error, not a figure.
func parsePeerSummary(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "wall_s=") {
			continue
		}
		kv := map[string]string{}
		for _, field := range strings.Fields(sc.Text()) {
			if k, v, ok := strings.Cut(field, "="); ok {
				kv[k] = v
			}
		}
		if kv["watch_rc"] != "0" {
			return 0, fmt.Errorf("%s: reference run failed (watch_rc=%s)", path, kv["watch_rc"])
		}
		return strconv.ParseFloat(kv["wall_s"], 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no wall_s line", path)
}
