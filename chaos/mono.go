package chaos

import (
	"time"

	"golang.org/x/sys/unix"
)

// Mono is a reading of the machine's monotonic clock (CLOCK_MONOTONIC), in
// nanoseconds. Unlike the monotonic part of a time.Time, which counts from
// the start of its process, it is the same clock in every process on the
// machine, so the events of the harness and of its client processes can
// be put on one time line.
type Mono int64

// Now returns the current reading of the monotonic clock.
func Now() Mono {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("chaos: CLOCK_MONOTONIC unavailable: " + err.Error()) // Linux always has it
	}
	return Mono(ts.Nano())
}

// At converts t, a time of this process, to the monotonic clock.
func At(t time.Time) Mono { return Now() + Mono(time.Until(t)) }

// Sub returns m - o as a duration.
func (m Mono) Sub(o Mono) time.Duration { return time.Duration(m - o) }

// Add returns m + d.
func (m Mono) Add(d time.Duration) Mono { return m + Mono(d) }
