package dlockprom_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockprom"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/redis/go-redis/v9"
)

// Metrics of a redislock Client, served for Prometheus to scrape.
func Example() {
	metrics := dlockprom.New()
	prometheus.MustRegister(metrics)

	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	client := redislock.New(goredisconn.New(rdb), redislock.WithObserver(metrics))
	defer client.Close()

	http.Handle("/metrics", promhttp.Handler())
	go func() { log.Fatal(http.ListenAndServe("localhost:2112", nil)) }()

	ctx := context.Background()
	lease, err := client.NewMutex("nightly-report").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	// ... the work; dlock_holders{lock="nightly-report",kind="mutex"} is 1.
}

// What a Collector makes of the events of one acquisition that waited,
// here fed by hand as a backend would.
func ExampleCollector_Observe() {
	metrics := dlockprom.New()
	ev := func(k dlock.EventKind, e dlock.Event) dlock.Event {
		e.Kind, e.Name, e.Lock = k, "nightly-report", "Mutex"
		return e
	}
	metrics.Observe(ev(dlock.EventAcquiring, dlock.Event{}))
	metrics.Observe(ev(dlock.EventWaiting, dlock.Event{}))
	metrics.Observe(ev(dlock.EventAcquired, dlock.Event{Fence: 7, Wait: 40 * time.Millisecond, Waited: true}))
	metrics.Observe(ev(dlock.EventRenewed, dlock.Event{Fence: 7}))

	out, err := testutil.CollectAndFormat(metrics, expfmt.TypeTextPlain,
		"dlock_acquisitions_total", "dlock_holders", "dlock_waiting", "dlock_renewals_total")
	if err != nil {
		log.Fatal(err)
	}
	for line := range strings.Lines(string(out)) {
		if !strings.HasPrefix(line, "#") { // leave out HELP and TYPE
			fmt.Fprint(os.Stdout, line)
		}
	}
	// Output:
	// dlock_acquisitions_total{kind="mutex",lock="nightly-report",result="acquired"} 1
	// dlock_holders{kind="mutex",lock="nightly-report"} 1
	// dlock_renewals_total{kind="mutex",lock="nightly-report",result="ok"} 1
	// dlock_waiting{kind="mutex",lock="nightly-report"} 0
}

// Lock names that carry an id, mapped to a bounded set of label values.
func ExampleWithLockLabel() {
	metrics := dlockprom.New(dlockprom.WithLockLabel(func(name string) string {
		kind, _, _ := strings.Cut(name, ":") // "order:81723" -> "order"
		return kind
	}))
	for _, id := range []string{"order:1", "order:2"} {
		metrics.Observe(dlock.Event{Kind: dlock.EventAcquired, Name: id, Lock: "Mutex"})
	}
	fmt.Println(testutil.CollectAndCount(metrics, "dlock_holders"), "series")
	// Output: 1 series
}
