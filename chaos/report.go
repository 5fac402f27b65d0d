package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteSummary writes the summary table of results, one row per run, and
// below it, for each run, the liveness by fault (how soon the lock came
// back, and the Lock calls that failed instead of waiting) and every
// violation outside the documented limits.
func WriteSummary(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tTIME\tFAULTS\tGRANTS\tLOSSES\tLEASE OVERLAPS\tSECTION OVERLAPS\tLOST UPDATES\tSTALE WRITES\tSTALE REFUSED\tFENCE REGRESSIONS\tLOCK FAILED\tREGISTER\tVERDICT")
	for _, r := range results {
		v := r.Verdict
		cell := func(k Kind) string {
			all, explained := v.Count(k)
			if explained > 0 {
				return fmt.Sprintf("%d (%d limit)", all, explained)
			}
			return fmt.Sprint(all)
		}
		name := v.Backend
		if r.Options.TLS {
			name += " (TLS)"
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", name, v.Duration.Round(time.Second),
			v.Faults, v.Grants, v.Losses, cell(LeaseOverlap), cell(SectionOverlap), cell(LostUpdate),
			cell(StaleWrite), v.StaleRefused, cell(FenceRegression), v.LockFailures, v.Register, verdictText(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\n(n limit): of n, those within the documented limits of the fault in force (docs/SAFETY.md).")
	fmt.Fprintln(w, "LOCK FAILED: Lock calls that returned an error before their context ended, instead of waiting.")
	fmt.Fprintln(w, "REGISTER: whether the clients' calls to the fenced register form a linearizable history.")
	for _, r := range results {
		v := r.Verdict
		if len(v.Liveness) > 0 {
			fmt.Fprintf(w, "\n%s, seed %d: time to the next grant (target: under %v from the fault's end), and Lock calls that failed instead of waiting, by fault:\n",
				v.Backend, r.Options.Seed, v.LivenessTarget)
			writeLiveness(w, v.Liveness)
		}
		t0 := start(r)
		lockFailed := 0
		for _, x := range v.Unexplained() {
			if x.Kind == LockFailed {
				if lockFailed++; lockFailed > maxLockFailedLines {
					continue
				}
			}
			fmt.Fprintf(w, "%s VIOLATION %s at %v: %s", v.Backend, x.Kind, x.At.Sub(t0).Round(time.Millisecond), x.Detail)
			if x.Fault != "" {
				fmt.Fprintf(w, " (during or after %s)", x.Fault)
			}
			if x.Kind == LockFailed && !enforceLockWaits {
				fmt.Fprint(w, " [not enforced yet]")
			}
			fmt.Fprintln(w)
		}
		if n := lockFailed - maxLockFailedLines; n > 0 {
			fmt.Fprintf(w, "%s: and %d more Lock calls that failed instead of waiting (all of them in the JSON output)\n", v.Backend, n)
		}
		for _, n := range r.ClientNotes {
			fmt.Fprintf(w, "%s client failed: %s\n", v.Backend, oneLine(n))
		}
	}
	return nil
}

// maxLockFailedLines is how many LockFailed violations WriteSummary lists
// for each run: a backend that fails its Lock calls on a fault fails
// hundreds in a long run.
const maxLockFailedLines = 10

// verdictText is the verdict column of a run.
func verdictText(r *Result) string {
	v := r.Verdict
	text := "ok"
	if n := len(v.Failures()); n > 0 {
		text = fmt.Sprintf("FAIL: %d unexplained", n)
	}
	if n := len(v.Unexplained()) - len(v.Failures()); n > 0 {
		text += fmt.Sprintf(" (%d Lock failures not enforced yet)", n)
	}
	if r.Interrupted {
		text += ", interrupted"
	}
	return text
}

// writeLiveness writes one line per kind of fault.
func writeLiveness(w io.Writer, ls []Liveness) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  fault\tfaults\tstart→grant median\tmax\theal→grant median\tp99\tmax\tno grant after\tover target\tLock failed\t")
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	for _, l := range ls {
		if l.Fault == "" {
			fmt.Fprintf(tw, "  no fault\t\t\t\t\t\t\t\t\t%d\t\n", l.LockFailed)
			continue
		}
		line := fmt.Sprintf("  %s\t%d\t", l.Fault, l.Faults)
		if l.Followed > 0 {
			line += fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t", ms(l.StartMedian), ms(l.StartMax), ms(l.HealMedian), ms(l.HealP99), ms(l.HealMax))
		} else {
			line += "-\t-\t-\t-\t-\t"
		}
		fmt.Fprintf(tw, "%s%d\t%d\t%d\t\n", line, l.Faults-l.Followed, l.OverTarget, l.LockFailed)
	}
	tw.Flush()
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
