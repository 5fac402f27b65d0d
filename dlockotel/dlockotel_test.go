package dlockotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// sdk is an Observer on the SDK's in-memory span exporter and manual
// metric reader.
type sdk struct {
	*dlockotel.Observer
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
}

func newSDK(t testing.TB, opts ...dlockotel.Option) *sdk {
	t.Helper()
	s := &sdk{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(s.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	t.Cleanup(func() {
		s.tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	s.Observer = dlockotel.New(append([]dlockotel.Option{dlockotel.WithTracerProvider(s.tp), dlockotel.WithMeterProvider(mp)}, opts...)...)
	return s
}

// feed sends events of lock "orders", kind "Mutex", backend "redislock",
// to o with ctx.
func (s *sdk) feed(ctx context.Context, events ...dlock.Event) {
	for _, e := range events {
		if e.Name == "" {
			e.Name = "orders"
		}
		if e.Lock == "" {
			e.Lock = "Mutex"
		}
		if e.Backend == "" {
			e.Backend = "redislock"
		}
		s.ObserveContext(ctx, e)
	}
}

// named returns the ended spans called name, in the order they ended.
func (s *sdk) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, sp := range s.spans.GetSpans() {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

// value returns the sum of the points of the counter or up-down counter
// name whose attributes include labels, or the count of such points of the
// histogram name; -1 if there are none.
func (s *sdk) value(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	match := func(set attribute.Set) bool {
		for k, v := range labels {
			if got, ok := set.Value(attribute.Key(k)); !ok || got.Emit() != v {
				return false
			}
		}
		return true
	}
	got, found := 0.0, false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						got, found = got+float64(p.Value), true
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						got, found = got+float64(p.Count), true
					}
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	if !found {
		return -1
	}
	return got
}

// series returns the number of points of the metric name.
func (s *sdk) series(t testing.TB, name string) int {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				return len(d.DataPoints)
			case metricdata.Histogram[float64]:
				return len(d.DataPoints)
			}
		}
	}
	return 0
}

// names returns the dlock.lock.name values of the points of the metric
// name.
func (s *sdk) names(t testing.TB, name string) map[string]bool {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	out := map[string]bool{}
	add := func(set attribute.Set) {
		v, _ := set.Value(dlockotel.AttrName)
		out[v.AsString()] = true
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(p.Attributes)
				}
			}
		}
	}
	return out
}

