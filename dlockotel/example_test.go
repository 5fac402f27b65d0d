package dlockotel_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockotel"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The spans and metrics of a redislock Client, through the global
// providers that the program's OpenTelemetry set-up installed.
func Example() {
	obs := dlockotel.New() // otel.GetTracerProvider(), otel.GetMeterProvider()

	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	client := redislock.New(goredisconn.New(rdb), redislock.WithObserver(obs))
	defer client.Close()

	// ctx carries the span of the request being served: the lock's spans
	// are its children.
	ctx, span := otel.Tracer("shop").Start(context.Background(), "nightly-report")
	defer span.End()
	lease, err := client.NewMutex("nightly-report").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	// ... the work; dlock.leases.held{dlock.lock.name="nightly-report"} is 1.
}

// What an Observer makes of the events of a Lock call that waited 40ms
// and of its lease, here fed by hand as a backend would, and recorded by
// the SDK's in-memory exporter and manual reader.
func ExampleObserver_ObserveContext() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs := dlockotel.New(dlockotel.WithTracerProvider(tp), dlockotel.WithMeterProvider(mp))

	ctx, request := tp.Tracer("shop").Start(context.Background(), "request")
	for _, e := range []dlock.Event{
		{Kind: dlock.EventAcquiring},
		{Kind: dlock.EventWaiting},
		{Kind: dlock.EventAcquired, Fence: 7, Wait: 40 * time.Millisecond, Waited: true},
		{Kind: dlock.EventRenewed, Fence: 7},
		{Kind: dlock.EventReleased, Fence: 7, Held: 2 * time.Second},
	} {
		e.Backend, e.Name, e.Lock = "redislock", "nightly-report", "Mutex"
		obs.ObserveContext(ctx, e)
	}
	request.End()

	for _, s := range spans.GetSpans() {
		var events []string
		for _, e := range s.Events {
			events = append(events, e.Name)
		}
		fmt.Printf("%s (parent %s) [%s]", s.Name, name(spans.GetSpans(), s.Parent.SpanID().String()), strings.Join(events, " "))
		if s.Name == "dlock.lock" { // it began Wait before the grant
			fmt.Print(" ", s.EndTime.Sub(s.StartTime))
		}
		fmt.Println()
	}
	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if s, ok := m.Data.(metricdata.Sum[int64]); ok {
			fmt.Printf("%s = %d\n", m.Name, s.DataPoints[0].Value)
		}
	}
	// Output:
	// dlock.lock (parent request) [] 40ms
	// dlock.lease (parent request) [granted renewed released]
	// request (parent -) []
	// dlock.lock.acquisitions = 1
	// dlock.leases.held = 0
	// dlock.lock.waiting = 0
	// dlock.lease.renewals = 1
}

// name returns the name of the span with the given id, or "-".
func name(spans tracetest.SpanStubs, id string) string {
	for _, s := range spans {
		if s.SpanContext.SpanID().String() == id {
			return s.Name
		}
	}
	return "-"
}

// Lock names that carry an id, mapped to a bounded set of values.
func ExampleWithLockName() {
	reader := sdkmetric.NewManualReader()
	obs := dlockotel.New(
		dlockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		dlockotel.WithLockName(func(name string) string {
			kind, _, _ := strings.Cut(name, ":") // "order:81723" -> "order"
			return kind
		}))
	for _, id := range []string{"order:1", "order:2"} {
		obs.Observe(dlock.Event{Kind: dlock.EventAcquired, Name: id, Lock: "Mutex"})
	}
	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "dlock.leases.held" {
			p := m.Data.(metricdata.Sum[int64]).DataPoints
			name, _ := p[0].Attributes.Value(dlockotel.AttrName)
			fmt.Println(len(p), "series:", name.AsString(), p[0].Value)
		}
	}
	// Output: 1 series: order 2
}
