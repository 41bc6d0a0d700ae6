package lab

import (
	"fmt"
	"regexp"
	"time"

	"github.com/rdmabot/rdmabot/internal/cfgtype"
)

// Config is the [lab] section of config.toml.
type Config struct {
	// Default is the name of the pair used when a job names none: "qemu"
	// or the name of one of Pairs.
	Default string `toml:"default"`
	// QEMU is the built-in pair: two TCG guests joined by soft-RoCE.
	QEMU QEMUConfig `toml:"qemu"`
	// Pairs are real hosts driven over SSH.
	Pairs []SSHPairConfig `toml:"pairs"`
	// Test is what the bot runs on every kernel it measures.
	Test Test `toml:"test"`
	// Lossy is the second profile: the test over a lossy, delaying
	// link, for changes to the code the motivating hang lived in (error,
	// flush, drain, teardown) and for new mainline heads.
	Lossy LossyConfig `toml:"lossy"`
	// Pressure is the third: the Send Queue pressure test, for changes
	// to the send, chunk and completion paths and for new mainline heads.
	Pressure PressureConfig `toml:"pressure"`
	// Debug is the fourth: the test on kernels built with KASAN, lockdep
	// and line tables, for changes to teardown, drain and error paths.
	Debug DebugConfig `toml:"debug"`
	// ClientSide is the fifth: a series' kernel that boots on the server
	// boots on the client too, beside the base on the server, for
	// changes to code both sides run (ib_core, the soft providers).
	ClientSide ClientSideConfig `toml:"client_side"`
	// Fstests is the sixth: fstests over NFS/RDMA, for changes to the
	// chunk and READ/WRITE paths, and for new mainline heads.
	Fstests FstestsConfig `toml:"fstests"`
}

// ClientSideConfig is the client-side profile. A series whose kernel
// boots on the server (CandidateSide) but changes files matching
// Touches, code the client runs as much as the server, first gets Boots
// boots of each kernel on the client, beside the base kernel on the
// server, which takes the times and checks every file the client wrote
// and read back: the client's own uses of that code (FRWR registration,
// its Sends and Receives) are otherwise never run by the series' kernel.
type ClientSideConfig struct {
	// Boots per side; 0 turns the profile off.
	Boots int `toml:"boots"`
	// Touches is a regular expression over the series' changed files.
	Touches string `toml:"touches"`
}

// DebugConfig is the debug profile. A series whose changed lines or
// functions match Touches gets its base and candidate built a second
// time with the debug configuration (kbuild lab qemu-debug), and their
// first round starts with Boots boots of each, base and candidate
// alternating; only crashes count, decoded to source lines.
type DebugConfig struct {
	// Boots per side; 0 turns the profile off.
	Boots int `toml:"boots"`
	// Iterations of the test per boot: KASAN and lockdep slow a TCG
	// guest down, and a teardown path runs at every unmount.
	Iterations int `toml:"iterations"`
	// Touches is a regular expression over the series' changed lines
	// and the functions their hunks are in.
	Touches string `toml:"touches"`
}

// DebugTest is the debug profile's test: the configured one, shorter.
func (c *Config) DebugTest() Test {
	t := c.Test
	t.Iterations = c.Debug.Iterations
	return t
}

// PressureConfig is the Send Queue pressure profile: boots that fill the
// server's Send Queue with Write and Read chunks (Load), on each of
// Providers, base and candidate alternating. What decides is evidence,
// not throughput: a provider refusing a Send for a full queue, a
// completion queue overflowing, reconnects, retransmissions or a crash
// that no base boot shows.
type PressureConfig struct {
	// Providers are the soft RDMA devices the profile runs on, in
	// turn; empty turns the profile off.
	Providers []string `toml:"providers"`
	// Boots per provider and side.
	Boots int `toml:"boots"`
	// NFSVersions are used in turn, boot by boot.
	NFSVersions []string `toml:"nfs_versions"`
	// SizeMiB is the file the readers read.
	SizeMiB int `toml:"size_mib"`
	Seconds int `toml:"seconds"`
	Readers int `toml:"readers"`
	Writers int `toml:"writers"`
	Credits int `toml:"credits"`
	Threads int `toml:"threads"`
	// Touches is a regular expression over the series' changed files,
	// changed lines and the functions their hunks are in.
	Touches string `toml:"touches"`
}

// PressureTest is the pressure profile's test for its boot-th boot on
// provider (0-based): NFS versions in turn.
func (c Config) PressureTest(provider string, boot int) Test {
	p := c.Pressure
	t := Test{Kind: "pressure", SizeMiB: p.SizeMiB, Iterations: 1, NFSVersion: "3", Transport: "rdma", RDMA: provider,
		HungTaskSecs: c.Test.HungTaskSecs,
		Load:         &Load{Seconds: p.Seconds, Readers: p.Readers, Writers: p.Writers, Credits: p.Credits, Threads: p.Threads}}
	if len(p.NFSVersions) > 0 {
		t.NFSVersion = p.NFSVersions[boot%len(p.NFSVersions)]
	}
	return t
}

