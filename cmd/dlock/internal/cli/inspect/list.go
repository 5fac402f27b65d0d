package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// ListUsage is the help text of "dlock list".
const ListUsage = `Usage: dlock list [flags] [PREFIX]

Lists the locks held whose names start with PREFIX (every held lock
without one): one row each, with its name, kind, first holder (its
label, or its token), number of holders, fence and TTL left. PREFIX is
matched as it is: * ? [ and % are not patterns. It only reads.

Where it looks: Redis, Redis Cluster, Sentinel and Redlock, dlock's keys
(SCAN dlock:{PREFIX*}, on every master); ZooKeeper, the tree under /dlock
(below the chroot), so names that are absolute paths are not listed;
etcd, the keys starting with PREFIX (keys only); PostgreSQL and MySQL, the
rows of --table that a holder marks. Each name found is then inspected as
"dlock inspect" does, and shown if it is held; at most 10000 names.

With no lock held, the table prints nothing and -o json prints [].

Exit codes: 0 listed (held locks or none); 64 bad usage; 69 lock service
unreachable or failed.

Flags:
`

type listOptions struct {
	backend backend.Flags
	output  string
	json    bool
	prefix  string
}

func listFlagSet(o *listOptions) *flag.FlagSet {
	fs := cmdutil.NewFlagSet("dlock list")
	o.backend.Register(fs)
	fs.StringVar(&o.output, "o", "table", "output format: table or json")
	fs.BoolVar(&o.json, "json", false, "the same as -o json")
	return fs
}

// ListMain runs "dlock list" with args and returns the exit code.
func ListMain(args []string, streams cmdutil.IO) int {
	var o listOptions
	fs := listFlagSet(&o)
	pos, err := cmdutil.Parse(fs, args)
	if errors.Is(err, cmdutil.ErrHelp) {
		var o listOptions
		cmdutil.PrintUsage(streams.Out, ListUsage, listFlagSet(&o))
		return cmdutil.ExitOK
	}
	if err == nil {
		switch {
		case o.output != "table" && o.output != "json":
			err = cmdutil.Usagef("dlock list: -o %q is not a format; use -o table or -o json", o.output)
		case len(pos) > 1:
			err = cmdutil.Usagef("dlock list: %d arguments, want at most one PREFIX (got %q)", len(pos), pos)
		case len(pos) == 1:
			o.prefix = pos[0]
		}
	}
	if o.json {
		o.output = "json"
	}
	if err != nil {
		return cmdutil.Fail(streams, err, cmdutil.ExitUsage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	// A prefix is checked as a name it starts ("jobs/" as "jobs/x").
	t, err := connect(ctx, &o.backend, o.prefix+"x", streams)
	if err != nil {
		return cmdutil.Fail(streams, fmt.Errorf("dlock list: %w", err), cmdutil.ExitUnavailable)
	}
	defer t.Close()
	rs, err := t.List(ctx, o.prefix)
	if backend.IsNoList(err) {
		return cmdutil.Fail(streams, cmdutil.Usagef("dlock list: %v", err), cmdutil.ExitUsage)
	}
	if err != nil {
		return cmdutil.Fail(streams, fmt.Errorf("dlock list: %w", backend.Denied(err)), cmdutil.ExitUnavailable)
	}
	if o.output == "json" {
		for i := range rs {
			cutValues(&rs[i])
		}
		enc := json.NewEncoder(streams.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rs); err != nil {
			return cmdutil.Fail(streams, err, cmdutil.ExitError)
		}
		return cmdutil.ExitOK
	}
	writeList(streams.Out, rs)
	return cmdutil.ExitOK
}

// writeList writes the held locks rs for people, one row each; nothing
// for none.
func writeList(out io.Writer, rs []backend.Report) {
	if len(rs) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tKIND\tHOLDER\tHOLDERS\tFENCE\tTTL LEFT")
	for _, r := range rs {
		holder := "-"
		if len(r.Holders) > 0 {
			h := r.Holders[0]
			holder = cmdutil.Show(h.Owner)
			if h.Label != "" {
				holder = cmdutil.Show(h.Label)
			}
		}
		fence, ttl := "-", "-"
		if r.Fence != 0 {
			fence = fmt.Sprint(r.Fence)
		}
		if r.TTLms > 0 {
			ttl = cmdutil.Human(r.TTL())
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", cmdutil.Show(r.Name), cmdutil.Show(r.Kind), holder, len(r.Holders), fence, ttl)
	}
	w.Flush()
}

// ListFlagSet returns the flags of dlock list, for the completion scripts.
func ListFlagSet() *flag.FlagSet { return listFlagSet(new(listOptions)) }
