package dlockprom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockprom"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redlock"
	"github.com/dlock-go/dlock/zklock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// feed sends events of lock "orders", kind "Mutex", to c.
func feed(c *dlockprom.Collector, events ...dlock.Event) {
	for _, e := range events {
		if e.Name == "" {
			e.Name = "orders"
		}
		if e.Lock == "" {
			e.Lock = "Mutex"
		}
		c.Observe(e)
	}
}

// value returns the value of the counter or gauge name with labels, or
// the sample count of the histogram name; -1 if there is no such series.
func value(t *testing.T, c prometheus.Collector, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("Register: %v", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metrics
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

func orders(extra ...string) map[string]string {
	l := map[string]string{"lock": "orders", "kind": "mutex"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

func TestAcquisitionsByResult(t *testing.T) {
	c := dlockprom.New()
	feed(c,
		dlock.Event{Kind: dlock.EventAcquiring},
		dlock.Event{Kind: dlock.EventAcquired, Fence: 1, Wait: 2 * time.Millisecond},
		dlock.Event{Kind: dlock.EventAcquiring},
		dlock.Event{Kind: dlock.EventNotAcquired, Err: dlock.ErrNotObtained},
		dlock.Event{Kind: dlock.EventAcquiring},
		dlock.Event{Kind: dlock.EventNotAcquired, Err: dlock.NotObtained(context.DeadlineExceeded)},
		dlock.Event{Kind: dlock.EventAcquiring},
		dlock.Event{Kind: dlock.EventNotAcquired, Err: errors.New("WRONGTYPE")},
	)
	for result, want := range map[string]float64{"acquired": 1, "not_obtained": 2, "error": 1} {
		if got := value(t, c, "dlock_acquisitions_total", orders("result", result)); got != want {
			t.Errorf("acquisitions{result=%q} = %v; want %v", result, got, want)
		}
	}
	// Only acquisitions are timed.
	if got := value(t, c, "dlock_wait_seconds", orders()); got != 1 {
		t.Errorf("wait_seconds count = %v; want 1", got)
	}
}

func TestWaitHistogram(t *testing.T) {
	c := dlockprom.New()
	feed(c, dlock.Event{Kind: dlock.EventAcquired, Wait: 3 * time.Second})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() != "dlock_wait_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleSum() != 3 || h.GetSampleCount() != 1 {
			t.Errorf("sum %v count %v; want 3 and 1", h.GetSampleSum(), h.GetSampleCount())
		}
		b := h.GetBucket()
		if first, last := b[0].GetUpperBound(), b[len(b)-1].GetUpperBound(); first != .0001 || last != 60 {
			t.Errorf("buckets from %v to %v; want 100µs to 60s", first, last)
		}
		for _, bk := range b {
			if want := map[bool]uint64{true: 1, false: 0}[bk.GetUpperBound() >= 3]; bk.GetCumulativeCount() != want {
				t.Errorf("bucket le=%v holds %d; want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), want)
			}
		}
		return
	}
	t.Fatal("no dlock_wait_seconds")
}

// The waiting gauge goes up on EventWaiting and down at the end of that
// same call, whichever way it ends; calls that did not wait leave it alone.
func TestWaitingPairsUp(t *testing.T) {
	c := dlockprom.New()
	waiting := func() float64 { return value(t, c, "dlock_waiting", orders()) }
	feed(c,
		dlock.Event{Kind: dlock.EventAcquiring}, // A: Lock, will wait
		dlock.Event{Kind: dlock.EventAcquiring}, // B: Lock, will wait
		dlock.Event{Kind: dlock.EventWaiting},
		dlock.Event{Kind: dlock.EventWaiting},
		dlock.Event{Kind: dlock.EventAcquiring}, // C: TryLock
	)
	if got := waiting(); got != 2 {
		t.Fatalf("waiting = %v; want 2", got)
	}
	feed(c, dlock.Event{Kind: dlock.EventNotAcquired, Err: dlock.ErrNotObtained}) // C ends
	if got := waiting(); got != 2 {
		t.Fatalf("waiting = %v after a TryLock ended; want still 2", got)
	}
	feed(c, dlock.Event{Kind: dlock.EventAcquired, Waited: true}) // A
	if got := waiting(); got != 1 {
		t.Fatalf("waiting = %v; want 1", got)
	}
	feed(c, dlock.Event{Kind: dlock.EventNotAcquired, Waited: true, Err: dlock.NotObtained(context.Canceled)}) // B
	if got := waiting(); got != 0 {
		t.Fatalf("waiting = %v; want 0", got)
	}
}

func TestHoldersAndHoldTime(t *testing.T) {
	c := dlockprom.New()
	holders := func() float64 { return value(t, c, "dlock_holders", orders()) }
	feed(c,
		dlock.Event{Kind: dlock.EventAcquired, Fence: 1},
		dlock.Event{Kind: dlock.EventAcquired, Fence: 2, Name: "other"},
	)
	if got := holders(); got != 1 {
		t.Fatalf("holders = %v; want 1", got)
	}
	feed(c,
		dlock.Event{Kind: dlock.EventReleased, Fence: 1, Held: time.Second},
		dlock.Event{Kind: dlock.EventAcquired, Fence: 3},
		dlock.Event{Kind: dlock.EventLost, Fence: 3, Held: 2 * time.Second, Err: dlock.Lost(dlock.ErrExpired)},
	)
	if got := holders(); got != 0 {
		t.Fatalf("holders = %v after a release and a loss; want 0", got)
	}
	if got := value(t, c, "dlock_holders", map[string]string{"lock": "other"}); got != 1 {
		t.Errorf("holders of another lock = %v; want 1", got)
	}
	if got := value(t, c, "dlock_hold_seconds", orders()); got != 2 {
		t.Errorf("hold_seconds count = %v; want 2", got)
	}
}

func TestRenewals(t *testing.T) {
	c := dlockprom.New()
	feed(c,
		dlock.Event{Kind: dlock.EventRenewed},
		dlock.Event{Kind: dlock.EventRenewed},
		dlock.Event{Kind: dlock.EventRenewFailed, Err: errors.New("i/o timeout")},
	)
	if got := value(t, c, "dlock_renewals_total", orders("result", "ok")); got != 2 {
		t.Errorf("renewals{ok} = %v; want 2", got)
	}
	if got := value(t, c, "dlock_renewals_total", orders("result", "failed")); got != 1 {
		t.Errorf("renewals{failed} = %v; want 1", got)
	}
}

func TestLossCauses(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{dlock.Lost(dlock.ErrExpired), "expired"},
		{dlock.Lost(dlock.ErrTakenOver), "taken_over"},
		{dlock.Lost(zklock.ErrSessionExpired), "session_expired"},
		{dlock.Lost(redislock.ErrClosed), "closed"},
		{dlock.Lost(redlock.ErrClosed), "closed"},
		{dlock.Lost(zklock.ErrClosed), "closed"},
		{dlock.Lost(etcdlock.ErrClosed), "closed"},
		{dlock.Lost(etcdlock.ErrLeaseNotFound), "lease_not_found"},
		{dlock.Lost(fmt.Errorf("redislock: refreshing: %w", errors.New("WRONGTYPE"))), "other"},
	} {
		if got := dlockprom.Cause(tc.err); got != tc.want {
			t.Errorf("Cause(%v) = %q; want %q", tc.err, got, tc.want)
		}
		c := dlockprom.New()
		feed(c, dlock.Event{Kind: dlock.EventAcquired}, dlock.Event{Kind: dlock.EventLost, Err: tc.err})
		if got := value(t, c, "dlock_losses_total", orders("cause", tc.want)); got != 1 {
			t.Errorf("losses{cause=%q} = %v after %v; want 1", tc.want, got, tc.err)
		}
	}
}

func TestOptions(t *testing.T) {
	c := dlockprom.New(
		dlockprom.WithNamespace("shop"),
		dlockprom.WithLockLabel(func(name string) string { k, _, _ := strings.Cut(name, ":"); return k }),
		dlockprom.WithHoldBuckets([]float64{1, 10}),
		nil,
	)
	feed(c,
		dlock.Event{Kind: dlock.EventAcquired, Name: "order:1"},
		dlock.Event{Kind: dlock.EventAcquired, Name: "order:2"},
		dlock.Event{Kind: dlock.EventReleased, Name: "order:2", Held: 5 * time.Second},
	)
	if got := value(t, c, "shop_dlock_holders", map[string]string{"lock": "order"}); got != 1 {
		t.Errorf("shop_dlock_holders{lock=order} = %v; want 1", got)
	}
	if n := testutil.CollectAndCount(c, "shop_dlock_acquisitions_total"); n != 1 {
		t.Errorf("%d acquisition series; want 1 (names mapped to one label)", n)
	}
	c.Forget("order:7")
	if n := testutil.CollectAndCount(c, "shop_dlock_holders"); n != 0 {
		t.Errorf("%d holder series after Forget; want 0", n)
	}
}

// The metrics pass the registry's consistency checks and promlint.
func TestRegistersAndLints(t *testing.T) {
	c := dlockprom.New()
	feed(c,
		dlock.Event{Kind: dlock.EventWaiting},
		dlock.Event{Kind: dlock.EventAcquired, Waited: true},
		dlock.Event{Kind: dlock.EventRenewed},
		dlock.Event{Kind: dlock.EventLost, Err: dlock.Lost(dlock.ErrExpired)},
	)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// Observe is safe for concurrent use, and concurrent calls add up.
func TestConcurrentObserve(t *testing.T) {
	c := dlockprom.New()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				feed(c,
					dlock.Event{Kind: dlock.EventAcquiring},
					dlock.Event{Kind: dlock.EventWaiting},
					dlock.Event{Kind: dlock.EventAcquired, Waited: true},
					dlock.Event{Kind: dlock.EventReleased},
				)
			}
		})
	}
	wg.Wait()
	if got := value(t, c, "dlock_acquisitions_total", orders("result", "acquired")); got != 4000 {
		t.Errorf("acquisitions = %v; want 4000", got)
	}
	for _, g := range []string{"dlock_holders", "dlock_waiting"} {
		if got := value(t, c, g, orders()); got != 0 {
			t.Errorf("%s = %v; want 0", g, got)
		}
	}
}

// A lock name that is not valid UTF-8 (a backend that lets one through, or
// WithLockLabel's mapping) is recorded, not a panic in the middle of Lock.
func TestInvalidUTF8NamesDoNotPanic(t *testing.T) {
	for _, c := range []*dlockprom.Collector{dlockprom.New(), dlockprom.New(dlockprom.WithLockLabel(func(string) string { return "bad\xff" }))} {
		for _, k := range []dlock.EventKind{dlock.EventWaiting, dlock.EventAcquired, dlock.EventRenewed, dlock.EventLost} {
			c.Observe(dlock.Event{Kind: k, Name: "bad\xffname", Lock: "Mutex\xfe", Err: dlock.ErrTakenOver})
		}
		c.Forget("bad\xffname")
	}
}
