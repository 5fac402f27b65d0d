package testenv

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// kill sends SIGKILL to p and waits for it to exit, like kill -9. It does
// nothing if p is not running. what names the server in errors.
func (p *process) kill(what string) error {
	if !p.running() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testenv: killing %s: %w", what, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("testenv: %s (pid %d) did not exit after SIGKILL", what, p.cmd.Process.Pid)
	}
}

// stop sends SIGTERM (and SIGCONT, so that a paused process can act on
// it), waits up to stopTimeout, then kills p.
func (p *process) stop(what string) error {
	if !p.running() {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
	}
	return p.kill(what)
}

// signal sends sig to a running p and waits briefly until the process
// state reflects it: stopped if wantStopped, otherwise not stopped.
func (p *process) signal(what string, sig syscall.Signal, wantStopped bool) error {
	if !p.running() {
		return fmt.Errorf("testenv: %s is not running", what)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("testenv: signalling %s: %w", what, err)
	}
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && p.running() {
		state, ok := procState(pid)
		if !ok || (state == 'T' || state == 't') == wantStopped {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
