package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// statusEvery is how often the status line on a terminal is redrawn.
const statusEvery = 100 * time.Millisecond

// progress reports on stderr how the run goes. On a terminal, a status line
// redrawn in place (with \r) while a scenario runs; otherwise, and on a
// terminal once the scenario ends, one line per finished scenario, so that
// a pipe never gets a control character.
type progress struct {
	w   io.Writer
	tty bool

	mu    sync.Mutex
	shown int // width of the status line on screen, 0 if none
}

// track shows label's progress on a terminal until stop is called; d is
// the scenario's planned length.
func (p *progress) track(label string, t *tally, d time.Duration) (stop func()) {
	if !p.tty {
		return func() {}
	}
	start := time.Now()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(statusEvery)
		defer tick.Stop()
		for {
			el := min(time.Since(start), d)
			p.status(fmt.Sprintf("dlock bench: %s %.1fs/%v %d ops %d errors", label, el.Seconds(), d, t.ops.Load(), t.errs.Load()))
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// status redraws the status line as s.
func (p *progress) status(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pad := max(p.shown-len(s), 0)
	fmt.Fprintf(p.w, "\r%s%s", s, strings.Repeat(" ", pad))
	p.shown = len(s)
}

// finished writes the line that ends a scenario, replacing the status line.
func (p *progress) finished(r *Result) {
	line := fmt.Sprintf("dlock bench: %s done: %d ops in %.2fs, %d errors", r.Label(), r.Ops, r.Elapsed.Seconds(), r.Errors)
	if r.Overlaps > 0 || r.Regressions > 0 {
		line += fmt.Sprintf(", %d overlaps, %d fence regressions", r.Overlaps, r.Regressions)
	}
	p.line(line)
}

// line writes one line, first clearing the status line if one is shown.
func (p *progress) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.shown > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.shown))
		p.shown = 0
	}
	fmt.Fprintln(p.w, s)
}
