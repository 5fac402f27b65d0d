package dlockprom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockprom"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

// promtool, Prometheus's own checker, accepts the alert rules.
func TestIntegrationPromtoolCheckRules(t *testing.T) {
	testenv.SkipIfShort(t, "runs promtool")
	promtool := testenv.RequireBinary(t, "promtool")
	out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS: 4 rules found") {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}
}

// promQuery runs an instant query on the Prometheus at base and returns
// its samples' values (NaN included), or an error.
func promQuery(base, q string) ([]float64, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, errors.New(r.Error)
	}
	var vals []float64
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("value %v: %v", s.Value[1], err)
		}
		vals = append(vals, v)
	}
	return vals, nil
}

// A real Prometheus scraping a Collector that observes real locks on a
// real redis-server answers every query of every panel of the dashboard
// with data, loads the alert rules without error, and fires
// DlockLeaseLost for a lease lost behind its holder's back.
func TestIntegrationDashboardAnswers(t *testing.T) {
	testenv.SkipIfShort(t, "starts redis-server and prometheus")
	testenv.RequireBinary(t, "prometheus")
	srv := testenv.StartRedis(t, testenv.RedisConfig{})

	// The metrics, served as dlock run --metrics-addr serves them.
	metrics := dlockprom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	client := func(addr string) *redislock.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
		c := redislock.New(goredisconn.New(rdb), redislock.WithObserver(metrics))
		t.Cleanup(func() { c.Close(); rdb.Close() })
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A holder and a waiter, for the whole test: held and waiting series.
	holder, err := client(srv.Addr()).NewMutex("orders").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if l, err := client(srv.Addr()).NewMutex("orders").Lock(waitCtx); err == nil {
			l.Release(context.Background())
		}
	}()
	if _, err := client(srv.Addr()).NewMutex("orders").TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}

	// A lease lost: its key deleted behind its back.
	lost, err := client(srv.Addr()).NewMutex("jobs", redislock.WithTTL(900*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Do("DEL", "dlock:{jobs}")
	select {
	case <-lost.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the loss was not noticed")
	}

	// Work that goes on while Prometheus scrapes: short holds, and calls
	// to a lock service that is down (a port nothing listens on).
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	up, down := client(srv.Addr()).NewMutex("reports"), client(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))).NewMutex("reports")
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for workCtx.Err() == nil {
			if l, err := up.Lock(workCtx); err == nil {
				time.Sleep(20 * time.Millisecond)
				l.Release(workCtx)
			}
			tctx, c := context.WithTimeout(workCtx, time.Second)
			down.TryLock(tctx)
			c()
			select {
			case <-workCtx.Done():
			case <-time.After(150 * time.Millisecond):
			}
		}
	}()

	abs, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	prom := testenv.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: dlock
    static_configs:
      - targets: [%q]
`, abs, ln.Addr().String()))

	// The dashboard's variables, as Grafana fills them in.
	vars := strings.NewReplacer(`$lock`, `.+`, `$__rate_interval`, `15s`)
	type query struct{ panel, expr string }
	var queries []query
	for title, qs := range dashboardQueries(t) {
		for _, q := range qs {
			queries = append(queries, query{title, vars.Replace(q)})
		}
	}
	sort.Slice(queries, func(i, j int) bool { return queries[i].panel < queries[j].panel })
	queries = append(queries, query{"alert DlockLeaseLost", `ALERTS{alertname="DlockLeaseLost",alertstate="firing",lock="jobs",cause="taken_over"}`})

	start := time.Now()
	missing := queries
	for deadline := start.Add(30 * time.Second); len(missing) > 0 && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var still []query
		for _, q := range missing {
			vals, err := promQuery(prom, q.expr)
			if err != nil {
				t.Fatalf("panel %q: query %s: %v", q.panel, q.expr, err)
			}
			if !anyNumber(vals) {
				still = append(still, q)
			}
		}
		missing = still
	}
	for _, q := range missing {
		vals, _ := promQuery(prom, q.expr)
		t.Errorf("%s: no data from %s (got %v)", q.panel, q.expr, vals)
	}
	t.Logf("%d queries answered with data %v after Prometheus started", len(queries)-len(missing), time.Since(start).Round(100*time.Millisecond))

	// Every rule loaded and evaluated without error.
	resp, err := http.Get(prom + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rules struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rules); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rules.Data.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				t.Errorf("rule %s: health %q %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	if n != 4 {
		t.Errorf("Prometheus loaded %d rules, want 4", n)
	}
}

// anyNumber reports whether vals has a value that is a number.
func anyNumber(vals []float64) bool {
	for _, v := range vals {
		if !math.IsNaN(v) {
			return true
		}
	}
	return false
}