// LossyConfig is the lossy link profile. Its boots start the first
// round of a series whose patches' changed lines or functions match
// Touches, and of every new mainline head, base and candidate
// alternating; only crashes count under it (throughput over a lossy link
// says nothing a maintainer can use).
type LossyConfig struct {
	// Netem is tc netem's arguments for both hosts' side of the test
	// link; "" turns the profile off.
	Netem string `toml:"netem"`
	// Boots per side.
	Boots int `toml:"boots"`
	// Touches is a regular expression over the series' changed lines
	// and the functions their hunks are in.
	Touches string `toml:"touches"`
}

// LossyTest is the lossy profile's test: the configured one over the shaped
// link.
func (c *Config) LossyTest() Test {
	t := c.Test
	t.Netem = c.Lossy.Netem
	return t
}

// QEMUConfig tunes the built-in pair.
type QEMUConfig struct {
	// Binary is the QEMU system emulator.
	Binary string `toml:"binary"`
	// MemoryMiB per guest; the client holds two copies of the file in
	// /dev/shm and the server the exported tmpfs.
	MemoryMiB int `toml:"memory_mib"`
	// Icount is QEMU's -icount option: guest time follows executed
	// instructions, which cuts boot-to-boot spread several-fold (shift=3:
	// 1.2x the wall time of plain TCG). Empty runs plain TCG (fast, noisy).
	Icount string `toml:"icount"`
	// HeavyLock is flock'ed around a run so pairs and kernel builds on one
	// machine do not disturb each other's timings; a relative path is in
	// cache_dir. Empty: no lock.
	HeavyLock string `toml:"heavy_lock"`
	// Per-phase deadlines; a guest that misses one is killed.
	BootTimeout      cfgtype.Duration `toml:"boot_timeout"`
	SetupTimeout     cfgtype.Duration `toml:"setup_timeout"`
	IterationTimeout cfgtype.Duration `toml:"iteration_timeout"`
	PerMiBTimeout    cfgtype.Duration `toml:"per_mib_timeout"`
	ShutdownTimeout  cfgtype.Duration `toml:"shutdown_timeout"`
	// CrashGrace is how long the console is still read after a fatal
	// crash starts, for the rest of its trace.
	CrashGrace cfgtype.Duration `toml:"crash_grace"`
	// BusyGuestWait: a boot during which the guests' threads waited for
	// a CPU more than this on average (threads waiting, as a count) was
	// measured under contention. Its figures and whatever it crashed of
	// are not evidence; it is booted again, up to BusyRepeats times, and
	// then the run is the lab's fault (INFRA, retried later). 0: off.
	BusyGuestWait float64 `toml:"busy_guest_wait"`
	BusyRepeats   int     `toml:"busy_repeats"`
	// QuietCores and QuietWait: before each boot, while other programs
	// keep more than QuietCores of the host's cores busy, the boot waits
	// (up to QuietWait) for them to stop, rather than being measured
	// under contention and set aside. 0 wait: boot at once.
	QuietCores float64          `toml:"quiet_cores"`
	QuietWait  cfgtype.Duration `toml:"quiet_wait"`
}

// KernelLab names the kernel configuration (builder/kbuild's labs) that
// pair boots: "qemu" for the QEMU pair, a real pair's rdma ("hw", "opa").
func (c *Config) KernelLab(pair string) (string, error) {
	if pair == "qemu" {
		return "qemu", nil
	}
	for _, p := range c.Pairs {
		if p.Name == pair {
			return p.RDMA, nil
		}
	}
	return "", fmt.Errorf("lab %q names no pair (lab.pairs) and is not \"qemu\"", pair)
}

// SSHPairConfig is a real pair.
type SSHPairConfig struct {
	Name   string        `toml:"name"`
	Server SSHHostConfig `toml:"server"`
	Client SSHHostConfig `toml:"client"`
	// Lease bounds a reservation: a crashed bot's hosts are free again
	// after it.
	Lease cfgtype.Duration `toml:"lease"`
	// RDMA is "hw" or "opa" (Omni-Path: connected mode, opafm).
	RDMA string `toml:"rdma"`
	// Disposable is the operator's word that both hosts may be owned by
	// a posted series: the driver boots the kernel under test on the
	// host with its own disks, network and keys, so the first hostile
	// series owns them. A pair that is not disposable is refused.
	Disposable bool `toml:"disposable"`
}

