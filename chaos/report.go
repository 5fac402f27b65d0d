package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteSummary writes the summary table of results, one row per run, and
// below it every violation outside the documented limits and the recovery
// times by fault.
func WriteSummary(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tTIME\tFAULTS\tGRANTS\tLOSSES\tLEASE OVERLAPS\tSECTION OVERLAPS\tLOST UPDATES\tSTALE WRITES\tSTALE REFUSED\tFENCE REGRESSIONS\tVERDICT")
	for _, r := range results {
		v := r.Verdict
		cell := func(k Kind) string {
			all, explained := v.Count(k)
			if explained > 0 {
				return fmt.Sprintf("%d (%d limit)", all, explained)
			}
			return fmt.Sprint(all)
		}
		verdict := "ok"
		if !v.OK() {
			verdict = fmt.Sprintf("FAIL: %d unexplained", len(v.Unexplained()))
		}
		if r.Interrupted {
			verdict += ", interrupted"
		}
		name := v.Backend
		if r.Options.TLS {
			name += " (TLS)"
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", name, v.Duration.Round(time.Second),
			v.Faults, v.Grants, v.Losses, cell(LeaseOverlap), cell(SectionOverlap), cell(LostUpdate),
			cell(StaleWrite), v.StaleRefused, cell(FenceRegression), verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\n(n limit): of n, those within the documented limits of the fault in force (docs/SAFETY.md).")
	for _, r := range results {
		v := r.Verdict
		if len(v.Recoveries) > 0 {
			fmt.Fprintf(w, "\n%s, seed %d: time from each fault to the next grant, by fault (median, longest):\n", v.Backend, r.Options.Seed)
			writeRecoveries(w, v.Recoveries)
		}
		t0 := start(r)
		for _, x := range v.Unexplained() {
			fmt.Fprintf(w, "%s VIOLATION %s at %v: %s", v.Backend, x.Kind, x.At.Sub(t0).Round(time.Millisecond), x.Detail)
			if x.Fault != "" {
				fmt.Fprintf(w, " (during or after %s)", x.Fault)
			}
			fmt.Fprintln(w)
		}
		for _, n := range r.ClientNotes {
			fmt.Fprintf(w, "%s client failed: %s\n", v.Backend, oneLine(n))
		}
	}
	return nil
}

// writeRecoveries writes one line per kind of fault.
func writeRecoveries(w io.Writer, rs []Recovery) {
	by := map[string][]time.Duration{}
	var order []string
	for _, r := range rs {
		kind, _, _ := strings.Cut(r.Fault, " ")
		if _, ok := by[kind]; !ok {
			order = append(order, kind)
		}
		by[kind] = append(by[kind], r.FromStart)
	}
	for _, kind := range order {
		ds := by[kind]
		var got []time.Duration
		none := 0
		for _, d := range ds {
			if d < 0 {
				none++
				continue
			}
			got = append(got, d)
		}
		line := fmt.Sprintf("  %-15s x%-3d", kind, len(ds))
		if len(got) > 0 {
			med, longest := medianMax(got)
			line += fmt.Sprintf(" %8v %8v", med.Round(time.Millisecond), longest.Round(time.Millisecond))
		}
		if none > 0 {
			line += fmt.Sprintf("  (%d with no grant before the run ended)", none)
		}
		fmt.Fprintln(w, line)
	}
}

func medianMax(ds []time.Duration) (time.Duration, time.Duration) {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2], s[len(s)-1]
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// start returns the time the run began.
func start(r *Result) Mono {
	for _, e := range r.History.Events() {
		if e.Op == OpStart {
			return e.At
		}
	}
	return 0
}

// JSONFormat identifies the layout of WriteJSON's document.
const JSONFormat = "dlock-chaos/v1"

type jsonRun struct {
	Backend     string             `json:"backend"`
	TLS         bool               `json:"tls"`
	Seed        uint64             `json:"seed"`
	Clients     int                `json:"clients"`
	TTLNS       int64              `json:"ttl_ns"`
	DurationNS  int64              `json:"duration_ns"`
	Faults      []string           `json:"faults"`
	Random      bool               `json:"random"`
	Interrupted bool               `json:"interrupted"`
	OK          bool               `json:"ok"`
	Counts      map[Kind]jsonCount `json:"counts"`
	Verdict     *Verdict           `json:"verdict"`
	ClientNotes []string           `json:"client_notes"`
}

type jsonCount struct {
	All       int `json:"all"`
	Explained int `json:"explained"`
}

// WriteJSON writes results as one JSON document.
func WriteJSON(w io.Writer, results []*Result) error {
	doc := struct {
		Format string    `json:"format"`
		Runs   []jsonRun `json:"runs"`
	}{Format: JSONFormat, Runs: []jsonRun{}}
	for _, r := range results {
		o, v := r.Options, r.Verdict
		counts := map[Kind]jsonCount{}
		for _, k := range Kinds {
			all, ex := v.Count(k)
			counts[k] = jsonCount{all, ex}
		}
		notes := r.ClientNotes
		if notes == nil {
			notes = []string{}
		}
		if v.Violations == nil {
			v.Violations = []Violation{}
		}
		doc.Runs = append(doc.Runs, jsonRun{Backend: o.Backend, TLS: o.TLS, Seed: o.Seed, Clients: o.Clients, TTLNS: int64(o.TTL),
			DurationNS: int64(v.Duration), Faults: o.Faults, Random: o.Random, Interrupted: r.Interrupted, OK: v.OK(),
			Counts: counts, Verdict: v, ClientNotes: notes})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