func orders(extra ...string) map[string]string {
	l := map[string]string{"dlock.lock.name": "orders", "dlock.lock.kind": "mutex"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

func attr(attrs []attribute.KeyValue, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func eventNames(sp tracetest.SpanStub) []string {
	var out []string
	for _, e := range sp.Events {
		out = append(out, e.Name)
	}
	return out
}

// rootContext returns a context with a recording span of s's provider,
// and that span.
func (s *sdk) rootContext(ctx context.Context) (context.Context, trace.Span) {
	return s.tp.Tracer("test").Start(ctx, "request")
}

// A granted call gives a dlock.lock span that began Wait before it ended,
// under the caller's span, and a dlock.lease span that ends at the
// release with the fence on its events.
func TestSpansOfAGrantAndRelease(t *testing.T) {
	s := newSDK(t)
	ctx, root := s.rootContext(t.Context())
	s.feed(ctx,
		dlock.Event{Kind: dlock.EventAcquiring},
		dlock.Event{Kind: dlock.EventWaiting},
		dlock.Event{Kind: dlock.EventAcquired, Fence: 7, Wait: 250 * time.Millisecond, Waited: true},
		dlock.Event{Kind: dlock.EventRenewed, Fence: 7},
		dlock.Event{Kind: dlock.EventReleased, Fence: 7, Held: 10 * time.Millisecond},
	)
	root.End()
	locks, leases := s.named("dlock.lock"), s.named("dlock.lease")
	if len(locks) != 1 || len(leases) != 1 {
		t.Fatalf("%d dlock.lock and %d dlock.lease spans; want 1 and 1", len(locks), len(leases))
	}
	l := locks[0]
	if d := l.EndTime.Sub(l.StartTime); d != 250*time.Millisecond {
		t.Errorf("dlock.lock lasted %v; want the Wait, 250ms", d)
	}
	for _, sp := range []tracetest.SpanStub{l, leases[0]} {
		if sp.Parent.SpanID() != root.SpanContext().SpanID() {
			t.Errorf("%s's parent is %v; want the caller's span", sp.Name, sp.Parent.SpanID())
		}
		for k, want := range map[attribute.Key]string{dlockotel.AttrBackend: "redislock", dlockotel.AttrName: "orders", dlockotel.AttrKind: "mutex"} {
			if v, _ := attr(sp.Attributes, k); v.Emit() != want {
				t.Errorf("%s %s = %q; want %q", sp.Name, k, v.Emit(), want)
			}
		}
	}
	if v, _ := attr(l.Attributes, dlockotel.AttrOutcome); v.AsString() != "granted" {
		t.Errorf("outcome %q; want granted", v.Emit())
	}
	if v, _ := attr(l.Attributes, dlockotel.AttrWaited); !v.AsBool() {
		t.Errorf("waited %v; want true", v.Emit())
	}
	lease := leases[0]
	if got := strings.Join(eventNames(lease), ","); got != "granted,renewed,released" {
		t.Errorf("lease events %s; want granted,renewed,released", got)
	}
	for _, e := range lease.Events {
		if v, _ := attr(e.Attributes, dlockotel.AttrFence); v.AsInt64() != 7 {
			t.Errorf("event %s: fence %v; want 7", e.Name, v.Emit())
		}
	}
	if len(lease.Links) != 1 || lease.Links[0].SpanContext.SpanID() != l.SpanContext.SpanID() {
		t.Errorf("lease links %v; want the dlock.lock span", lease.Links)
	}
	if lease.Status.Code != codes.Unset {
		t.Errorf("released lease status %v; want unset", lease.Status)
	}
}

func TestOutcomes(t *testing.T) {
	for _, tc := range []struct {
		err    error
		want   string
		failed bool
	}{
		{dlock.ErrNotObtained, "not_obtained", false},
		{dlock.NotObtained(context.Canceled), "cancelled", false},
		{dlock.NotObtained(context.DeadlineExceeded), "cancelled", false},
		{dlock.Unavailable("redis", time.Now(), errors.New("connection refused")), "unavailable", true},
		{errors.New("WRONGTYPE"), "error", true},
	} {
		if got := dlockotel.Outcome(tc.err); got != tc.want {
			t.Errorf("Outcome(%v) = %q; want %q", tc.err, got, tc.want)
		}
		s := newSDK(t)
		s.feed(t.Context(), dlock.Event{Kind: dlock.EventAcquiring}, dlock.Event{Kind: dlock.EventNotAcquired, Err: tc.err})
		spans := s.named("dlock.lock")
		if len(spans) != 1 {
			t.Fatalf("%d spans; want 1", len(spans))
		}
		if v, _ := attr(spans[0].Attributes, dlockotel.AttrOutcome); v.AsString() != tc.want {
			t.Errorf("%v: outcome %q; want %q", tc.err, v.Emit(), tc.want)
		}
		if failed := spans[0].Status.Code == codes.Error; failed != tc.failed {
			t.Errorf("%v: status %v; want error %v", tc.err, spans[0].Status, tc.failed)
		}
		if len(s.named("dlock.lease")) != 0 {
			t.Errorf("%v: a lease span for a call that got nothing", tc.err)
		}
	}
}

// A lost lease ends its span with an error status and a lost event that
// says why.
func TestLostLease(t *testing.T) {
	s := newSDK(t)
	s.feed(t.Context(),
		dlock.Event{Kind: dlock.EventAcquired, Fence: 3},
		dlock.Event{Kind: dlock.EventRenewFailed, Fence: 3, Err: errors.New("i/o timeout")},
		dlock.Event{Kind: dlock.EventLost, Fence: 3, Held: time.Second, Err: dlock.Lost(dlock.ErrExpired)},
	)
	leases := s.named("dlock.lease")
	if len(leases) != 1 {
		t.Fatalf("%d lease spans; want 1", len(leases))
	}
	l := leases[0]
	if got := strings.Join(eventNames(l), ","); got != "granted,renew_failed,lost" {
		t.Errorf("events %s", got)
	}
	if v, _ := attr(l.Events[2].Attributes, dlockotel.AttrCause); v.AsString() != "expired" {
		t.Errorf("cause %q; want expired", v.Emit())
	}
	if l.Status.Code != codes.Error {
		t.Errorf("status %v; want error", l.Status)
	}
	if got := s.value(t, "dlock.lease.lost", orders("dlock.cause", "expired")); got != 1 {
		t.Errorf("dlock.lease.lost{expired} = %v; want 1", got)
	}
	if got := s.value(t, "dlock.lease.renewals", orders("dlock.result", "failed")); got != 1 {
		t.Errorf("dlock.lease.renewals{failed} = %v; want 1", got)
	}
}

// Two leases of one lock with one fence (reentrant holds, readers) end
// the spans they began, told apart by how long they were held.
func TestLeasesWithOneFence(t *testing.T) {
	s := newSDK(t)
	ctx := t.Context()
	s.feed(ctx, dlock.Event{Kind: dlock.EventAcquired, Fence: 5})
	time.Sleep(300 * time.Millisecond) // a stall of half this would confuse them
	s.feed(ctx, dlock.Event{Kind: dlock.EventAcquired, Fence: 5})
	first := s.spans.GetSpans()[0].StartTime // the first dlock.lock ended when the first lease began
	s.feed(ctx, dlock.Event{Kind: dlock.EventReleased, Fence: 5, Held: time.Since(first)})
	leases := s.named("dlock.lease")
	if len(leases) != 1 {
		t.Fatalf("%d lease spans ended; want 1", len(leases))
	}
	if d := leases[0].EndTime.Sub(leases[0].StartTime); d < 300*time.Millisecond {
		t.Errorf("the release ended the lease held %v; want the first one", d)
	}
	s.feed(ctx, dlock.Event{Kind: dlock.EventReleased, Fence: 5})
	if n := len(s.named("dlock.lease")); n != 2 {
		t.Errorf("%d lease spans ended; want 2", n)
	}
}

// The metrics are dlockprom's, with OpenTelemetry's names.
func TestMetrics(t *testing.T) {
	s := newSDK(t)
	ctx := t.Context()
	s.feed(ctx,
		dlock.Event{Kind: dlock.EventAcquiring},
		dlock.Event{Kind: dlock.EventAcquired, Fence: 1, Wait: 2 * time.Millisecond},
		dlock.Event{Kind: dlock.EventAcquiring},
		dlock.Event{Kind: dlock.EventWaiting},
		dlock.Event{Kind: dlock.EventAcquiring},
		dlock.Event{Kind: dlock.EventNotAcquired, Err: dlock.ErrNotObtained},
		dlock.Event{Kind: dlock.EventAcquiring},
		dlock.Event{Kind: dlock.EventNotAcquired, Err: errors.New("WRONGTYPE")},
		dlock.Event{Kind: dlock.EventRenewed, Fence: 1},
		dlock.Event{Kind: dlock.EventFenceAccepted, Name: "rows", Lock: "SQL", Backend: "-"},
		dlock.Event{Kind: dlock.EventFenceRefused, Name: "rows", Lock: "SQL", Backend: "-"},
	)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"dlock.lock.acquisitions", orders("dlock.result", "acquired", "dlock.backend", "redislock"), 1},
		{"dlock.lock.acquisitions", orders("dlock.result", "not_obtained"), 1},
		{"dlock.lock.acquisitions", orders("dlock.result", "error"), 1},
		{"dlock.lock.wait.duration", orders(), 1},
		{"dlock.leases.held", orders(), 1},
		{"dlock.lock.waiting", orders(), 1},
		{"dlock.lease.renewals", orders("dlock.result", "ok"), 1},
		{"dlock.fence.writes", map[string]string{"dlock.lock.name": "rows", "dlock.result": "accepted"}, 1},
		{"dlock.fence.writes", map[string]string{"dlock.lock.name": "rows", "dlock.result": "stale"}, 1},
	} {
		if got := s.value(t, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v; want %v", c.name, c.labels, got, c.want)
		}
	}
	s.feed(ctx,
		dlock.Event{Kind: dlock.EventNotAcquired, Waited: true, Err: dlock.NotObtained(context.Canceled)},
		dlock.Event{Kind: dlock.EventReleased, Fence: 1, Held: 3 * time.Second},
	)
	for _, name := range []string{"dlock.leases.held", "dlock.lock.waiting"} {
		if got := s.value(t, name, orders()); got != 0 {
			t.Errorf("%s = %v; want 0", name, got)
		}
	}
	if got := s.value(t, "dlock.lease.hold.duration", orders()); got != 1 {
		t.Errorf("hold count %v; want 1", got)
	}
}

// Units and bucket boundaries: seconds, dlockprom's buckets by default.
func TestUnitsAndBuckets(t *testing.T) {
	s := newSDK(t, dlockotel.WithHoldBuckets([]float64{1, 10}))
	s.feed(t.Context(),
		dlock.Event{Kind: dlock.EventAcquired, Fence: 1, Wait: 3 * time.Second},
		dlock.Event{Kind: dlock.EventReleased, Fence: 1, Held: 5 * time.Second},
	)
	var rm metricdata.ResourceMetrics
	s.reader.Collect(t.Context(), &rm)
	units := map[string]string{}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		units[m.Name] = m.Unit
		h, ok := m.Data.(metricdata.Histogram[float64])
		if !ok {
			continue
		}
		p := h.DataPoints[0]
		switch m.Name {
		case "dlock.lock.wait.duration":
			if p.Sum != 3 || len(p.Bounds) != len(dlockotel.DefaultWaitBuckets) || p.Bounds[0] != .0001 {
				t.Errorf("wait: sum %v bounds %v", p.Sum, p.Bounds)
			}
		case "dlock.lease.hold.duration":
			if p.Sum != 5 || fmt.Sprint(p.Bounds) != "[1 10]" {
				t.Errorf("hold: sum %v bounds %v", p.Sum, p.Bounds)
			}
		}
	}
	for name, want := range map[string]string{"dlock.lock.wait.duration": "s", "dlock.lease.hold.duration": "s", "dlock.leases.held": "{lease}", "dlock.lock.acquisitions": "{call}"} {
		if units[name] != want {
			t.Errorf("%s unit %q; want %q", name, units[name], want)
		}
	}
}

