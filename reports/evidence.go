package reports

import "github.com/rdmabot/rdmabot/flow"

// Confirmed says a crash is evidence enough to mail: the kernel reported
// it (its own trace), or, a stall that only the lab saw (a deadline
// passed), it showed in at least two of the patched kernel's boots. A
// stall of one boot stays on the dashboard: a slow or starved emulated
// guest stalls too.
func (c *Crash) Confirmed() bool { return c != nil && (!c.Stall || c.Boots >= 2) }

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
// unconfirmed stall was not mailed.
func Summary(c *Config, v *Verdict) string {
	s := Sentence(c, v)
	if t := Title(v); t != "" {
		s += " " + t
	}
	if v.Unconfirmed() != nil {
		s += " (a stall in one boot of the patched kernel, not confirmed by another: not mailed)"
	}
	return s
}
