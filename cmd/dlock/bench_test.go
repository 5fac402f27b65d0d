package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchDoc is the part of "dlock bench -o json" the tests read.
type benchDoc struct {
	Backend struct {
		Kind      string   `json:"kind"`
		Addresses []string `json:"addresses"`
	} `json:"backend"`
	Scenarios []struct {
		ID               string   `json:"id"`
		Node             string   `json:"node"`
		Ops              int64    `json:"ops"`
		Errors           int64    `json:"errors"`
		FirstErrors      []string `json:"first_errors"`
		ExclusionChecked bool     `json:"mutual_exclusion_checked"`
		Overlaps         int64    `json:"overlaps"`
		FenceRegressions int64    `json:"fence_regressions"`
		Latency          struct {
			P50NS int64 `json:"p50_ns"`
			MaxNS int64 `json:"max_ns"`
		} `json:"latency"`
	} `json:"scenarios"`
}

// benchSuite runs every scenario briefly against d, as JSON and with a
// chart, and checks that each one did work, without errors or overlaps.
func benchSuite(t *testing.T, d deployment, kind string, nodes int) {
	chart := filepath.Join(t.TempDir(), "latency.svg")
	args := append(append([]string{"bench"}, d.flags...), d.runFlags...)
	// 1s: in 300ms beside a second make test, ZooKeeper's S3 handed the
	// lock over not once (latency 0).
	args = append(args, "--duration", "1s", "--clients", "4", "--goroutines", "8", "-o", "json", "--chart", chart)
	r := dlock(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	var doc benchDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("stdout is not the JSON document: %v\n%s", err, r.stdout)
	}
	if doc.Backend.Kind != kind || len(doc.Backend.Addresses) != nodes {
		t.Errorf("backend %+v; want %s with %d addresses", doc.Backend, kind, nodes)
	}
	var ids []string
	for _, s := range doc.Scenarios {
		ids = append(ids, s.ID)
		if s.Ops == 0 || s.Errors != 0 || s.Overlaps != 0 || s.FenceRegressions != 0 {
			t.Errorf("scenario %s %s: %d ops, %d errors %q, %d overlaps, %d fence regressions; want ops and nothing else",
				s.ID, s.Node, s.Ops, s.Errors, s.FirstErrors, s.Overlaps, s.FenceRegressions)
		}
		if s.Latency.P50NS <= 0 || s.Latency.MaxNS < s.Latency.P50NS {
			t.Errorf("scenario %s %s: latency %+v", s.ID, s.Node, s.Latency)
		}
		if s.ID == "S3" && !s.ExclusionChecked {
			t.Errorf("S3 did not check mutual exclusion")
		}
	}
	// S4 has one row per node.
	want := []string{"S1", "S2", "S3"}
	for range nodes {
		want = append(want, "S4")
	}
	if !slices.Equal(ids, want) {
		t.Errorf("scenarios %v; want %v", ids, want)
	}
	svg, err := os.ReadFile(chart)
	if err != nil || !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "S3") {
		t.Errorf("chart %s: %v, starts %.60q; want an SVG naming the scenarios", chart, err, svg)
	}
	if r.stderr != "" && strings.Contains(r.stderr, "\r") {
		t.Errorf("progress display written with carriage returns although stderr is not a terminal: %q", r.stderr)
	}
}

func TestIntegrationBenchRedis(t *testing.T) {
	t.Parallel()
	benchSuite(t, redisDeployment(t, 1), "redis", 1)
}

func TestIntegrationBenchRedlock(t *testing.T) {
	t.Parallel()
	// --ttl 4s: each node gets a twentieth of it, 200ms, to vote. With
	// 1s (50ms each) an uncontended TryLock lost two of three votes under
	// -race beside another make test.
	benchSuite(t, redlockDeployment(t, 4*time.Second, 4*time.Second), "redlock", 3)
}

func TestIntegrationBenchZooKeeper(t *testing.T) {
	t.Parallel()
	benchSuite(t, zkDeployment(t), "zookeeper", 1)
}

func TestIntegrationBenchPostgres(t *testing.T) {
	t.Parallel()
	t.Run("Lease", func(t *testing.T) { benchSuite(t, pgDeployment(t, false), "postgres", 1) })
	t.Run("Session", func(t *testing.T) { benchSuite(t, pgDeployment(t, true), "postgres", 1) })
}

// The table names every scenario and the deployment.
func TestIntegrationBenchTable(t *testing.T) {
	t.Parallel()
	d := redisDeployment(t, 1)
	r := dlock(t, nil, append(append([]string{"bench"}, d.flags...), "--duration", "100ms", "--scenarios", "S1,S3")...)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"SCENARIO", "S1 ", "S3 ", "hand-over", strings.TrimPrefix(d.flags[1], "redis://")} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "S2 ") {
		t.Errorf("--scenarios S1,S3 ran S2:\n%s", r.stdout)
	}
}