// SSHHostConfig is one real host.
type SSHHostConfig struct {
	// Address is host:port for SSH.
	Address string `toml:"address"`
	User    string `toml:"user"`
	// KeyFile is the private key; KnownHosts is checked strictly.
	KeyFile    string `toml:"key_file"`
	KnownHosts string `toml:"known_hosts"`
	// TestIP is the host's address on the RDMA link, Netdev its netdev.
	TestIP string `toml:"test_ip"`
	Netdev string `toml:"netdev"`
	// Boot is "kexec" (fast, no firmware) or "grub-reboot" (a one-shot
	// GRUB entry; the next plain reboot returns to the known-good kernel).
	Boot string `toml:"boot"`
	// PowerCycle is the BMC command run on the controller when the host
	// stops answering, e.g. ["ipmitool", "-I", "lanplus", "-H", "bmc1",
	// "-U", "lab", "-f", "/etc/rdmabot/bmc1", "chassis", "power", "cycle"]
	// or a curl to its Redfish ComputerSystem.Reset action.
	PowerCycle []string `toml:"power_cycle"`
}

// DefaultConfig uses the built-in QEMU pair in instruction-counting mode.
func DefaultConfig() Config {
	return Config{
		Default: "qemu",
		QEMU: QEMUConfig{
			Binary:           "qemu-system-x86_64",
			MemoryMiB:        1024,
			Icount:           "shift=3,sleep=on",
			HeavyLock:        "heavy.lock",
			BootTimeout:      cfgtype.D(90 * time.Second),
			SetupTimeout:     cfgtype.D(180 * time.Second),
			IterationTimeout: cfgtype.D(60 * time.Second),
			PerMiBTimeout:    cfgtype.D(time.Second),
			ShutdownTimeout:  cfgtype.D(60 * time.Second),
			CrashGrace:       cfgtype.D(10 * time.Second),
			BusyGuestWait:    0.55,
			BusyRepeats:      2,
			QuietCores:       0.3,
			QuietWait:        cfgtype.D(5 * time.Minute),
		},
		Test: DefaultTest(),
		Lossy: LossyConfig{
			Netem:   "delay 1ms loss 0.01%",
			Boots:   3,
			Touches: `(?i)drain|flush|teardown|destroy|disconnect|shutdown|close|error|_err\b|\berr\b`,
		},
		Debug: DebugConfig{
			Boots: 1, Iterations: 1,
			Touches: `(?i)drain|flush|teardown|destroy|disconnect|shutdown|close|free|release|put\b|error|_err\b|\berr\b`,
		},
		ClientSide: ClientSideConfig{
			Boots:   2,
			Touches: `^(drivers/infiniband/(core|sw/rxe|sw/siw)/|include/rdma/)`,
		},
		// lab/PRESSURE.md works out why these reach the Send Queue's edge.
		Pressure: PressureConfig{
			Providers: []string{"rxe", "siw"}, Boots: 1, NFSVersions: []string{"3", "4.1"},
			SizeMiB: 64, Seconds: 30, Readers: 24, Writers: 4, Credits: 20, Threads: 16,
			Touches: PressureTouches,
		},
		Fstests: DefaultFstests(),
	}
}

