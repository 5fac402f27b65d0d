package lockbench

import (
	"math"
	"slices"
	"time"
)

// percentile returns the q-quantile (0 < q <= 1) of d by the nearest-rank
// method; d is sorted in place.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[max(0, min(i, len(d)-1))]
}

// median returns the median of v, ignoring NaNs; NaN if none is left.
func median(v []float64) float64 {
	var ok []float64
	for _, x := range v {
		if !math.IsNaN(x) {
			ok = append(ok, x)
		}
	}
	if len(ok) == 0 {
		return math.NaN()
	}
	slices.Sort(ok)
	n := len(ok)
	if n%2 == 1 {
		return ok[n/2]
	}
	return (ok[n/2-1] + ok[n/2]) / 2
}

// ratio returns a/b, or NaN when b is zero.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// spin busy-waits for d: a holder's fixed work, exact even below the
// timer resolution.
func spin(d time.Duration) {
	if d <= 0 {
		return
	}
	for start := time.Now(); time.Since(start) < d; {
	}
}
