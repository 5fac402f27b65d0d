package redlock

import "time"

// workers run the calls of fan-outs on goroutines that outlive one call.
// A Redis client's call grows a goroutine's stack well past its first
// size; a goroutine started for every call grew it again each time, a
// tenth of a Client's CPU in an uncontended lock-and-release cycle. A
// worker that has been idle for workerIdle ends, so a Client that is no
// longer used keeps no goroutine, closed or not.
type workers struct {
	jobs chan func() // unbuffered: a send succeeds only to an idle worker
}

const workerIdle = time.Second

// run runs f on an idle worker, or on a new one if none is idle.
func (w *workers) run(f func()) {
	select {
	case w.jobs <- f:
	default:
		go w.work(f)
	}
}

func (w *workers) work(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.jobs:
		case <-idle.C:
			return
		}
	}
}
