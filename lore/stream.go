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
// FlushEvery, the series settled Window before the clock. A Window of 0
// holds the whole archive until Close.
//
// The clock is the time the mail says it was written (its Date, never
// after it arrived), not when it arrived: a mirror that stopped
// archiving for weeks and caught up commits mail written minutes apart
// weeks apart, and a clock that jumped with it would flush series
// whose last patches and replies were still to come. Arrival order
// bounds the Date both ways: a message is held no earlier than the
// clock it came at, so mail that comes late (a moderation queue, a
// sender's clock years behind) still waits a whole window; and the
// clock moves only as far as two consecutive messages agree, so one
// Date in the future (clamped to its arrival, which after a gap is
// weeks ahead) does not move it.
type Stream struct {
	A      *Assembler
	Window time.Duration

	// clock is the stream's time, last the previous message's written
	// time, flushed the clock at the last flush.
	clock, last, flushed time.Time
}

// Add adds (or, deleted, forgets) one message, and returns the series a
// flush settled, or nil. A message that does not parse is reported as
// err, changing nothing, so a caller may skip it and go on.
func (s *Stream) Add(raw []byte, received time.Time, deleted bool) (*Assembly, error) {
	if deleted {
		return nil, s.A.ForgetRaw(raw)
	}
	m, err := ParseMessage(raw)
	if err != nil {
		return nil, err
	}
	date, _ := writtenAt(m, received)
	s.A.add(m, received, time.Time{}, s.clock)
	if !s.last.IsZero() {
		s.clock = latest(s.clock, earliest(s.last, date))
	}
	s.last = date
	if s.Window > 0 && s.clock.Sub(s.flushed) >= FlushEvery {
		s.flushed = s.clock
		return s.A.Flush(s.clock.Add(-s.Window)), nil
	}
	return nil, nil
}

// Close flushes everything left.
func (s *Stream) Close() *Assembly {
	return s.A.Flush(time.Now().Add(100 * 365 * 24 * time.Hour))
}

func latest(x, y time.Time) time.Time {
	if y.After(x) {
		return y
	}
	return x
}

func earliest(x, y time.Time) time.Time {
	if y.Before(x) {
		return y
	}
	return x
}
