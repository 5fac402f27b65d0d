package run

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"golang.org/x/sys/unix"
)

// WaitReportEvery is how often a wait off a terminal prints a line, after
// the one when it starts; DLOCK_WAIT_REPORT_EVERY, a duration, sets
// another. On a terminal the status line is redrawn every
// WaitRedrawEvery.
const (
	WaitReportEvery = 30 * time.Second
	WaitRedrawEvery = time.Second
)

// A waitStatus tells the user, while "dlock run --wait" waits, who holds
// the lock, for how much longer, how many wait, and how long dlock has
// waited: on a terminal a status line redrawn in place, otherwise a line
// when the wait starts and one every WaitReportEvery. It is a
// dlock.Observer, which learns from the lock's EventWaiting that the wait
// has begun.
type waitStatus struct {
	r       *runner
	tty     bool
	every   time.Duration
	waiting chan struct{} // closed at the first EventWaiting
	once    sync.Once
}

func newWaitStatus(r *runner) *waitStatus {
	w := &waitStatus{r: r, tty: isTerminal(r.io.Err), every: WaitReportEvery, waiting: make(chan struct{})}
	if d, err := time.ParseDuration(r.io.Getenv("DLOCK_WAIT_REPORT_EVERY")); err == nil && d > 0 {
		w.every = d
	}
	if w.tty {
		w.every = WaitRedrawEvery
	}
	return w
}

// Observe notes the start of the wait.
func (w *waitStatus) Observe(e dlock.Event) {
	if e.Kind == dlock.EventWaiting {
		w.once.Do(func() { close(w.waiting) })
	}
}

// run reports on the wait for the lock on t, which began at start, until
// ctx ends; on a terminal it then clears its line.
func (w *waitStatus) run(ctx context.Context, t *backend.Target, start time.Time) {
	select {
	case <-w.waiting:
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		line := w.line(ctx, t, start)
		if ctx.Err() != nil {
			break
		}
		if w.tty {
			fmt.Fprintf(w.r.io.Err, "\r\033[K%s", cmdutil.Shorten(line, w.r.o.Name))
		} else {
			w.r.say("%s", strings.TrimPrefix(line, "dlock: "))
		}
		select {
		case <-tick.C:
			continue
		case <-ctx.Done():
		}
		break
	}
	if w.tty {
		fmt.Fprint(w.r.io.Err, "\r\033[K")
	}
}

// line says who holds the lock and how long dlock has waited.
func (w *waitStatus) line(ctx context.Context, t *backend.Target, start time.Time) string {
	ictx, cancel := context.WithTimeout(ctx, HolderTimeout)
	defer cancel()
	parts := []string{}
	if rep, err := t.Inspect(ictx, w.r.o.Name); err == nil {
		switch {
		case len(rep.Holders) > 1:
			parts = append(parts, fmt.Sprintf("%d holders", len(rep.Holders)))
		case len(rep.Holders) == 1 && rep.Holders[0].Label != "":
			parts = append(parts, "holder "+cmdutil.Quote(rep.Holders[0].Label))
		case len(rep.Holders) == 1:
			parts = append(parts, "held by another owner")
		}
		if rep.TTLms > 0 {
			parts = append(parts, cmdutil.Human(rep.TTL())+" left")
		}
		if rep.Waiters != nil {
			parts = append(parts, fmt.Sprintf("%d waiting", *rep.Waiters))
		}
	}
	parts = append(parts, "waited "+cmdutil.Human(time.Since(start).Round(time.Second)))
	return fmt.Sprintf("dlock: waiting for lock %q: %s", w.r.o.Name, strings.Join(parts, ", "))
}

// isTerminal reports whether w writes to a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := cmdutil.Unwrap(w).(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