// PressureTouches is what asks for the pressure profile by default:
// svcrdma's send, rw and recv paths and the transport's setup,
// the rdma_rw API, verbs' queue and CQ code, xprtrdma's send and
// FRWR paths, and the words of Send Queue and completion accounting.
const PressureTouches = `(?i)svc_rdma_(sendto|rw|recvfrom|transport)\.c|core/(rw|verbs|cq)\.c|xprtrdma/(frwr_ops|verbs|rpc_rdma)\.c|include/rdma/(rw|ib_verbs)\.h|svc_rdma\.h|sq_avail|sqecount|sq_depth|send_wr|post_send|ib_drain|wake_send_waiters|max_requests|cq_size|ib_alloc_cq`

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	if c.Default == "" {
		return fmt.Errorf("lab.default is empty")
	}
	q := c.QEMU
	if q.Binary == "" {
		return fmt.Errorf("lab.qemu.binary is empty")
	}
	if q.MemoryMiB < 256 {
		return fmt.Errorf("lab.qemu.memory_mib %d: want at least 256", q.MemoryMiB)
	}
	for name, d := range map[string]cfgtype.Duration{
		"boot_timeout": q.BootTimeout, "setup_timeout": q.SetupTimeout, "iteration_timeout": q.IterationTimeout,
		"shutdown_timeout": q.ShutdownTimeout, "crash_grace": q.CrashGrace,
	} {
		if d.Duration <= 0 {
			return fmt.Errorf("lab.qemu.%s must be positive", name)
		}
	}
	if q.BusyGuestWait < 0 || q.BusyRepeats < 0 {
		return fmt.Errorf("lab.qemu.busy_guest_wait and busy_repeats must not be negative")
	}
	if q.QuietWait.Duration < 0 || (q.QuietWait.Duration > 0 && q.QuietCores <= 0) {
		return fmt.Errorf("lab.qemu.quiet_wait must not be negative, and needs a positive quiet_cores")
	}
	if err := c.Test.Validate(); err != nil {
		return fmt.Errorf("lab.test: %w", err)
	}
	if l := c.Lossy; l.Netem != "" {
		if c.Test.Netem != "" {
			return fmt.Errorf("lab.lossy: lab.test.netem shapes every boot already; leave one of them empty")
		}
		if err := c.LossyTest().Validate(); err != nil {
			return fmt.Errorf("lab.lossy: %w", err)
		}
		if l.Boots < 1 {
			return fmt.Errorf("lab.lossy.boots %d: want at least 1 (or netem = \"\" to turn the profile off)", l.Boots)
		}
		if _, err := regexp.Compile(l.Touches); err != nil || l.Touches == "" {
			return fmt.Errorf("lab.lossy.touches %q: want a regular expression: %v", l.Touches, err)
		}
	}
	if d := c.Debug; d.Boots != 0 {
		if d.Boots < 0 || d.Iterations < 1 {
			return fmt.Errorf("lab.debug: boots %d and iterations %d: want boots >= 0 (0 = off) and iterations >= 1", d.Boots, d.Iterations)
		}
		if _, err := regexp.Compile(d.Touches); err != nil || d.Touches == "" {
			return fmt.Errorf("lab.debug.touches %q: want a regular expression: %v", d.Touches, err)
		}
	}
	if cs := c.ClientSide; cs.Boots != 0 {
		if cs.Boots < 0 {
			return fmt.Errorf("lab.client_side.boots %d: want at least 0 (0 = off)", cs.Boots)
		}
		if _, err := regexp.Compile(cs.Touches); err != nil || cs.Touches == "" {
			return fmt.Errorf("lab.client_side.touches %q: want a regular expression: %v", cs.Touches, err)
		}
	}
	if p := c.Pressure; len(p.Providers) > 0 {
		if p.Boots < 1 {
			return fmt.Errorf("lab.pressure.boots %d: want at least 1 (or providers = [] to turn the profile off)", p.Boots)
		}
		for _, prov := range p.Providers {
			if prov != "rxe" && prov != "siw" {
				return fmt.Errorf("lab.pressure.providers: %q: want rxe or siw (the QEMU pair's soft devices)", prov)
			}
		}
		for i := range max(len(p.NFSVersions), 1) {
			if err := c.PressureTest(p.Providers[0], i).Validate(); err != nil {
				return fmt.Errorf("lab.pressure: %w", err)
			}
		}
		if _, err := regexp.Compile(p.Touches); err != nil || p.Touches == "" {
			return fmt.Errorf("lab.pressure.touches %q: want a regular expression: %v", p.Touches, err)
		}
	}
	if err := c.Fstests.validate(*c); err != nil {
		return err
	}
	return c.validatePairs()
}

// validatePairs checks the real pairs and that lab.default names one
// (or the QEMU pair).
func (c *Config) validatePairs() error {
	names := map[string]bool{"qemu": true}
	for i, p := range c.Pairs {
		if p.Name == "" || names[p.Name] {
			return fmt.Errorf("lab.pairs[%d]: name %q empty or used twice", i, p.Name)
		}
		names[p.Name] = true
		if p.RDMA != "hw" && p.RDMA != "opa" {
			return fmt.Errorf("lab.pairs %s: rdma %q: want hw or opa", p.Name, p.RDMA)
		}
		if p.Lease.Duration <= 0 {
			return fmt.Errorf("lab.pairs %s: lease must be positive", p.Name)
		}
		if !p.Disposable {
			return fmt.Errorf("lab.pairs %s: a real pair boots the kernel under test (code from anyone) on its hosts with their own disks, network and keys, "+
				"and rdmabot cannot yet confine it there; set disposable = true only for hosts a hostile series may own (reinstalled, no secrets, an isolated network)", p.Name)
		}
		for role, h := range map[string]SSHHostConfig{"server": p.Server, "client": p.Client} {
			if h.Address == "" || h.User == "" || h.KeyFile == "" || h.KnownHosts == "" || h.TestIP == "" || h.Netdev == "" {
				return fmt.Errorf("lab.pairs %s.%s: address, user, key_file, known_hosts, test_ip and netdev are required", p.Name, role)
			}
			if h.Boot != "kexec" && h.Boot != "grub-reboot" {
				return fmt.Errorf("lab.pairs %s.%s: boot %q: want kexec or grub-reboot", p.Name, role, h.Boot)
			}
		}
	}
	if !names[c.Default] {
		return fmt.Errorf("lab.default %q names no pair", c.Default)
	}
	return nil
}
