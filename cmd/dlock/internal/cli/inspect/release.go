package inspect

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// ReleaseUsage is the help text of "dlock release".
const ReleaseUsage = `Usage: dlock release --force [--yes] [flags] NAME

An operator's override: removes every holder of the lock NAME and wakes its
waiters, and removes the record of its last "dlock run --once-per" run, so
that the next such run runs COMMAND. The holders are not asked: each learns at its next renewal that
its lease was taken over (a "dlock run" holder then stops its command and
exits 76), but until then it may still be working. Use it for a holder that
is gone or stuck, not to hurry a live one.

It shows the lock and asks for confirmation on a terminal; --yes skips the
question, and is required when standard input is not a terminal.
On PostgreSQL, a session-mode holder's session is ended
(pg_terminate_backend), so it learns at once; on MySQL, its connection
is killed (KILL CONNECTION), so it learns within its check interval.

Exit codes: 0 released (or nothing was held); 1 not confirmed; 64 bad
usage or a NAME the backend cannot take; 69 lock service unreachable
or failed.

Flags:
`

type releaseOptions struct {
	options
	force, yes bool
}

func releaseFlagSet(o *releaseOptions) *flag.FlagSet {
	fs := cmdutil.NewFlagSet("dlock release")
	o.backend.Register(fs)
	fs.BoolVar(&o.force, "force", false, "required: remove the holders, whoever they are")
	fs.BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	return fs
}

// ReleaseMain runs "dlock release" with args and returns the exit code.
func ReleaseMain(args []string, streams cmdutil.IO) int {
	var o releaseOptions
	fs := releaseFlagSet(&o)
	pos, err := cmdutil.Parse(fs, args)
	if errors.Is(err, cmdutil.ErrHelp) {
		var o releaseOptions
		cmdutil.PrintUsage(streams.Out, ReleaseUsage, releaseFlagSet(&o))
		return cmdutil.ExitOK
	}
	o.output = "table"
	if err == nil {
		err = finish(&o.options, pos, "dlock release")
	}
	if err == nil && !o.force {
		err = cmdutil.Usagef("dlock release: add --force: it removes every holder of %q, not one you hold; a holder releases its own lock by exiting", o.name)
	}
	interactive := cmdutil.IsTerminal(streams.In)
	if err == nil && !o.yes && !interactive {
		err = cmdutil.Usagef("dlock release: standard input is not a terminal, so there is no one to confirm; add --yes")
	}
	if err != nil {
		return cmdutil.Fail(streams, err, cmdutil.ExitUsage)
	}

	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	t, err := connect(ctx, &o.backend, o.name, streams)
	if err != nil {
		return cmdutil.Fail(streams, fmt.Errorf("dlock release: %w", err), cmdutil.ExitUnavailable)
	}
	defer t.Close()
	if !o.yes {
		r, err := t.Inspect(ctx, o.name)
		if err != nil {
			return cmdutil.Fail(streams, fmt.Errorf("dlock release: %w", err), cmdutil.ExitUnavailable)
		}
		out := report{Report: r}
		ago, recorded, err := t.LastRun(ctx, o.name)
		if err != nil {
			return cmdutil.Fail(streams, fmt.Errorf("dlock release: %w", backend.Denied(err)), cmdutil.ExitUnavailable)
		}
		if recorded {
			out.LastRunMs = max(ago.Milliseconds(), 1)
		}
		writeTable(streams.Out, out)
		if !r.Held && !recorded {
			fmt.Fprintf(streams.Out, "Lock %q is not held and has no --once-per record; nothing to release.\n", o.name)
			return cmdutil.ExitOK
		}
		question := fmt.Sprintf("Remove every holder of %q and wake its waiters", o.name)
		if recorded {
			question += ", and remove its --once-per record"
		}
		fmt.Fprintf(streams.Out, "%s? [y/N] ", question)
		cancel() // the question may take a while; the release gets its own deadline
		answer, _ := bufio.NewReader(streams.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			fmt.Fprintln(streams.Err, "dlock release: not confirmed; nothing changed")
			return cmdutil.ExitError
		}
		ctx, cancel = context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		// The operator confirmed what was shown: if the holders changed
		// while they read it, ask again rather than remove someone else.
		now, err := t.Inspect(ctx, o.name)
		if err != nil {
			return cmdutil.Fail(streams, fmt.Errorf("dlock release: %w", err), cmdutil.ExitUnavailable)
		}
		if !sameHolders(r, now) {
			fmt.Fprintf(streams.Err, "dlock release: the holders of %q changed while you answered; nothing released, run it again\n", o.name)
			return cmdutil.ExitError
		}
	}
	n, err := t.ForceRelease(ctx, o.name)
	if err != nil {
		return cmdutil.Fail(streams, fmt.Errorf("dlock release: %w", backend.Denied(err)), cmdutil.ExitUnavailable)
	}
	if n == 0 {
		fmt.Fprintf(streams.Out, "Lock %q was not held; nothing released.\n", o.name)
	} else {
		fmt.Fprintf(streams.Out, "Released lock %q on %s: %s.\n", o.name, t.Describe(), t.Removed(n))
	}
	cleared, err := t.ClearRun(ctx, o.name)
	if err != nil {
		return cmdutil.Fail(streams, fmt.Errorf("dlock release: removing the --once-per record of %q: %w", o.name, backend.Denied(err)), cmdutil.ExitUnavailable)
	}
	if cleared {
		fmt.Fprintf(streams.Out, "Cleared the --once-per record of %q: the next \"dlock run --once-per\" runs its COMMAND.\n", o.name)
	}
	return cmdutil.ExitOK
}

// sameHolders reports whether two reports of one lock show the same
// holders.
func sameHolders(a, b backend.Report) bool {
	if len(a.Holders) != len(b.Holders) {
		return false
	}
	seen := map[string]int{}
	for _, h := range a.Holders {
		seen[h.Owner]++
	}
	for _, h := range b.Holders {
		if seen[h.Owner]--; seen[h.Owner] < 0 {
			return false
		}
	}
	return true
}