// A thousand distinct lock names make at most WithMaxLockNames series and
// span names, plus OtherName; WithLockName's mapping comes first.
func TestCardinalityBound(t *testing.T) {
	for _, tc := range []struct {
		opts []dlockotel.Option
		max  int
	}{
		{nil, dlockotel.DefaultMaxLockNames},
		{[]dlockotel.Option{dlockotel.WithMaxLockNames(10)}, 10},
		{[]dlockotel.Option{dlockotel.WithLockName(func(n string) string { k, _, _ := strings.Cut(n, ":"); return k })}, 1},
	} {
		s := newSDK(t, tc.opts...)
		for i := range 1000 {
			e := dlock.Event{Name: fmt.Sprintf("order:%d", i), Fence: uint64(i + 1)}
			e.Kind = dlock.EventAcquired
			s.feed(t.Context(), e)
			e.Kind = dlock.EventReleased
			s.feed(t.Context(), e)
		}
		want := tc.max + 1 // OtherName
		if tc.max == 1 {
			want = 1
		}
		for _, m := range []string{"dlock.lock.acquisitions", "dlock.leases.held", "dlock.lease.hold.duration"} {
			if n := s.series(t, m); n != want {
				t.Errorf("max %d: %s has %d series; want %d", tc.max, m, n, want)
			}
		}
		names := map[string]bool{}
		for _, sp := range s.spans.GetSpans() {
			v, _ := attr(sp.Attributes, dlockotel.AttrName)
			names[v.AsString()] = true
		}
		if len(names) != want {
			t.Errorf("max %d: %d span lock names; want %d", tc.max, len(names), want)
		}
		if tc.max > 1 && !names[dlockotel.OtherName] {
			t.Errorf("max %d: no %s", tc.max, dlockotel.OtherName)
		}
		if got := s.value(t, "dlock.leases.held", nil); got != 0 {
			t.Errorf("max %d: %v leases held after every release; want 0", tc.max, got)
		}
		if n := len(s.named("dlock.lease")); n != 1000 {
			t.Errorf("max %d: %d lease spans ended; want 1000", tc.max, n)
		}
	}
	s := newSDK(t, dlockotel.WithMaxLockNames(-1))
	for i := range 1000 {
		s.feed(t.Context(), dlock.Event{Kind: dlock.EventAcquired, Name: fmt.Sprint(i)})
	}
	if n := s.series(t, "dlock.leases.held"); n != 1000 {
		t.Errorf("no bound: %d series; want 1000", n)
	}
}

