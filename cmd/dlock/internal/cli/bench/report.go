package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"
)

// JSONFormat names the version of the -o json document. Fields are only
// ever added to it; a change to an existing field gets a new version.
const JSONFormat = "dlock-bench/1"

// report is one run's results and what they were measured on.
type report struct {
	Started     time.Time
	Elapsed     time.Duration
	Kind        string // "redis", "redlock" or "zookeeper"
	Addresses   []string
	Options     Options
	Results     []*Result
	Interrupted bool
}

func newReport(r *runner) *report {
	rep := &report{Started: time.Now(), Kind: r.spec.Kind(), Options: r.o}
	for _, n := range r.spec.Nodes() {
		rep.Addresses = append(rep.Addresses, n.Addr)
	}
	return rep
}

// ---- table ----

// writeTable writes the results as an aligned table with notes below it.
func (rep *report) writeTable(w io.Writer) error {
	o := rep.Options
	fmt.Fprintf(w, "dlock bench: %s %s, --kind %s, --ttl %v, %v per scenario, %s %s/%s, GOMAXPROCS %d\n\n",
		rep.Kind, strings.Join(rep.Addresses, ","), kindLabel(o), o.TTL, o.Duration,
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tDESCRIPTION\tLATENCY\tOPS\tOPS/S\tP50\tP90\tP99\tMAX\tERRORS\tOVERLAPS")
	for _, res := range rep.Results {
		l := &res.Latency
		overlaps := "-"
		if res.Checked {
			overlaps = fmt.Sprint(res.Overlaps)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n",
			res.Label(), res.Description, res.Measures, res.Ops, formatRate(res.OpsPerSec()),
			formatLatency(l, l.Quantile(0.50)), formatLatency(l, l.Quantile(0.90)),
			formatLatency(l, l.Quantile(0.99)), formatLatency(l, l.Max()),
			res.Errors, overlaps)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var notes []string
	for _, res := range rep.Results {
		if c := res.Contention; c != nil && res.Ops > 0 {
			s := fmt.Sprintf("%s: %d acquisitions by %d clients; per-client share %.2f-%.2f x fair; at most %d holders at once; wait in Lock p50 %s, p99 %s",
				res.ID, res.Ops, c.Clients, c.ShareMin, c.ShareMax, c.MaxHolders,
				formatLatency(&c.Wait, c.Wait.Quantile(0.50)), formatLatency(&c.Wait, c.Wait.Quantile(0.99)))
			if exclusive(o.Kind) && res.Ops > 1 {
				s += fmt.Sprintf("; %.0f%% of acquisitions changed the holder", 100*float64(c.Switches)/float64(res.Ops-1))
			}
			notes = append(notes, s)
		}
		if res.Regressions > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d fences did not increase: a safety violation", res.Label(), res.Regressions))
		}
		if res.Errors > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d errors; first:", res.Label(), res.Errors))
			for _, e := range res.FirstErrors {
				notes = append(notes, "  "+oneLine(e))
			}
		}
	}
	if rep.Interrupted {
		notes = append(notes, "interrupted: the results cover only what ran")
	}
	notes = append(notes, fmt.Sprintf("lock names: %s/...; latencies: cycle = TryLock + Release, hand-over = Release call to the next holder's Lock returning, wait = Lock call to return", o.Prefix))
	fmt.Fprintf(w, "\n%s\n", strings.Join(notes, "\n"))
	return nil
}

// kindLabel is the lock kind as the header shows it.
func kindLabel(o Options) string {
	if o.Permits > 0 {
		return fmt.Sprintf("%s --permits %d", o.Kind, o.Permits)
	}
	return o.Kind
}

// formatLatency formats d, a value of l, or "-" if l is empty.
func formatLatency(l *Recorder, d time.Duration) string {
	if l.Count() == 0 {
		return "-"
	}
	return formatDuration(d)
}

// formatDuration formats d with three significant digits: 812ns, 45.6µs,
// 182µs, 1.23ms, 2.50s.
func formatDuration(d time.Duration) string {
	// A value that rounds up to 1000 of a unit is shown in the next one.
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < 999_500*time.Nanosecond:
		return sig3(float64(d)/float64(time.Microsecond)) + "µs"
	case d < 999_500*time.Microsecond:
		return sig3(float64(d)/float64(time.Millisecond)) + "ms"
	}
	return sig3(d.Seconds()) + "s"
}

