package cmdutil

import "time"

// Human returns d as a person reads it: to the millisecond below a
// second ("333ms", not "333.333333ms"), to three figures up to a minute
// ("3.33s", "33.3s"), and to the second beyond ("2m30s").
func Human(d time.Duration) string {
	a := d.Abs()
	switch {
	case a == 0:
		return "0s"
	case a < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case a < time.Second:
		return d.Round(time.Millisecond).String()
	case a < 10*time.Second:
		return d.Round(10 * time.Millisecond).String()
	case a < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// unit is the precision Human shows d to.
func unit(d time.Duration) time.Duration {
	switch a := d.Abs(); {
	case a < time.Millisecond:
		return time.Microsecond
	case a < time.Second:
		return time.Millisecond
	case a < 10*time.Second:
		return 10 * time.Millisecond
	case a < time.Minute:
		return 100 * time.Millisecond
	}
	return time.Second
}

// Down returns d cut down to the precision Human shows it to: a limit
// that must not be exceeded ("use --grace 3.33s or less").
func Down(d time.Duration) time.Duration { return d.Truncate(unit(d)) }

// Up returns d raised to the precision Human shows it to: a limit that
// must be reached ("use --ttl 3.01s or more").
func Up(d time.Duration) time.Duration {
	u := unit(d)
	if t := d.Truncate(u); t != d {
		return t + u
	}
	return d
}
