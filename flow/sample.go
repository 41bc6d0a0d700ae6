package flow

import "strings"

// Sample is one lab measurement: metrics, or the crash that ended it.
type Sample struct {
	// Metrics are the run's means; Iterations the per-iteration values.
	Metrics    map[string]float64   `json:"metrics,omitempty"`
	Iterations map[string][]float64 `json:"iterations,omitempty"`
	Crash      string               `json:"crash,omitempty"`
	Log        string               `json:"log,omitempty"`
	// Stall says Crash is a stall the lab saw (a phase's deadline passed
	// with no report from the kernel): seen in one boot only, it is not
	// mailed (reports.Crash.Confirmed).
	Stall bool `json:"stall,omitempty"`
	// Corrupt says the boot's data did not survive the round trip (the
	// transfer test's cmp), and where; a boot that crashed too is a crash.
	Corrupt string `json:"corrupt,omitempty"`
	// Profile names the lab profile of a boot other than the default:
	// "lossy" (lab.lossy), "pressure-rxe" (lab.pressure on rxe). Its
	// figures are kept but never compared with the default test's; its
	// crashes count, and a pressure boot's transport counts are evidence.
	Profile string `json:"profile,omitempty"`
	// HostOtherCores is the host's CPU other programs used during the
	// boot (lab.Result's); BusyRepeated the same for each boot before it
	// that was set aside as measured under contention.
	HostOtherCores float64   `json:"host_other_cores,omitempty"`
	GuestCPUWait   float64   `json:"guest_cpu_wait,omitempty"`
	BusyRepeated   []float64 `json:"busy_repeated,omitempty"`
	// QuietWait is the seconds the boot waited for a quiet host first.
	QuietWait float64 `json:"quiet_wait_s,omitempty"`
	// Health is what the transport counted during the boot's test
	// (lab.Health.Counters); nil when the boot did not report it.
	Health map[string]int `json:"health,omitempty"`
	// Consoles names each guest's whole serial console of the boot
	// (role: "server", "client") as PutConsole stored it.
	Consoles map[string]string `json:"consoles,omitempty"`
	// Tests are the functional tests the boot ran, in order (the
	// fstests profile); ServerOps the NFS operations the boot's trusted
	// server counted while they ran (0: not counted), so that a client
	// that reports tests it never ran is seen.
	Tests     []TestResult `json:"tests,omitempty"`
	ServerOps int64        `json:"server_ops,omitempty"`
	// Confirming says the boot ran again only the tests the patched
	// kernel had failed where the base passed them: a test it did not
	// run is not its failure, and its operation count is not a group's.
	Confirming bool `json:"confirming,omitempty"`
}

// TestResult is one functional test of a boot (an fstests test).
type TestResult struct {
	Name   string  `json:"name"`   // "generic/075"
	Status string  `json:"status"` // TestPass, TestFail or TestNotRun
	Secs   float64 `json:"secs,omitempty"`
	// Why is a notrun's reason, or a failure's evidence: the start of its
	// .out.bad diff and fsx's log lines, bounded.
	Why string `json:"why,omitempty"`
	// Corrupt says the test read back data that differed from what it
	// wrote (fsx's "READ BAD DATA", a miscompare).
	Corrupt bool `json:"corrupt,omitempty"`
}

// The statuses of a TestResult, as fstests' check names them.
const (
	TestPass   = "pass"
	TestFail   = "fail"
	TestNotRun = "notrun"
)

// ProfileFstests names the fstests profile (lab.fstests); its boots'
// Sample.Profile adds the provider: "fstests-rxe".
const ProfileFstests = "fstests"

// IsFstests says the sample is a boot of the fstests profile, on any
// provider.
func (s Sample) IsFstests() bool {
	return s.Profile == ProfileFstests || strings.HasPrefix(s.Profile, ProfileFstests+"-")
}

// ProfileLossy is Sample.Profile of a boot over lab.lossy's link.
const ProfileLossy = "lossy"

// ProfileDebug is Sample.Profile of a boot of a debug kernel (lab.debug:
// KASAN, lockdep, line tables).
const ProfileDebug = "debug"

// ProfilePressure names the Send Queue pressure profile (lab.pressure);
// its boots' Sample.Profile adds the provider: "pressure-rxe".
const ProfilePressure = "pressure"

// ProfileClientSide is Sample.Profile of a boot of a series' kernel on
// the client beside the base on the server (lab.client_side), for a
// series whose kernel otherwise boots on the server.
const ProfileClientSide = "client-side"

// IsPressure says the sample is a boot of the pressure profile, on any
// provider.
func (s Sample) IsPressure() bool {
	return s.Profile == ProfilePressure || strings.HasPrefix(s.Profile, ProfilePressure+"-")
}

// Boot is what one lab boot runs.
type Boot struct {
	// Dir holds the kernel under test.
	Dir string
	// Trusted, when set, holds the series' base kernel, booted on the
	// pair's other side than Side: the kernel under test is code from
	// anyone, so the side that measures and checks the transfer runs a
	// kernel the series did not write. Empty: Dir's kernel boots on both
	// sides (a base, a mainline head, a bisection step).
	Trusted string
	// Side is "server" or "client": where Dir's kernel boots beside
	// Trusted (Lab.CandidateSide).
	Side string
	// Debug holds Dir's commit built for the debug profile (KASAN,
	// lockdep, line tables: Stages.DebugBuild); "" when the test has no
	// debug kernels. The debug profile boots it in Dir's place.
	Debug string
	// Thorough asks the profiles for their larger variants (the fstests
	// profile's larger group): a new mainline head, or a test someone
	// asked for ("#rdmabot test fstests").
	Thorough bool
}

// KernelOn is the directory of the kernel that booted on the pair's side
// role ("server", "client").
func (b Boot) KernelOn(role string) string {
	if b.Trusted != "" && role != b.Side {
		return b.Trusted
	}
	return b.Dir
}
