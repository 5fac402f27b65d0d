package run

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// supervise runs COMMAND under lease through a supervisor process (see
// the package documentation), stopping all of it if the lease is lost or
// about to end, forwarding signals to it, and releasing the lease when
// nothing of it is left.
func (r *runner) supervise(lease dlock.Lease, sigs <-chan os.Signal) int {
	fg := foregroundTTY(r.io.In)
	// Should the supervisor die, its orphans come to dlock, which kills
	// them. Without it they would go to init: the supervisor is the
	// guarantee, this is the spare.
	_ = setSubreaper()
	sup, err := r.startSupervisor(lease, fg != nil)
	if err != nil {
		r.release(lease)
		r.say("cannot supervise %q: %v", r.o.Command[0], err)
		return cmdutil.ExitOSErr
	}
	defer sup.control.Close()

	var (
		lost     error // the lease was lost
		stopping bool  // COMMAND was told to stop: lost, or about to be
		capped   bool  // ... because the lease reached --max-hold
		done     = lease.Done()
		renewBy  = time.NewTimer(time.Until(r.stopAt(lease)))
		killAt   <-chan time.Time
		status   = sup.status
		code     int
		finished bool // the supervisor said "done"
		pgid     int
	)
	defer renewBy.Stop()
	stop := func(why string, grace time.Duration) {
		stopping = true
		r.say("%s; stopping %q (SIGTERM now, SIGKILL in %s)", why, r.o.Command[0], cmdutil.Human(grace))
		sup.send(syscall.SIGTERM)
		killAt = time.After(grace)
	}
	for status != nil {
		select {
		case line, ok := <-status:
			if !ok {
				status = nil
				break
			}
			switch f := strings.Fields(line); {
			case len(f) == 2 && f[0] == "started":
				pgid, _ = strconv.Atoi(f[1])
			case len(f) == 3 && f[0] == "exited" && f[2] != "0" && r.o.Verbose:
				if r.o.LeaveChildren {
					r.say("%q exited with %s, leaving processes it started running (%s, --leave-children)", r.o.Command[0], f[1], f[2])
				} else {
					r.say("%q exited with %s; holding lock %q until the processes it started (%s) have exited", r.o.Command[0], f[1], r.o.Name, f[2])
				}
			case len(f) == 2 && f[0] == "done":
				code, _ = strconv.Atoi(f[1])
				finished = true
			}
		case sig := <-sigs:
			sup.send(sig.(syscall.Signal))
		case <-done:
			done = nil
			lost = lease.Err()
			if errors.Is(lost, dlock.ErrMaxHold) && !stopping {
				capped = true
				stop(fmt.Sprintf("lock %q reached --max-hold %v", r.o.Name, r.o.MaxHold), r.grace)
			} else if !stopping {
				stop(fmt.Sprintf("lost lock %q: %s", r.o.Name, cmdutil.Reason(lost)), r.grace)
			}
		case <-renewBy.C:
			if stopping || lease.Err() != nil {
				break // Done has closed, or is about to
			}
			if wait := time.Until(r.stopAt(lease)); wait > 0 {
				renewBy.Reset(wait) // renewed meanwhile
				break
			}
			left := time.Until(lease.Until())
			why := fmt.Sprintf("lock %q was not renewed and ends in %s", r.o.Name, cmdutil.Human(left))
			if r.atCap(lease) {
				capped = true
				why = fmt.Sprintf("lock %q reaches --max-hold %v in %s", r.o.Name, r.o.MaxHold, cmdutil.Human(left))
			}
			stop(why, max(0, left-KillLead(r.leaseTime)))
		case <-killAt:
			killAt = nil
			r.say("processes of %q still running after SIGTERM; sending SIGKILL", r.o.Command[0])
			sup.send(syscall.SIGKILL)
		}
	}
	waitErr := sup.cmd.Wait()
	if !finished {
		why := waitErr
		if why == nil {
			why = errors.New("exit status 0")
		}
		r.say("the supervisor of %q died (%v); killing what is left of %q", r.o.Command[0], why, r.o.Command[0])
		killDescendants(pgid)
		if fg != nil {
			takeForeground(fg)
		}
		code = cmdutil.ExitError
		if ws, ok := sup.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = waitCode(ws)
		}
	}
	if lost != nil || stopping {
		r.stopped = true
		if lease.Err() == nil {
			// Stopped early: the lease is still ours, but its renewals
			// failed, and so will a release, most likely. Try quietly.
			r.releaseQuietly(lease)
		}
		if capped {
			return cmdutil.ExitMaxHold
		}
		return cmdutil.ExitLost
	}
	if code == 0 && r.o.OncePer > 0 && lease.Err() == nil {
		r.recordRun(lease)
	}
	if err := r.release(lease); err != nil && errors.Is(err, dlock.ErrNotHeld) {
		r.say("lock %q was lost as %q exited (%s); its last moments may have overlapped another holder", r.o.Name, r.o.Command[0], cmdutil.Reason(err))
		return cmdutil.ExitLost
	}
	return code
}

