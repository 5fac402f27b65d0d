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
