package reports

import "github.com/rdmabot/rdmabot/flow"

// Confirmed says a crash is evidence enough to mail: the patched kernel
// failed in a second boot too (the lab boots it once more after one
// failure, bot.RunRound). A crash the kernel reported (oops, WARN,
// KASAN, hung task) is confirmed by any crash or stall of another boot
// (Crashed), whatever its signature: a patch that corrupts memory oopses
// somewhere else in each boot, and one starved or unlucky emulated boot
// is what the second rules out. A stall that only the lab saw (a
// deadline passed) needs its own signature again (Boots): a slow guest
// stalls too, and an unrelated failure beside it says nothing of the
// stall. One failed boot stays on the dashboard.
func (c *Crash) Confirmed() bool {
	if c == nil {
		return false
	}
	if c.Stall {
		return c.Boots >= 2
	}
	return c.Crashed >= 2
}

// Unconfirmed is v's crash when it is not evidence enough to mail (nil
// otherwise).
func (v *Verdict) Unconfirmed() *Crash {
	if v.Outcome == flow.Crash && v.Crash != nil && !v.Crash.Confirmed() {
		return v.Crash
	}
	return nil
}

// Summary is a verdict as the dashboard and the API keep it: the
// reply's sentence and the crash's or boot failure's title, and why an
// unconfirmed crash or stall was not mailed.
func Summary(c *Config, v *Verdict) string {
	s := Sentence(c, v)
	if t := Title(v); t != "" {
		s += " " + t
	}
	if c := v.Unconfirmed(); c != nil {
		kind := "crash"
		if c.Stall {
			kind = "stall"
		}
		s += " (a " + kind + " in one boot of the patched kernel, not confirmed by another: not mailed)"
	}
	return s
}