// stopAt is when COMMAND must be told to stop if lease is not renewed by
// then: the grace, then KillLead, before its Until.
func (r *runner) stopAt(lease dlock.Lease) time.Time {
	return lease.Until().Add(-r.grace - KillLead(r.leaseTime))
}

// atCap reports whether lease was not renewed because of --max-hold: its
// Until is so close to the cap that the next renewal, due every third of
// the lease time, would have passed it.
func (r *runner) atCap(lease dlock.Lease) bool {
	return !r.capAt.IsZero() && r.capAt.Sub(lease.Until()) < r.leaseTime/3
}

// A supervisorProcess is dlock's side of a running supervisor.
type supervisorProcess struct {
	cmd     *exec.Cmd
	control *os.File      // write end of the control pipe
	status  <-chan string // the status lines; closed when the supervisor exits
}

// send asks the supervisor to send sig to every process of COMMAND's.
func (s *supervisorProcess) send(sig syscall.Signal) {
	_, _ = s.control.Write([]byte{byte(sig)}) // fails only when the supervisor is gone
}

// startSupervisor starts a copy of the running dlock as COMMAND's
// supervisor, with COMMAND's environment.
func (r *runner) startSupervisor(lease dlock.Lease, foreground bool) (*supervisorProcess, error) {
	controlR, controlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		controlR.Close()
		controlW.Close()
		return nil, err
	}
	var opts []string
	if foreground {
		opts = append(opts, optForeground)
	}
	if r.o.LeaveChildren {
		opts = append(opts, optLeaveChildren)
	}
	// /proc/self/exe is this very binary, even if the file was replaced
	// or removed since dlock started.
	cmd := exec.Command("/proc/self/exe", r.o.Command...)
	cmd.Args[0] = "dlock-run-supervisor"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.io.In, cmdutil.Unwrap(r.io.Out), cmdutil.Unwrap(r.io.Err) // COMMAND's own streams
	// COMMAND gets dlock's environment without the lock service's
	// connection settings and credentials.
	cmd.Env = append(slices.DeleteFunc(os.Environ(), backend.IsConnectionEnv),
		"DLOCK_NAME="+r.o.Name,
		"DLOCK_TOKEN="+lease.Token(),
		"DLOCK_FENCE="+strconv.FormatUint(lease.Fence(), 10),
		supervisorEnv+"="+strings.Join(opts, ","))
	cmd.ExtraFiles = []*os.File{controlR, statusW} // controlFD, statusFD
	// Streams that are not files are copied by goroutines, which a process
	// left running with --leave-children would keep busy.
	cmd.WaitDelay = time.Second
	err = cmd.Start()
	controlR.Close()
	statusW.Close()
	if err != nil {
		controlW.Close()
		statusR.Close()
		return nil, err
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		defer statusR.Close()
		for sc := bufio.NewScanner(statusR); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	return &supervisorProcess{cmd: cmd, control: controlW, status: lines}, nil
}