// Without a provider's SDK (the global no-op ones), Observe does nothing
// and keeps nothing; a nil context or a name that is not valid UTF-8 is
// not a panic.
func TestNoopAndOddInput(t *testing.T) {
	o := dlockotel.New()
	for _, k := range []dlock.EventKind{dlock.EventAcquiring, dlock.EventWaiting, dlock.EventAcquired, dlock.EventRenewed, dlock.EventLost, dlock.EventReleased} {
		o.Observe(dlock.Event{Kind: k, Name: "bad\xffname", Lock: "Mutex\xfe", Err: dlock.ErrTakenOver})
		o.ObserveContext(nil, dlock.Event{Kind: k, Name: "n"}) //nolint:staticcheck // a nil ctx is what is tested
	}
	s := newSDK(t)
	s.feed(nil, dlock.Event{Kind: dlock.EventAcquired, Name: "bad\xffname"}) //nolint:staticcheck
	if v, _ := attr(s.named("dlock.lock")[0].Attributes, dlockotel.AttrName); !strings.Contains(v.AsString(), "\uFFFD") {
		t.Errorf("name %q", v.AsString())
	}
}

// ObserveContext is safe for concurrent use, and concurrent calls add up.
func TestConcurrentObserve(t *testing.T) {
	s := newSDK(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				f := uint64(g*1000 + i + 1)
				s.feed(t.Context(),
					dlock.Event{Kind: dlock.EventAcquiring},
					dlock.Event{Kind: dlock.EventWaiting},
					dlock.Event{Kind: dlock.EventAcquired, Fence: f, Waited: true},
					dlock.Event{Kind: dlock.EventReleased, Fence: f},
				)
			}
		})
	}
	wg.Wait()
	if got := s.value(t, "dlock.lock.acquisitions", orders("dlock.result", "acquired")); got != 1600 {
		t.Errorf("acquisitions = %v; want 1600", got)
	}
	for _, g := range []string{"dlock.leases.held", "dlock.lock.waiting"} {
		if got := s.value(t, g, orders()); got != 0 {
			t.Errorf("%s = %v; want 0", g, got)
		}
	}
	if n := len(s.named("dlock.lease")); n != 1600 {
		t.Errorf("%d lease spans; want 1600", n)
	}
}

// A lease whose events come without the call's context (Observe, or a
// backend that has no other) still ends the span its grant began.
func TestLeaseEventsWithoutTheCallContext(t *testing.T) {
	s := newSDK(t)
	ctx, root := s.rootContext(t.Context())
	s.feed(ctx, dlock.Event{Kind: dlock.EventAcquired, Fence: 9})
	s.feed(context.Background(), dlock.Event{Kind: dlock.EventRenewed, Fence: 9})
	s.Observe(dlock.Event{Kind: dlock.EventReleased, Fence: 9, Backend: "redislock", Name: "orders", Lock: "Mutex"})
	root.End()
	leases := s.named("dlock.lease")
	if len(leases) != 1 {
		t.Fatalf("%d lease spans ended; want 1", len(leases))
	}
	if got := strings.Join(eventNames(leases[0]), ","); got != "granted,renewed,released" {
		t.Errorf("events %s; want granted,renewed,released", got)
	}
	if leases[0].Parent.SpanID() != root.SpanContext().SpanID() {
		t.Errorf("the lease's parent is not the caller's span")
	}
}
