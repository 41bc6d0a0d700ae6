package cgroup

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The limit tests the guest runs as its unprivileged user.
var guestTests = []string{"TestMemoryLimitKills", "TestTaskLimitBoundsForks", "TestCPULimitThrottles", "TestRemoveKillsAndCleans"}

// guestInit is the guest's /init (busybox sh). It mounts cgroup2 alone
// at /sys/fs/cgroup, sets up a service's cgroup as systemd does for
// Delegate=yes (memory, pids and cpu enabled down to it, the service
// alone in it), and runs the limit tests as user rb through
// delegate-cgroup.sh: first with the script run by rb itself, which may
// make no cgroup (it says so, the tests skip for want of limits), then
// run by root the way scripts/run.sh starts serve; last run by root
// it from a cgroup another process shares (a login session's), where v2
// lets it enable nothing: it says so, and the tests skip.
const guestInit = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
chmod 1777 /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo "@@CGV2 kernel $(uname -r) cpus $(nproc) controllers $(cat /sys/fs/cgroup/cgroup.controllers)"
s=/sys/fs/cgroup/system.slice
mkdir -p $s/rdmabot.service
echo "+memory +pids +cpu" > /sys/fs/cgroup/cgroup.subtree_control
echo "+memory +pids +cpu" > $s/cgroup.subtree_control
echo "@@CGV2 BEGIN unprivileged"
su -s /bin/sh rb -c "sh /delegate-cgroup.sh rb rdmabot-serve /limit-tests.sh" 2>&1
echo "@@CGV2 END unprivileged rc=$?"
echo "@@CGV2 BEGIN delegated"
sh -c "echo \$\$ > $s/rdmabot.service/cgroup.procs && exec sh /delegate-cgroup.sh rb rdmabot-serve su -s /bin/sh rb -c /limit-tests.sh"
echo "@@CGV2 END delegated rc=$?"
u=/sys/fs/cgroup/user.slice
mkdir -p $u/session.scope
echo "+memory +pids +cpu" > $u/cgroup.subtree_control
echo "@@CGV2 BEGIN crowded"
sh -c "echo \$\$ > $u/session.scope/cgroup.procs && { sleep 600 & } && exec sh /delegate-cgroup.sh rb rdmabot-serve su -s /bin/sh rb -c /limit-tests.sh" 2>&1
echo "@@CGV2 END crowded rc=$?"
find $s -name memory.max | while read f; do echo "@@CGV2 tree ${f%/memory.max} owner $(stat -c %U ${f%/memory.max}) subtree $(cat ${f%/memory.max}/cgroup.subtree_control)"; done
reboot -f
`

// Limits as deployed on a cgroup v2 host: Debian's own packaged kernel
// boots under QEMU (TCG) with the unified hierarchy alone, and this
// package's limit tests run inside it as an unprivileged user, started
// through scripts/delegate-cgroup.sh. There a memory hog is killed at
// its limit, forks beyond pids.max fail, and busy loops are throttled
// to cpu.max; without the delegation the same user gets no limits.
func TestLimitsOnCgroupV2Guest(t *testing.T) {
	kernel := os.Getenv("RDMABOT_TEST_V2_KERNEL")
	if kernel == "" {
		t.Skip("no Debian kernel: RDMABOT_TEST_V2_KERNEL is unset (scripts/test.sh sets it with scripts/debian-kernel.sh)")
	}
	if _, err := os.Stat(kernel); err != nil {
		t.Skipf("no Debian kernel: %v (scripts/debian-kernel.sh fetches it)", err)
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 is not installed (Debian's qemu-system-x86; scripts/setup.sh installs it)")
	}
	initrd := guestInitramfs(t)
	console := filepath.Join(t.TempDir(), "console.log")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	start := time.Now()
	// TCG only, no network device; the guest powers off when done.
	cmd := exec.CommandContext(ctx, "nice", "-n", "5", qemu, "-accel", "tcg", "-smp", "2", "-m", "512",
		"-kernel", kernel, "-initrd", initrd, "-append", "console=ttyS0 panic=-1 quiet",
		"-nographic", "-no-reboot", "-nic", "none", "-monitor", "none", "-serial", "file:"+console)
	if out, err := cmd.CombinedOutput(); err != nil {
		b, _ := os.ReadFile(console)
		t.Fatalf("qemu: %v %s\nconsole:\n%s", err, out, b)
	}
	b, err := os.ReadFile(console)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest ran for %v", time.Since(start).Round(time.Second))
	checkGuestConsole(t, string(b))
}

// checkGuestConsole holds the guest's console to what must have held.
func checkGuestConsole(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "@@CGV2") || strings.Contains(line, "cgroup_test.go") || strings.HasPrefix(line, "0::") || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "delegate-cgroup:") {
			t.Log(strings.TrimSpace(line))
		}
	}
	section := func(name string) string {
		m := regexp.MustCompile(`(?s)@@CGV2 BEGIN ` + name + `\r?\n(.*)@@CGV2 END ` + name + ` rc=(\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("the guest never finished its %s run:\n%s", name, out)
		}
		return m[1]
	}
	m := regexp.MustCompile(`@@CGV2 kernel .* controllers (.*)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the guest never mounted cgroup2:\n%s", out)
	}
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !strings.Contains(" "+strings.TrimSpace(m[1])+" ", " "+c+" ") {
			t.Errorf("the guest's cgroup2 has no %s controller: %s", c, m[1])
		}
	}
	without := section("unprivileged")
	if !strings.Contains(without, "delegate-cgroup: cannot make /sys/fs/cgroup/rdmabot-serve/serve") ||
		!strings.Contains(without, "--- SKIP: TestMemoryLimitKills") || !strings.Contains(without, "no cgroup limits here") {
		t.Errorf("as rb in the root's cgroup, the script made a cgroup or the limit tests did not skip for want of limits:\n%s", without)
	}
	crowded := section("crowded")
	if !strings.Contains(crowded, "delegate-cgroup: cannot enable memory in /sys/fs/cgroup/user.slice/session.scope: other processes share it") ||
		!strings.Contains(crowded, "--- SKIP: TestMemoryLimitKills") {
		t.Errorf("from a cgroup with another process in it, the script did not say it could not delegate:\n%s", crowded)
	}
	with := section("delegated")
	for _, name := range guestTests {
		if !strings.Contains(with, "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass in the delegated cgroup", name)
		}
	}
	if strings.Contains(with, "--- SKIP") || strings.Contains(with, "--- FAIL") || !strings.Contains(with, "0::/system.slice/rdmabot.service/rdmabot-serve/serve") {
		t.Errorf("in the delegated cgroup:\n%s", with)
	}
}

// guestInitramfs is a newc cpio of busybox, this package's tests built
// static, scripts/delegate-cgroup.sh and the guest's /init.
func guestInitramfs(t *testing.T) string {
	t.Helper()
	busybox := "/bin/busybox"
	if !static(busybox) {
		t.Skipf("no static %s (Debian's busybox-static; scripts/setup.sh installs it)", busybox)
	}
	for _, tool := range []string{"go", "cpio"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for _, d := range []string{"bin", "etc", "proc", "sys", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join("..", "..", "scripts", "delegate-cgroup.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]struct {
		body string
		mode os.FileMode
	}{
		"bin/busybox":        {string(bb), 0o755},
		"init":               {guestInit, 0o755},
		"delegate-cgroup.sh": {string(script), 0o755},
		"limit-tests.sh": {"#!/bin/sh\ncat /proc/self/cgroup\ncd /tmp && HOME=/tmp TMPDIR=/tmp exec /cgroup.test -test.v -test.run '^(" +
			strings.Join(guestTests, "|") + ")$'\n", 0o755},
		"etc/passwd": {"root:x:0:0:root:/:/bin/sh\nrb:x:1000:1000:rb:/tmp:/bin/sh\n", 0o644},
		"etc/group":  {"root:x:0:\nrb:x:1000:\n", 0o644},
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(f.body), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "test", "-c", "-o", filepath.Join(root, "cgroup.test"), ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the guest's test binary: %v %s", err, out)
	}
	initrd := filepath.Join(dir, "initrd.cpio")
	pack := exec.Command("sh", "-c", "find . | cpio -o -H newc -R 0:0 --quiet > "+initrd)
	pack.Dir = root
	if out, err := pack.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v %s", err, out)
	}
	return initrd
}

// static says whether the ELF program at path needs no dynamic loader.
func static(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}
