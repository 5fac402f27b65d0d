package bench

import (
	"math"
	"math/bits"
	"time"
)

// The Recorder's buckets are log-linear, as in an HdrHistogram: values below
// subCount nanoseconds have a bucket each; above, every power of two is
// split into halfCount buckets of equal width, so that a bucket's width is
// at most 1/halfCount of its lowest value.
const (
	subBits   = 7
	subCount  = 1 << subBits // 128
	halfCount = subCount / 2 // 64
	// nBuckets covers every non-negative int64: the highest value has
	// bits.Len64 = 63, so exponent 63-subBits.
	nBuckets = subCount + (63-subBits)*halfCount
)

// A Recorder is a histogram of latencies with a relative error below
// 1/128 (a bucket's midpoint is at most half a bucket from any value in it)
// and a fixed size of about 30 KiB, however many values it holds. The
// count, minimum, maximum and sum are exact.
//
// The zero value is an empty Recorder ready to use. A Recorder is not safe
// for concurrent use: give each goroutine its own and Merge them.
type Recorder struct {
	counts   [nBuckets]uint64
	n        uint64
	sum      float64 // nanoseconds; a float, so that it cannot overflow
	min, max int64
}

// bucketOf returns the bucket index of v >= 0.
func bucketOf(v int64) int {
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - subBits // v>>e is in [halfCount, subCount)
	return subCount + (e-1)*halfCount + int(v>>e) - halfCount
}

// bucketRange returns the lowest and highest value of bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < subCount {
		return int64(i), int64(i)
	}
	k := i - subCount
	e := k/halfCount + 1
	top := int64(k%halfCount + halfCount)
	lo = top << e
	return lo, lo + int64(1)<<e - 1
}

// Record adds one latency; a negative one counts as zero.
func (r *Recorder) Record(d time.Duration) {
	v := max(int64(d), 0)
	r.counts[bucketOf(v)]++
	if r.n == 0 || v < r.min {
		r.min = v
	}
	if v > r.max {
		r.max = v
	}
	r.n++
	r.sum += float64(v)
}

// Merge adds every value of o to r.
func (r *Recorder) Merge(o *Recorder) {
	if o == nil || o.n == 0 {
		return
	}
	for i, c := range o.counts {
		r.counts[i] += c
	}
	if r.n == 0 || o.min < r.min {
		r.min = o.min
	}
	r.max = max(r.max, o.max)
	r.n += o.n
	r.sum += o.sum
}

// Count returns how many values were recorded.
func (r *Recorder) Count() int64 { return int64(r.n) }

// Min returns the smallest value, or 0 if there is none.
func (r *Recorder) Min() time.Duration { return time.Duration(r.min) }

// Max returns the largest value, or 0 if there is none.
func (r *Recorder) Max() time.Duration { return time.Duration(r.max) }

// Mean returns the mean, or 0 if there is no value.
func (r *Recorder) Mean() time.Duration {
	if r.n == 0 {
		return 0
	}
	return time.Duration(math.Round(r.sum / float64(r.n)))
}

// Quantile returns the q-quantile (0 <= q <= 1) by the nearest-rank method:
// the value with rank ceil(q*Count), as the midpoint of its bucket, kept
// within [Min, Max]. Quantile(0) is Min and Quantile(1) is Max; an empty
// Recorder returns 0.
func (r *Recorder) Quantile(q float64) time.Duration {
	switch {
	case r.n == 0:
		return 0
	case q <= 0 || math.IsNaN(q):
		return r.Min()
	case q >= 1:
		return r.Max()
	}
	rank := uint64(math.Ceil(q * float64(r.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range r.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			mid := lo + (hi-lo)/2
			return time.Duration(min(max(mid, r.min), r.max))
		}
	}
	return r.Max() // not reached: the counts add up to n
}
