package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A postmaster forks a backend per connection, and each backend leads a
// process group of its own; so the signals here go to the postmaster and
// to each of its children by PID.

// Kill sends SIGKILL to the postmaster and every backend, like kill -9 of
// the whole server, and waits until they are gone. It does nothing if the
// server is not running.
func (p *Postgres) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killLocked()
}

func (p *Postgres) killLocked() error {
	if !p.proc.running() {
		return nil
	}
	pid := p.proc.cmd.Process.Pid
	family := withChildren(pid)
	for _, q := range family {
		syscall.Kill(q, syscall.SIGKILL)
	}
	select {
	case <-p.proc.done:
	case <-time.After(stopTimeout):
		return fmt.Errorf("testenv: postgres %s (pid %d) did not exit after SIGKILL", p.Addr(), pid)
	}
	return waitGone(family, stopTimeout)
}

// Stop shuts the server down fast (SIGINT: backends are told to exit and
// the cluster is shut down cleanly), waits up to five seconds and then
// kills it. It does nothing if the server is not running. A paused server
// is resumed so that it can shut down.
func (p *Postgres) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopLocked()
}

func (p *Postgres) stopLocked() error {
	if !p.proc.running() {
		return nil
	}
	pid := p.proc.cmd.Process.Pid
	family := withChildren(pid)
	p.proc.cmd.Process.Signal(syscall.SIGINT)
	for _, q := range family {
		syscall.Kill(q, syscall.SIGCONT)
	}
	select {
	case <-p.proc.done:
		return waitGone(family, stopTimeout)
	case <-time.After(stopTimeout):
	}
	return p.killLocked()
}

// withChildren returns pid and the PIDs of its children: a postmaster and
// its backends, each of which leads a process group of its own.
func withChildren(pid int) []int {
	family := []int{pid}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(child); len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			family = append(family, child)
		}
	}
	return family
}

// procStat returns the fields of /proc/pid/stat after "pid (comm)": state,
// ppid, pgrp, and so on; nil if there is no such process.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// waitGone waits until none of pids is a live process (a zombie does not
// count): a new postmaster refuses to start while a backend of the old one
// still holds its shared memory.
func waitGone(pids []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for {
			f := procStat(pid)
			if f == nil || f[0] == "Z" || f[0] == "X" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("testenv: postgres process %d still running %v after the postmaster exited", pid, timeout)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// Pause freezes the postmaster and every backend with SIGSTOP.
// Connections stay open, but nothing answers until Resume.
func (p *Postgres) Pause() error { return p.signalAll(syscall.SIGSTOP, true) }

// Resume continues a paused server with SIGCONT.
func (p *Postgres) Resume() error { return p.signalAll(syscall.SIGCONT, false) }

// signalAll sends sig to the postmaster and its backends and waits
// briefly until each one's state reflects it: stopped if wantStopped,
// otherwise not stopped.
func (p *Postgres) signalAll(sig syscall.Signal, wantStopped bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	what := "postgres " + p.Addr()
	if p.closed || !p.proc.running() {
		return fmt.Errorf("testenv: %s is not running", what)
	}
	family := withChildren(p.proc.cmd.Process.Pid) // the postmaster first: it forks no backend once stopped
	for _, pid := range family {
		if err := syscall.Kill(pid, sig); err != nil && pid == family[0] {
			return fmt.Errorf("testenv: signalling %s: %w", what, err)
		}
	}
	deadline := time.Now().Add(time.Second)
	for _, pid := range family {
		for time.Now().Before(deadline) {
			if state, ok := procState(pid); !ok || (state == 'T' || state == 't') == wantStopped {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}
