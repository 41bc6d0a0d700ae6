package lab

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rdmabot/rdmabot/flow"
)

// The lab in a reply's words: what the configured test does, what a pair
// is, what a profile's link or kernel is. Replies are read by people who
// never saw config.toml.

// TestWords names the default test and says what one boot of it does.
func (c Config) TestWords() (name, test string) {
	t := c.Test
	proto := "NFS " + t.NFSVersion
	if t.NFSVersion == "auto" {
		proto = "NFSv3 (the reference mount)"
	} else if !strings.HasPrefix(t.NFSVersion, "4") {
		proto = "NFSv" + t.NFSVersion
	}
	proto += " over " + strings.ToUpper(t.Transport)
	if t.Kind == "fio" {
		return "NFS/RDMA fio read", fmt.Sprintf("fio sequential READ of %s %d MiB file, %d iterations per boot, %s", article(t.SizeMiB), t.SizeMiB, t.Iterations, proto)
	}
	return "NFS/RDMA transfer", fmt.Sprintf("%s %d MiB file copied to the NFS mount, back, and compared, %d iterations per boot, %s", article(t.SizeMiB), t.SizeMiB, t.Iterations, proto)
}

// PairWords describes a pair: the QEMU guests and their clock, or a real
// pair and its RDMA; an unknown pair by its name.
func (c Config) PairWords(pair string) string {
	rdma := map[string]string{"rxe": "soft-RoCE (rxe)", "siw": "soft-iWARP (siw)", "hw": "the hosts' RDMA devices", "opa": "Omni-Path"}
	if pair == "qemu" {
		q := c.QEMU
		clock := "plain TCG clock (noisy)"
		if q.Icount != "" {
			clock = "instruction-counted clock (-icount " + q.Icount + ")"
		}
		return fmt.Sprintf("two QEMU TCG guests (%d MiB each) joined by %s over a socket link, %s: emulation, not hardware",
			q.MemoryMiB, rdma[c.Test.RDMA], clock)
	}
	for _, p := range c.Pairs {
		if p.Name == pair {
			return fmt.Sprintf("two real hosts (pair %s) with %s", p.Name, rdma[p.RDMA])
		}
	}
	return pair
}

// DefaultPair is the pair of a test that names none.
func (c Config) DefaultPair() string { return c.Default }

// LinkWords names the link, load or kernel of a lab profile's boots
// (their sample's profile: "lossy", "debug", "pressure-rxe").
func (c Config) LinkWords(profile string) string {
	switch {
	case profile == flow.ProfileLossy:
		return "a lossy link (netem " + c.Lossy.Netem + " on both guests)"
	case profile == flow.ProfileDebug:
		return "debug build (KASAN, lockdep and line tables: builder/kbuild/configs/debug.config)"
	case profile == flow.ProfileClientSide:
		return "the patched kernel on the client, beside the base kernel on the server, which timed and checked the transfer"
	}
	if p, ok := strings.CutPrefix(profile, flow.ProfileFstests+"-"); ok {
		return fmt.Sprintf("fstests over NFS/RDMA on %s: check -nfs against two tmpfs exports of the server, NFS %s in turn", p, strings.Join(c.Fstests.NFSVersions, " and "))
	}
	if p, ok := strings.CutPrefix(profile, flow.ProfilePressure+"-"); ok {
		return fmt.Sprintf("Send Queue pressure on %s (%d O_DIRECT 1 MiB readers, %d writers, %d credits)", p, c.Pressure.Readers, c.Pressure.Writers, c.Pressure.Credits)
	}
	return profile
}

// PressureWords says what the pressure profile ran on providers.
func (c Config) PressureWords(providers []string) string {
	p := c.Pressure
	return fmt.Sprintf("%s under TCG; %d O_DIRECT 1 MiB readers and %d writers for %d s, %d credits, %d nfsd threads, 1 MiB rsize/wsize, NFS %s",
		strings.Join(providers, " and "), p.Readers, p.Writers, p.Seconds, p.Credits, p.Threads, strings.Join(p.NFSVersions, " and "))
}

// DebugIterations is the iterations of each debug profile boot.
func (c Config) DebugIterations() int { return c.Debug.Iterations }

// article is the indefinite article before n as it is read aloud: "an"
// for eight, eleven, eighteen, eighty-something, eight hundred, eleven
// thousand...
func article(n int) string {
	d := strconv.Itoa(n)
	if d[0] == '8' || len(d)%3 == 2 && (d[:2] == "11" || d[:2] == "18") {
		return "an"
	}
	return "a"
}
