// Package inspect implements "dlock inspect" and "dlock release --force".
package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// Timeout bounds connecting and inspecting.
const Timeout = 15 * time.Second

// Usage is the help text of "dlock inspect".
const Usage = `Usage: dlock inspect [flags] NAME

Shows who holds the lock NAME: its kind, holders (owner token, hold count,
mode), fence, remaining TTL, waiters, readers or permits. With Redlock it
shows each master's view and the majority's; with ZooKeeper, each holder's
node and session; with PostgreSQL, a session-mode holder's backend; with
MySQL, a session-mode holder's connection. It only reads.

It creates no table: with PostgreSQL or MySQL, a missing table shows the
lock free. Values that something else stored are shown cut to 256 bytes,
and quoted with Go's escapes if they hold a control character; the table
lists at most 100 holders.

With --once-per runs of NAME recorded, it
shows when the last successful one finished; "dlock release --force"
removes that record.

Exit codes: 0 shown (with --exit-status: 0 held, 3 free, and so 3 for a
lock of kind unknown, which no one is known to hold); 64 bad usage, a
NAME the backend cannot take, or a database account without the
privileges it needs; 69 lock service unreachable or failed.

Flags:
`

type options struct {
	backend    backend.Flags
	output     string
	json       bool
	exitStatus bool
	name       string
}

func parse(args []string) (options, error) {
	var o options
	fs := flagSet(&o)
	pos, err := cmdutil.Parse(fs, args)
	if err != nil {
		return o, err
	}
	return o, finish(&o, pos, "dlock inspect")
}

func flagSet(o *options) *flag.FlagSet {
	fs := cmdutil.NewFlagSet("dlock inspect")
	o.backend.Register(fs)
	fs.StringVar(&o.output, "o", "table", "output format: table or json")
	fs.BoolVar(&o.json, "json", false, "the same as -o json")
	fs.BoolVar(&o.exitStatus, "exit-status", false, "exit 0 if the lock is held, 3 if it is free, for scripts")
	return fs
}

func finish(o *options, pos []string, cmd string) error {
	switch {
	case o.output != "table" && o.output != "json":
		return cmdutil.Usagef("%s: -o %q is not a format; use -o table or -o json", cmd, o.output)
	case len(pos) == 0:
		return cmdutil.Usagef("%s: missing lock NAME", cmd)
	case len(pos) > 1:
		return cmdutil.Usagef("%s: %d arguments, want one lock NAME (got %q)", cmd, len(pos), pos)
	}
	if o.json {
		o.output = "json"
	}
	o.name = pos[0]
	return nil
}

