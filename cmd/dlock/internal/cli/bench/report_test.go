package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/internal/testenv"
)

// sampleReport is a report of made-up results: what the output code sees.
func sampleReport(t *testing.T) *report {
	t.Helper()
	o, err := Parse([]string{"--prefix", "dlock-bench-test", "--duration", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(base time.Duration, n int) Recorder {
		var r Recorder
		for i := range n {
			r.Record(base + time.Duration(i)*base/time.Duration(n))
		}
		return r
	}
	s3 := &Result{ID: "S3", Description: "contended hand-over, 8 clients on 1 lock, hold 50µs", Measures: MeasureHandOver,
		Elapsed: time.Second, Ops: 900, Checked: true, Latency: rec(50*time.Microsecond, 899),
		Contention: &Contention{Clients: 8, Wait: rec(time.Millisecond, 900), Switches: 700, ShareMin: 0.9, ShareMax: 1.1, MaxHolders: 1}}
	return &report{Started: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Elapsed: 4 * time.Second, Kind: "redlock",
		Addresses: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, Options: o,
		Results: []*Result{
			{ID: "S1", Description: "uncontended lock + release, 1 goroutine", Measures: MeasureCycle, Elapsed: time.Second, Ops: 5000, Latency: rec(200*time.Microsecond, 5000)},
			{ID: "S2", Description: "uncontended lock + release, 64 goroutines on one connection", Measures: MeasureCycle, Elapsed: time.Second, Ops: 20000,
				Errors: 2, FirstErrors: []string{"TryLock \"x\": connection\nreset"}, Latency: rec(2*time.Millisecond, 20000)},
			s3,
			{ID: "S4", Node: "127.0.0.1:1", Description: "S1 through node 1 of 3 alone", Measures: MeasureCycle, Elapsed: time.Second, Ops: 7000, Latency: rec(100*time.Microsecond, 7000)},
			{ID: "S4", Node: "127.0.0.1:2", Description: "S1 through node 2 of 3 alone", Measures: MeasureCycle, Errors: 1, FirstErrors: []string{"cannot reach 127.0.0.1:2: refused"}},
		}}
}

// tableRow is one parsed row of the results table.
type tableRow struct {
	label, description, measures string
	ops                          int64
	rate, p50, p90, p99, max     string
	errors                       int64
	overlaps                     string
}

var columns = regexp.MustCompile(`\s{2,}`)

// parseTable returns the rows of the table in out, checking its header.
func parseTable(t *testing.T, out string) []tableRow {
	t.Helper()
	lines := strings.Split(out, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "SCENARIO") })
	if i < 0 {
		t.Fatalf("no table header in:\n%s", out)
	}
	header := columns.Split(strings.TrimSpace(lines[i]), -1)
	want := []string{"SCENARIO", "DESCRIPTION", "LATENCY", "OPS", "OPS/S", "P50", "P90", "P99", "MAX", "ERRORS", "OVERLAPS"}
	if !slices.Equal(header, want) {
		t.Fatalf("header %q, want %q", header, want)
	}
	// Aligned: every column starts at the same offset in every row, as a
	// terminal shows it: in runes, since "µs" is two bytes and one column.
	starts := func(l string) []int {
		var s []int
		for _, m := range columns.FindAllStringIndex(l, -1) {
			s = append(s, utf8.RuneCountInString(l[:m[1]]))
		}
		return s
	}
	var rows []tableRow
	for _, l := range lines[i+1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		f := columns.Split(strings.TrimSpace(l), -1)
		if len(f) != len(want) {
			t.Fatalf("row %q has %d columns, want %d", l, len(f), len(want))
		}
		if !slices.Equal(starts(l), starts(lines[i])) {
			t.Errorf("row %q is not aligned with the header %q", l, lines[i])
		}
		ops, err1 := strconv.ParseInt(f[3], 10, 64)
		errs, err2 := strconv.ParseInt(f[9], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("row %q: ops or errors is not a number", l)
		}
		rows = append(rows, tableRow{label: f[0], description: f[1], measures: f[2], ops: ops, rate: f[4],
			p50: f[5], p90: f[6], p99: f[7], max: f[8], errors: errs, overlaps: f[10]})
	}
	return rows
}

