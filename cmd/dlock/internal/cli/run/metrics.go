package run

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// A metricsServer serves the Prometheus metrics of dlock run's lock, and
// of the dlock process, at /metrics while COMMAND runs.
type metricsServer struct {
	observer dlock.Observer
	srv      *http.Server
	done     chan struct{}
}

// serveMetrics listens on addr at once, so that a busy or bad address is
// reported before the lock is taken, and serves in the background.
func serveMetrics(addr string) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	collector := dlockprom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{observer: collector, done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}}
	go func() {
		defer close(m.done)
		// Serve ends with ErrServerClosed at close; any other error is a
		// listener that failed after it opened: scrapes fail, the lock and
		// COMMAND are unaffected.
		m.srv.Serve(ln)
	}()
	return m, nil
}

// close stops serving, giving a scrape under way a moment to finish.
func (m *metricsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if m.srv.Shutdown(ctx) != nil {
		m.srv.Close()
	}
	<-m.done
}
