package lore

import "time"

// FlushEvery is how much archive time a Stream lets pass between
// flushes. Each flush assembles the whole window again, so flushing
// daily assembled each message about thirty times (a fifth of a scan's
// CPU); weekly, a settled series is printed with the replies of 30 to 37
// days after its last patch, and memory holds at most 37 days.
const FlushEvery = 7 * 24 * time.Hour

// Stream feeds an archive through an Assembler in arrival order and
// flushes it as archive time passes (`rdmabot lore scan`): every
// FlushEvery, the series settled Window before the newest arrival. A
// Window of 0 holds the whole archive until Close.
type Stream struct {
	A      *Assembler
	Window time.Duration

	newest, flushed time.Time
}

// Add adds (or, deleted, forgets) one message, and returns the series a
// flush settled, or nil. A message that does not parse is reported as
// err after the flush, so a caller may skip it and go on.
func (s *Stream) Add(raw []byte, received time.Time, deleted bool) (*Assembly, error) {
	var err error
	if deleted {
		err = s.A.ForgetRaw(raw)
	} else {
		err = s.A.AddRaw(raw, received)
	}
	if received.After(s.newest) {
		s.newest = received
	}
	var out *Assembly
	if s.Window > 0 && s.newest.Sub(s.flushed) >= FlushEvery {
		out = s.A.Flush(s.newest.Add(-s.Window))
		s.flushed = s.newest
	}
	return out, err
}

// Close flushes everything left.
func (s *Stream) Close() *Assembly {
	return s.A.Flush(time.Now().Add(100 * 365 * 24 * time.Hour))
}