// connect resolves the backend flags and connects.
func connect(ctx context.Context, f *backend.Flags, name string, streams cmdutil.IO) (*backend.Target, error) {
	spec, err := f.Resolve(streams.Getenv)
	if err != nil {
		return nil, err
	}
	for _, w := range spec.Warnings {
		fmt.Fprintln(streams.Err, "dlock:", w)
	}
	if err := backend.CheckName(spec.Kind(), name); err != nil {
		return nil, err
	}
	spec.ReadOnly = true
	t, err := backend.Connect(ctx, spec, nil)
	if err != nil && !cmdutil.IsUsage(err) {
		if d := backend.Denied(err); cmdutil.IsUsage(d) {
			return nil, d
		}
		return nil, fmt.Errorf("cannot reach the lock service: %s", cmdutil.Reason(err))
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Main runs "dlock inspect" with args and returns the exit code.
func Main(args []string, streams cmdutil.IO) int {
	o, err := parse(args)
	if errors.Is(err, cmdutil.ErrHelp) {
		var o options
		cmdutil.PrintUsage(streams.Out, Usage, flagSet(&o))
		return cmdutil.ExitOK
	}
	if err != nil {
		return cmdutil.Fail(streams, err, cmdutil.ExitUsage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	t, err := connect(ctx, &o.backend, o.name, streams)
	if err != nil {
		return cmdutil.Fail(streams, fmt.Errorf("dlock inspect: %w", err), cmdutil.ExitUnavailable)
	}
	defer t.Close()
	r, err := t.Inspect(ctx, o.name)
	if err != nil {
		return cmdutil.Fail(streams, fmt.Errorf("dlock inspect: %w", backend.Denied(err)), cmdutil.ExitUnavailable)
	}
	out := report{Report: r}
	if ago, found, err := t.LastRun(ctx, o.name); err == nil && found {
		out.LastRunMs = ago.Milliseconds()
	}
	code := cmdutil.ExitOK
	if o.exitStatus && !r.Held {
		code = ExitFree
	}
	if o.output == "json" {
		cutValues(&out.Report)
		enc := json.NewEncoder(streams.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return cmdutil.Fail(streams, err, cmdutil.ExitError)
		}
		return code
	}
	writeTable(streams.Out, out)
	return code
}

// ExitFree is the exit code of "dlock inspect --exit-status" on a lock
// that no one holds.
const ExitFree = 3

// report is what dlock inspect shows: the backend's report, and when the
// last --once-per run of the name finished.
type report struct {
	backend.Report
	// LastRunMs is how long ago, in milliseconds, the last successful
	// --once-per run of the name finished; 0 if none is recorded.
	LastRunMs int64 `json:"last_run_ago_ms,omitempty"`
}

// MaxHolderRows is how many holders the table lists (-o json lists every
// one the backend returns).
const MaxHolderRows = 100

// writeTable writes r for people: every value that something else
// stored goes through cmdutil.Show.
func writeTable(out io.Writer, rep report) {
	r := rep.Report
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("lock", "%s", cmdutil.Show(r.Name))
	row("service", "%s", r.Where)
	if r.Path != "" {
		row("path", "%s", cmdutil.Show(r.Path))
	}
	row("kind", "%s", cmdutil.Show(r.Kind))
	if !r.Held {
		row("held", "no")
	}
	for i, h := range r.Holders {
		if i == MaxHolderRows {
			row("holder", "... %d more (-o json lists them)", len(r.Holders)-i)
			break
		}
		var extra []string
		if h.Mode != "" {
			extra = append(extra, h.Mode)
		}
		if h.Holds > 1 {
			extra = append(extra, fmt.Sprintf("holds %d", h.Holds))
		}
		if h.Fence != 0 {
			extra = append(extra, fmt.Sprintf("fence %d", h.Fence))
		}
		if h.Where != "" {
			extra = append(extra, cmdutil.Show(h.Where))
		}
		who := cmdutil.Show(h.Owner)
		if h.Label != "" {
			who = cmdutil.Show(h.Label)
			extra = append([]string{"token " + cmdutil.Show(strings.TrimSuffix(h.Owner, "~"+h.Label))}, extra...)
		}
		row("holder", "%s (%s)", who, strings.Join(extra, ", "))
	}
	if r.PermitLimit > 0 {
		row("permits", "%d of %d in use", len(r.Holders), r.PermitLimit)
	}
	if r.Fence != 0 {
		row("fence", "%d (%s)", r.Fence, r.FenceNote())
	}
	if r.TTLms > 0 {
		row("ttl", "%v left", cmdutil.Human(r.TTL()))
	}
	if w, ok := r.WaitersNote(); ok {
		row("waiters", "%s", w)
	}
	if r.Detail != "" {
		row("found", "%s", cmdutil.Show(r.Detail))
	}
	if r.Forced != "" {
		row("forced", "%s", cmdutil.Show(r.Forced))
	}
	if rep.LastRunMs > 0 {
		row("last run", "finished %s ago (--once-per)", cmdutil.Human(time.Duration(rep.LastRunMs)*time.Millisecond))
	}
	w.Flush()
	if len(r.Nodes) > 0 {
		fmt.Fprintln(out)
		w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "MASTER\tKIND\tHOLDER\tFENCE\tTTL")
		for _, n := range r.Nodes {
			if n.Error != "" {
				fmt.Fprintf(w, "%s\terror: %s\t\t\t\n", n.Addr, cmdutil.Show(n.Error))
				continue
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%v\n", n.Addr, cmdutil.Show(n.Kind), cmdutil.Show(dash(n.Holder)), n.Fence, time.Duration(n.TTLms)*time.Millisecond)
		}
		w.Flush()
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cutValues cuts every value in r that something else stored to
// cmdutil.MaxValue bytes (cmdutil.Cut), as the table shows them; the JSON
// encoder escapes what a terminal would act on.
func cutValues(r *backend.Report) {
	for i := range r.Holders {
		h := &r.Holders[i]
		h.Owner, h.Label, h.Where = cmdutil.Cut(h.Owner), cmdutil.Cut(h.Label), cmdutil.Cut(h.Where)
	}
	for i := range r.Nodes {
		n := &r.Nodes[i]
		n.Holder, n.Error = cmdutil.Cut(n.Holder), cmdutil.Cut(n.Error)
	}
	r.Detail, r.Forced = cmdutil.Cut(r.Detail), cmdutil.Cut(r.Forced)
}

// FlagSet returns the flags of dlock inspect, for the completion scripts.
func FlagSet() *flag.FlagSet { return flagSet(new(options)) }

// ReleaseFlagSet returns the flags of dlock release, for the completion
// scripts.
func ReleaseFlagSet() *flag.FlagSet { return releaseFlagSet(new(releaseOptions)) }
