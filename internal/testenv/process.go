package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startProcess starts cmd from the spawner thread in a process group of
// its own, to be killed if this process dies, with its stdout and stderr
// appended to the file at logPath. A goroutine waits on it. what names the
// server in errors.
func startProcess(cmd *exec.Cmd, logPath, what string) (*process, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	cmd.Stdout = out
	cmd.Stderr = out
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true              // a signal to our process group does not reach it
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL // nor does it outlive us
	err = spawn(cmd)
	out.Close() // the child has its own copy
	if err != nil {
		return nil, fmt.Errorf("testenv: starting %s: %w", what, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	trackPID(cmd.Process.Pid)
	return p, nil
}

// exitError describes p, which exited before it was ready; what names the
// server and tail is the tail of its log. A port already in use makes it
// match errAddrInUse, so that the caller can try another.
func (p *process) exitError(what, tail string) error {
	err := fmt.Errorf("testenv: %s exited before it was ready (%v); log tail:\n%s", what, p.err, tail)
	if strings.Contains(tail, "Address already in use") {
		return fmt.Errorf("%w: %w", err, errAddrInUse)
	}
	return err
}

// A server is a Redis, ZooKeeper or Postgres, as closeForTest sees it.
type server interface {
	Addr() string
	LogTail(n int) string
	Close() error
}

// closeForTest closes srv, a server of the kind what, at the end of a
// test, logging its log tail first if the test failed.
func closeForTest(t testing.TB, what string, srv server) {
	if t.Failed() {
		t.Logf("%s %s log tail:\n%s", what, srv.Addr(), srv.LogTail(logTailLines))
	}
	if err := srv.Close(); err != nil {
		t.Errorf("closing %s %s: %v", what, srv.Addr(), err)
	}
}

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
