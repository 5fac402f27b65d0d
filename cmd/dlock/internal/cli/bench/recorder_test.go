package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the nearest-rank q-quantile of sorted.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func TestBuckets(t *testing.T) {
	// Buckets are contiguous, each value falls in its own bucket, and a
	// bucket is no wider than 1/halfCount of its lowest value.
	next := int64(0)
	for i := range nBuckets {
		lo, hi := bucketRange(i)
		if lo != next || hi < lo {
			t.Fatalf("bucket %d is [%d, %d], want it to start at %d", i, lo, hi, next)
		}
		if lo >= subCount && float64(hi-lo+1) > float64(lo)/halfCount {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/%d of %d", i, lo, hi, halfCount, lo)
		}
		for _, v := range []int64{lo, hi, lo + (hi-lo)/2} {
			if b := bucketOf(v); b != i {
				t.Fatalf("bucketOf(%d) = %d, want %d", v, b, i)
			}
		}
		next = hi + 1
	}
	if next != math.MinInt64 { // the last bucket ends at MaxInt64
		t.Fatalf("the buckets end at %d, want every int64", next-1)
	}
}

func TestQuantileSmall(t *testing.T) {
	var r Recorder
	if r.Quantile(0.5) != 0 || r.Max() != 0 || r.Mean() != 0 || r.Count() != 0 {
		t.Fatalf("empty recorder: %v %v %v %v", r.Quantile(0.5), r.Max(), r.Mean(), r.Count())
	}
	// Below subCount nanoseconds every value is exact.
	for v := 1; v <= 100; v++ {
		r.Record(time.Duration(v))
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.01, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {0.995, 100}, {1, 100}}
	for _, tt := range tests {
		if got := r.Quantile(tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if r.Count() != 100 || r.Min() != 1 || r.Max() != 100 || r.Mean() != 51 { // 50.5 rounds to 51
		t.Errorf("count %d min %v max %v mean %v", r.Count(), r.Min(), r.Max(), r.Mean())
	}
	r.Record(-5) // counts as zero
	if r.Min() != 0 || r.Count() != 101 {
		t.Errorf("after a negative value: min %v count %d", r.Min(), r.Count())
	}
}

func TestQuantileAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var samples []time.Duration
	var a, b Recorder // two halves, merged: as the workers' recorders are
	for i := range 50000 {
		// Log-normal around 200µs, with a tail: as network latencies are.
		d := time.Duration(math.Exp(rng.NormFloat64()*1.2) * float64(200*time.Microsecond))
		samples = append(samples, d)
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var r Recorder
	r.Merge(&a)
	r.Merge(&b)
	r.Merge(nil)
	slices.Sort(samples)
	if r.Count() != int64(len(samples)) || r.Min() != samples[0] || r.Max() != samples[len(samples)-1] {
		t.Fatalf("count %d min %v max %v, want %d %v %v", r.Count(), r.Min(), r.Max(), len(samples), samples[0], samples[len(samples)-1])
	}
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999} {
		want, got := exactQuantile(samples, q), r.Quantile(q)
		if diff := math.Abs(float64(got - want)); diff > float64(want)/128+1 {
			t.Errorf("Quantile(%v) = %v, exact %v: off by %.2f%%, more than 1/128", q, got, want, 100*diff/float64(want))
		}
	}
	var sum float64
	for _, d := range samples {
		sum += float64(d)
	}
	if mean := time.Duration(math.Round(sum / float64(len(samples)))); r.Mean() != mean {
		t.Errorf("Mean = %v, want %v", r.Mean(), mean)
	}
}

func TestQuantileExtremes(t *testing.T) {
	var r Recorder
	r.Record(time.Duration(math.MaxInt64))
	r.Record(time.Hour)
	if r.Quantile(1) != time.Duration(math.MaxInt64) || r.Quantile(0) != time.Hour {
		t.Errorf("max %v min %v", r.Quantile(1), r.Quantile(0))
	}
	if got := r.Quantile(0.5); math.Abs(float64(got-time.Hour)) > float64(time.Hour)/128 {
		t.Errorf("Quantile(0.5) = %v, want %v within 1/128", got, time.Hour)
	}
}