// sig3 formats x (at least 1) with three significant digits, more before
// the point if it is 1000 or above.
func sig3(x float64) string {
	switch {
	case x >= 99.95:
		return fmt.Sprintf("%.0f", x)
	case x >= 9.995:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func formatRate(r float64) string {
	if r >= 100 || r == 0 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.1f", r)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ---- JSON ----

type jsonDoc struct {
	Format       string         `json:"format"`
	Started      time.Time      `json:"started"`
	ElapsedNS    int64          `json:"elapsed_ns"`
	Interrupted  bool           `json:"interrupted"`
	Backend      jsonBackend    `json:"backend"`
	GoVersion    string         `json:"go_version"`
	OS           string         `json:"os"`
	Arch         string         `json:"arch"`
	GOMAXPROCS   int            `json:"gomaxprocs"`
	DlockVersion string         `json:"dlock_version"`
	Settings     jsonSettings   `json:"settings"`
	Scenarios    []jsonScenario `json:"scenarios"`
}

type jsonBackend struct {
	Kind      string   `json:"kind"`
	Addresses []string `json:"addresses"`
}

type jsonSettings struct {
	Scenarios    []string `json:"scenarios"`
	DurationNS   int64    `json:"duration_ns"`
	Clients      int      `json:"clients"`
	Goroutines   int      `json:"goroutines"`
	HoldNS       int64    `json:"hold_ns"`
	Kind         string   `json:"kind"`
	Permits      int      `json:"permits"`
	TTLNS        int64    `json:"ttl_ns"`
	LockPrefix   string   `json:"lock_prefix"`
	ChartWritten bool     `json:"chart_written"`
}

type jsonLatency struct {
	Count  int64 `json:"count"`
	MinNS  int64 `json:"min_ns"`
	MeanNS int64 `json:"mean_ns"`
	P50NS  int64 `json:"p50_ns"`
	P90NS  int64 `json:"p90_ns"`
	P99NS  int64 `json:"p99_ns"`
	P999NS int64 `json:"p999_ns"`
	MaxNS  int64 `json:"max_ns"`
}

type jsonScenario struct {
	ID               string          `json:"id"`
	Node             string          `json:"node,omitempty"`
	Description      string          `json:"description"`
	LatencyMeasures  string          `json:"latency_measures"`
	ElapsedNS        int64           `json:"elapsed_ns"`
	Ops              int64           `json:"ops"`
	OpsPerSec        float64         `json:"ops_per_sec"`
	Latency          jsonLatency     `json:"latency"`
	Errors           int64           `json:"errors"`
	FirstErrors      []string        `json:"first_errors"`
	ExclusionChecked bool            `json:"mutual_exclusion_checked"`
	Overlaps         int64           `json:"overlaps"`
	FenceRegressions int64           `json:"fence_regressions"`
	Contention       *jsonContention `json:"contention,omitempty"`
}

type jsonContention struct {
	Clients    int         `json:"clients"`
	Switches   int64       `json:"holder_changes"`
	ShareMin   float64     `json:"share_min"`
	ShareMax   float64     `json:"share_max"`
	MaxHolders int64       `json:"max_holders"`
	Wait       jsonLatency `json:"wait"`
}

func latencyJSON(l *Recorder) jsonLatency {
	return jsonLatency{Count: l.Count(), MinNS: int64(l.Min()), MeanNS: int64(l.Mean()),
		P50NS: int64(l.Quantile(0.50)), P90NS: int64(l.Quantile(0.90)), P99NS: int64(l.Quantile(0.99)),
		P999NS: int64(l.Quantile(0.999)), MaxNS: int64(l.Max())}
}

func (rep *report) document() jsonDoc {
	o := rep.Options
	doc := jsonDoc{Format: JSONFormat, Started: rep.Started.UTC(), ElapsedNS: int64(rep.Elapsed), Interrupted: rep.Interrupted,
		Backend:   jsonBackend{Kind: rep.Kind, Addresses: append([]string{}, rep.Addresses...)},
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, GOMAXPROCS: runtime.GOMAXPROCS(0),
		DlockVersion: dlockVersion(),
		Settings: jsonSettings{Scenarios: append([]string{}, o.Scenarios...), DurationNS: int64(o.Duration), Clients: o.Clients,
			Goroutines: o.Goroutines, HoldNS: int64(o.Hold), Kind: o.Kind, Permits: o.Permits, TTLNS: int64(o.TTL),
			LockPrefix: o.Prefix, ChartWritten: o.Chart != ""},
		Scenarios: []jsonScenario{}}
	for _, res := range rep.Results {
		s := jsonScenario{ID: res.ID, Node: res.Node, Description: res.Description, LatencyMeasures: res.Measures,
			ElapsedNS: int64(res.Elapsed), Ops: res.Ops, OpsPerSec: res.OpsPerSec(), Latency: latencyJSON(&res.Latency),
			Errors: res.Errors, FirstErrors: append([]string{}, res.FirstErrors...), ExclusionChecked: res.Checked,
			Overlaps: res.Overlaps, FenceRegressions: res.Regressions}
		if c := res.Contention; c != nil {
			s.Contention = &jsonContention{Clients: c.Clients, Switches: c.Switches, ShareMin: c.ShareMin,
				ShareMax: c.ShareMax, MaxHolders: c.MaxHolders, Wait: latencyJSON(&c.Wait)}
		}
		doc.Scenarios = append(doc.Scenarios, s)
	}
	return doc
}

// writeJSON writes the results as one indented JSON document.
func (rep *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep.document())
}

// dlockVersion is the main module's version from the build information.
func dlockVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
