package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dlock chaos as a user runs it: a short run on one Redis with two faults,
// as JSON with a timeline; its clients are copies of the dlock binary.
func TestIntegrationChaos(t *testing.T) {
	t.Parallel()
	timeline := filepath.Join(t.TempDir(), "chaos.html")
	p := startDlock(t, nil, "chaos", "--backend", "redis", "--duration", "5s", "--ttl", "500ms", "--work", "10ms",
		"--faults", "kill-empty,expire", "--seed", "7", "-o", "json", "--timeline", timeline)
	r := p.wait(t, 2*time.Minute)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	var doc struct {
		Format string `json:"format"`
		Runs   []struct {
			Backend string `json:"backend"`
			Seed    uint64 `json:"seed"`
			OK      bool   `json:"ok"`
			Counts  map[string]struct {
				All, Explained int
			} `json:"counts"`
			Verdict struct {
				Grants int `json:"grants"`
				Faults int `json:"faults"`
			} `json:"verdict"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("stdout is not the JSON document: %v\n%s", err, r.stdout)
	}
	if doc.Format != "dlock-chaos/v1" || len(doc.Runs) != 1 {
		t.Fatalf("document %+v", doc)
	}
	run := doc.Runs[0]
	if run.Backend != "redis" || run.Seed != 7 || !run.OK || run.Verdict.Grants < 20 || run.Verdict.Faults < 1 {
		t.Errorf("run %+v; want redis, seed 7, ok, grants and faults", run)
	}
	if c := run.Counts["stale-write-accepted"]; c.All != 0 {
		t.Errorf("stale writes accepted: %+v", c)
	}
	if !strings.Contains(r.stderr, "seed 7") || !strings.Contains(r.stderr, "timeline written") {
		t.Errorf("stderr %q: want the seed and the timeline's path", r.stderr)
	}
	page, err := os.ReadFile(timeline)
	if err != nil || !strings.Contains(string(page), "<svg") || !strings.Contains(string(page), "client 5") {
		t.Errorf("timeline: %v, %d bytes", err, len(page))
	}
}

func TestChaosUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"chaos", "--backend", "etcd"},
		{"chaos", "--faults", "leader-kill", "--backend", "redis"},
		{"chaos", "--timeline", "/nonexistent-dir/x.html", "--backend", "redis"},
	} {
		r := dlock(t, nil, args...)
		if r.code != 64 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || r.stdout != "" {
			t.Errorf("dlock %q: exit %d, stderr %q; want 64 and one line", args, r.code, r.stderr)
		}
	}
}
