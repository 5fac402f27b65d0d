package dlockprom_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/dlockprom"
	"github.com/prometheus/client_golang/prometheus"
)

// The files operators import: the Grafana dashboard and the alert rules.
const (
	dashboardFile = "grafana/dlock.json"
	alertsFile    = "alerts.yml"
)

// dashboardQueries returns the PromQL of every target of every panel of
// the dashboard, by panel title.
func dashboardQueries(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	q := map[string][]string{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			q[p.Title] = append(q[p.Title], tg.Expr)
		}
	}
	if len(q) == 0 {
		t.Fatalf("%s has no panels", dashboardFile)
	}
	return q
}

// registeredNames returns the names of the series a Collector exports:
// each metric's, and a histogram's _bucket, _sum and _count.
func registeredNames() map[string]bool {
	names := map[string]bool{}
	ch := make(chan *prometheus.Desc, 32)
	go func() { dlockprom.New().Describe(ch); close(ch) }()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			continue
		}
		names[m[1]] = true
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			names[m[1]+s] = true
		}
	}
	return names
}

var (
	// seriesName is a name that could be a series of dlock's.
	seriesName = regexp.MustCompile(`\bdlock_[a-zA-Z0-9_]+`)
	// labelMatch is a label matcher: name, operator, value.
	labelMatch = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	// grouping is the label list of by, without, on or ignoring.
	grouping = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
)

// The labels of dlockprom's series, Prometheus's own (le, and the job and
// instance a scrape adds), and the values each label of dlockprom's takes.
var (
	knownLabels = []string{"lock", "kind", "result", "cause", "le", "job", "instance", "alertname"}
	knownValues = map[string][]string{
		"result": {"acquired", "not_obtained", "error", "ok", "failed", "accepted", "stale"},
		"cause":  {"expired", "taken_over", "session_expired", "lease_not_found", "closed", "other"},
		"kind":   {"mutex", "fair", "read", "write", "semaphore", "reentrant", "session"},
	}
)

// checkQuery reports, in where, every series name that no Collector
// exports and every label or label value it does not use.
func checkQuery(errorf func(format string, args ...any), where, q string, names map[string]bool) {
	used := seriesName.FindAllString(q, -1)
	if len(used) == 0 {
		errorf("%s: no dlock series in %q", where, q)
	}
	for _, n := range used {
		if !names[n] {
			errorf("%s: %s is not a series of dlockprom's (%q)", where, n, q)
		}
	}
	for _, m := range labelMatch.FindAllStringSubmatch(q, -1) {
		label, op, value := m[1], m[2], m[3]
		if !slices.Contains(knownLabels, label) {
			errorf("%s: label %q is not one of dlockprom's (%q)", where, label, q)
		}
		if vals, ok := knownValues[label]; ok && op == "=" && !slices.Contains(vals, value) {
			errorf("%s: %s=%q is not a value dlockprom gives %s (%v)", where, label, value, label, vals)
		}
	}
	for _, m := range grouping.FindAllStringSubmatch(q, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(knownLabels, l) {
				errorf("%s: grouping label %q is not one of dlockprom's (%q)", where, l, q)
			}
		}
	}
}

// alertRules returns the alerts of the rules file: name, expression, and
// whether it has a for clause. It reads the one layout the file uses
// (alert:, expr: | and an indented block, for:), not YAML in general;
// promtool checks the file as YAML.
func alertRules(t *testing.T) (names []string, exprs map[string]string, hasFor map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	exprs, hasFor = map[string]string{}, map[string]bool{}
	lines := strings.Split(string(b), "\n")
	var cur string
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(l, "- alert:"):
			cur = strings.TrimSpace(strings.TrimPrefix(l, "- alert:"))
			names = append(names, cur)
		case strings.HasPrefix(l, "expr:"):
			e := strings.TrimSpace(strings.TrimPrefix(l, "expr:"))
			if e == "|" {
				e = ""
				indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
				for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) > indent) {
					i++
					e += lines[i] + "\n"
				}
			}
			exprs[cur] = e
		case strings.HasPrefix(l, "for:"):
			hasFor[cur] = true
		}
	}
	return names, exprs, hasFor
}

// Every series the dashboard's panels and the alert rules query is one
// dlockprom registers, with its labels and label values: a typo fails
// here rather than on an operator's empty panel or silent alert.
func TestDashboardAndAlertsUseRegisteredSeries(t *testing.T) {
	names := registeredNames()
	if len(names) < 8 {
		t.Fatalf("only %d names registered: %v", len(names), names)
	}
	for title, qs := range dashboardQueries(t) {
		for _, q := range qs {
			checkQuery(t.Errorf, "panel "+title, q, names)
		}
	}
	alerts, exprs, hasFor := alertRules(t)
	want := []string{"DlockLeaseLost", "DlockLockHeldPastUsual", "DlockWaitersPilingUp", "DlockBackendUnreachable"}
	for _, a := range want {
		if !slices.Contains(alerts, a) {
			t.Errorf("%s lacks the alert %s", alertsFile, a)
		}
	}
	for _, a := range alerts {
		if !hasFor[a] {
			t.Errorf("alert %s has no for: clause", a)
		}
		if strings.TrimSpace(exprs[a]) == "" {
			t.Errorf("alert %s has no expr", a)
			continue
		}
		checkQuery(t.Errorf, "alert "+a, exprs[a], names)
	}
}

// The check above finds what it is meant to find.
func TestCheckQueryCatchesTypos(t *testing.T) {
	names := registeredNames()
	for _, q := range []string{
		`sum(dlock_holder)`,
		`rate(dlock_acquisitions_total{result="eror"}[5m])`,
		`sum by (lok) (dlock_waiting)`,
		`dlock_losses_total{cuase="expired"}`,
		`dlock_holders{kind="Mutex"}`,
	} {
		var found []string
		checkQuery(func(f string, a ...any) { found = append(found, fmt.Sprintf(f, a...)) }, "q", q, names)
		if len(found) == 0 {
			t.Errorf("checkQuery(%q) found nothing wrong", q)
		}
	}
}