func TestTable(t *testing.T) {
	rep := sampleReport(t)
	var b bytes.Buffer
	if err := rep.writeTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	rows := parseTable(t, out)
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5:\n%s", len(rows), out)
	}
	s1, s3, down := rows[0], rows[2], rows[4]
	if s1.label != "S1" || s1.ops != 5000 || s1.rate != "5000" || s1.overlaps != "-" || s1.measures != "cycle" {
		t.Errorf("S1 row %+v", s1)
	}
	if s1.p50 != formatDuration(rep.Results[0].Latency.Quantile(0.5)) || !strings.HasSuffix(s1.p50, "µs") {
		t.Errorf("S1 p50 %q", s1.p50)
	}
	if s3.overlaps != "0" || s3.measures != "hand-over" {
		t.Errorf("S3 row %+v", s3)
	}
	if down.label != "S4 127.0.0.1:2" || down.ops != 0 || down.p50 != "-" || down.max != "-" || down.errors != 1 {
		t.Errorf("unreachable node's row %+v", down)
	}
	for _, want := range []string{"redlock 127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "S2: 2 errors; first:", `  TryLock "x": connection reset`,
		"S3: 900 acquisitions by 8 clients; per-client share 0.90-1.10 x fair", "78% of acquisitions changed the holder", "lock names: dlock-bench-test/..."} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0ns"}, {812, "812ns"}, {1234, "1.23µs"}, {45_640, "45.6µs"}, {182_400, "182µs"}, {999_999, "1.00ms"}, {999_400, "999µs"},
		{1_234_567, "1.23ms"}, {2_500_000_000, "2.50s"}, {125 * time.Second, "125s"},
	}
	for _, tt := range tests {
		if got := formatDuration(tt.d); got != tt.want {
			t.Errorf("formatDuration(%d) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestJSON(t *testing.T) {
	rep := sampleReport(t)
	var b bytes.Buffer
	if err := rep.writeJSON(&b); err != nil {
		t.Fatal(err)
	}
	checkJSON(t, b.Bytes(), "redlock", 3, []string{"S1", "S2", "S3", "S4", "S4"})
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	sc := doc["scenarios"].([]any)
	s1, s3, down := sc[0].(map[string]any), sc[2].(map[string]any), sc[4].(map[string]any)
	lat := s1["latency"].(map[string]any)
	if lat["count"].(float64) != 5000 || lat["p50_ns"].(float64) != float64(rep.Results[0].Latency.Quantile(0.5)) {
		t.Errorf("S1 latency %v", lat)
	}
	if _, ok := s1["contention"]; ok {
		t.Errorf("S1 has contention: %v", s1)
	}
	if _, ok := s1["node"]; ok {
		t.Errorf("S1 has a node: %v", s1)
	}
	c := s3["contention"].(map[string]any)
	for _, k := range []string{"clients", "holder_changes", "share_min", "share_max", "max_holders", "wait"} {
		if _, ok := c[k]; !ok {
			t.Errorf("S3 contention lacks %q: %v", k, c)
		}
	}
	if down["node"] != "127.0.0.1:2" || down["ops"].(float64) != 0 || len(down["first_errors"].([]any)) != 1 {
		t.Errorf("unreachable node: %v", down)
	}
	if got := doc["started"]; got != "2025-01-02T03:04:05Z" {
		t.Errorf("started %v", got)
	}
}

// checkJSON checks the shape of a -o json document: its keys, the backend,
// and the scenario ids in order.
func checkJSON(t *testing.T, data []byte, kind string, addrs int, ids []string) map[string]any {
	t.Helper()
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("more than one JSON document:\n%s", data)
	}
	keys := []string{"format", "started", "elapsed_ns", "interrupted", "backend", "go_version", "os", "arch",
		"gomaxprocs", "dlock_version", "settings", "scenarios"}
	for _, k := range keys {
		if _, ok := doc[k]; !ok {
			t.Errorf("document lacks %q", k)
		}
	}
	if doc["format"] != JSONFormat || !strings.HasPrefix(doc["go_version"].(string), "go") {
		t.Errorf("format %v, go_version %v", doc["format"], doc["go_version"])
	}
	be := doc["backend"].(map[string]any)
	if be["kind"] != kind || len(be["addresses"].([]any)) != addrs {
		t.Errorf("backend %v, want %s with %d addresses", be, kind, addrs)
	}
	set := doc["settings"].(map[string]any)
	for _, k := range []string{"scenarios", "duration_ns", "clients", "goroutines", "hold_ns", "kind", "permits", "ttl_ns", "lock_prefix"} {
		if _, ok := set[k]; !ok {
			t.Errorf("settings lack %q", k)
		}
	}
	var got []string
	for _, s := range doc["scenarios"].([]any) {
		m := s.(map[string]any)
		got = append(got, m["id"].(string))
		for _, k := range []string{"description", "latency_measures", "elapsed_ns", "ops", "ops_per_sec", "latency",
			"errors", "first_errors", "mutual_exclusion_checked", "overlaps", "fence_regressions"} {
			if _, ok := m[k]; !ok {
				t.Errorf("scenario %v lacks %q", m["id"], k)
			}
		}
		lat := m["latency"].(map[string]any)
		for _, k := range []string{"count", "min_ns", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"} {
			if _, ok := lat[k]; !ok {
				t.Errorf("scenario %v latency lacks %q", m["id"], k)
			}
		}
	}
	if !slices.Equal(got, ids) {
		t.Errorf("scenarios %v, want %v", got, ids)
	}
	return doc
}

// svgSeries parses data as XML and returns the labels of its series (the
// polylines of class "series"), checking that each has points.
func svgSeries(t *testing.T, data []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var (
		labels []string
		group  string
		root   bool
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := func(name string) string {
			for _, a := range se.Attr {
				if a.Name.Local == name {
					return a.Value
				}
			}
			return ""
		}
		switch {
		case se.Name.Local == "svg":
			root = se.Name.Space == "http://www.w3.org/2000/svg"
		case se.Name.Local == "g" && attr("class") == "series":
			group = attr("data-scenario")
		case se.Name.Local == "polyline" && attr("class") == "series":
			pts := strings.Fields(attr("points"))
			if len(pts) < 2 {
				t.Errorf("series %q has %d points", group, len(pts))
			}
			for _, p := range pts {
				x, y, ok := strings.Cut(p, ",")
				_, e1 := strconv.ParseFloat(x, 64)
				_, e2 := strconv.ParseFloat(y, 64)
				if !ok || e1 != nil || e2 != nil {
					t.Fatalf("series %q: bad point %q", group, p)
				}
			}
			labels = append(labels, group)
		}
	}
	if !root {
		t.Errorf("no <svg> root in the SVG namespace")
	}
	return labels
}

func TestChart(t *testing.T) {
	rep := sampleReport(t)
	data := rep.chart()
	got := svgSeries(t, data)
	// The unreachable node has no latencies, so no line.
	want := []string{"S1", "S2", "S3", "S4 127.0.0.1:1"}
	if !slices.Equal(got, want) {
		t.Errorf("series %q, want %q", got, want)
	}
	for _, s := range []string{"<title>", "99.9%", "latency (log scale)", "S3 hand-over"} {
		if !bytes.Contains(data, []byte(s)) {
			t.Errorf("chart lacks %q", s)
		}
	}
	if bytes.Contains(data, []byte("href")) || bytes.Contains(data, []byte("<script")) {
		t.Errorf("chart refers to something outside itself")
	}

	// One value, and no value at all.
	var one Recorder
	one.Record(time.Millisecond)
	rep.Results = []*Result{{ID: "S1", Measures: MeasureCycle, Ops: 1, Latency: one}}
	if got := svgSeries(t, rep.chart()); len(got) != 1 {
		t.Errorf("one value: series %q", got)
	}
	rep.Results = []*Result{{ID: "S1", Measures: MeasureCycle}}
	if got := svgSeries(t, rep.chart()); len(got) != 0 {
		t.Errorf("no value: series %q", got)
	}
}

func TestNinesLabel(t *testing.T) {
	for n, want := range []string{"0%", "90%", "99%", "99.9%", "99.99%"} {
		if got := ninesLabel(n); got != want {
			t.Errorf("ninesLabel(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestMainUnreachable: a Redis that does not answer is exit 69, with the
// error on one line.
func TestMainUnreachable(t *testing.T) {
	testenv.SkipIfShort(t, "go-redis retries the dial for over a second")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var out, errOut bytes.Buffer
	code := Main([]string{"--redis", "redis://" + addr, "--duration", "100ms"},
		cmdutil.IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	msg := errOut.String()
	if code != cmdutil.ExitUnavailable || !strings.Contains(msg, "cannot reach redis") || !strings.Contains(msg, addr) ||
		strings.Count(msg, "\n") != 1 || out.Len() > 0 {
		t.Errorf("exit %d, stderr %q, stdout %q; want 69 and one line naming %s", code, msg, out.String(), addr)
	}
}
