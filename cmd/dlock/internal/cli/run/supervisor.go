package run

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// supervisorEnv marks a copy of dlock that "dlock run" started to
// supervise COMMAND. Its value lists the supervisor's options, separated
// by commas; its arguments are COMMAND.
const supervisorEnv = "DLOCK_RUN_SUPERVISOR"

// The supervisor's options.
const (
	optForeground    = "foreground"     // make COMMAND the terminal's foreground group
	optLeaveChildren = "leave-children" // see Options.LeaveChildren
)

// The supervisor's pipes to dlock, as its file descriptors.
const (
	// controlFD carries signals from dlock, one byte each, to be sent to
	// every process of COMMAND's. End of file: dlock is gone.
	controlFD = 3
	// statusFD carries the supervisor's status lines to dlock:
	//	started PID       COMMAND runs as PID, the leader of its own group
	//	exited CODE N     COMMAND's own process exited with CODE; N of the
	//	                  processes it started are still running
	//	done CODE         nothing of COMMAND's is left (with leave-children:
	//	                  COMMAND's own process exited); the supervisor
	//	                  exits with CODE
	// A supervisor that exits without "done" died.
	statusFD = 4
)

// killEvery is how often the supervisor kills again, once it kills, what
// is left: a process may fork while /proc is read.
const killEvery = 25 * time.Millisecond

// SuperviseIfChild runs the supervisor of "dlock run" and exits, if this
// process was started as one; otherwise it returns at once. A program that
// runs "dlock run" must call it first thing in main: the supervisor is a
// copy of it.
func SuperviseIfChild() {
	opts, ok := os.LookupEnv(supervisorEnv)
	if !ok {
		return
	}
	os.Exit(supervise(strings.Split(opts, ","), os.Args[1:]))
}

// A supervisor runs COMMAND and every process it starts for dlock.
type supervisor struct {
	status *os.File
	pgid   int  // COMMAND's process group, while its leader is not reaped
	killed bool // SIGKILL was sent: keep killing until nothing is left
}

func (s *supervisor) report(format string, args ...any) {
	fmt.Fprintf(s.status, format+"\n", args...) // fails only when dlock is gone
}

// done reports that the supervisor exits with code, and returns it.
func (s *supervisor) done(code int) int {
	s.report("done %d", code)
	return code
}

// signal sends sig to every process of COMMAND's, and returns how many
// it found.
func (s *supervisor) signal(sig syscall.Signal) int {
	if sig == syscall.SIGKILL {
		s.killed = true
	}
	return signalProcesses(s.pgid, sig)
}

type reaped struct {
	pid    int
	status syscall.WaitStatus
}

func supervise(opts, command []string) int {
	// COMMAND's parent-death signal fires when the thread that started it
	// exits. Locked, this goroutine's thread lives as long as the process.
	runtime.LockOSThread()
	_ = os.WriteFile("/proc/self/comm", []byte("dlock"), 0) // "ps" would say "exe"
	syscall.CloseOnExec(controlFD)
	syscall.CloseOnExec(statusFD)
	s := &supervisor{status: os.NewFile(statusFD, "dlock-status")}
	control := os.NewFile(controlFD, "dlock-control")
	// Signals sent to the supervisor itself, by the terminal to dlock's
	// process group or to every "dlock", are dlock's to pass on through
	// the control pipe. Caught rather than ignored, they stay at their
	// default in COMMAND.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	foreground := slices.Contains(opts, optForeground)
	leaveChildren := slices.Contains(opts, optLeaveChildren)
	if len(command) == 0 {
		fmt.Fprintln(os.Stderr, "dlock: supervisor started without COMMAND")
		return s.done(cmdutil.ExitError)
	}
	if err := setSubreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "dlock: cannot supervise %q: PR_SET_CHILD_SUBREAPER: %v\n", command[0], err)
		return s.done(cmdutil.ExitOSErr)
	}

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, supervisorEnv+"=") })
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if foreground {
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, int(os.Stdin.Fd())
	}
	if err := cmd.Start(); err != nil {
		if foreground {
			takeForeground(os.Stdin)
		}
		code := cmdutil.ExitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = cmdutil.ExitNotFound
		}
		fmt.Fprintf(os.Stderr, "dlock: cannot run %q: %v\n", command[0], err)
		return s.done(code)
	}
	leader := cmd.Process.Pid
	s.pgid = leader
	s.report("started %d", leader)

	// Every process of COMMAND's is a descendant: the supervisor has no
	// child left exactly when none of them is left. COMMAND is reaped
	// here too, never by cmd.Wait.
	reapedc := make(chan reaped)
	go func() {
		defer close(reapedc)
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			switch {
			case err == syscall.EINTR:
			case err != nil:
				return // ECHILD
			default:
				reapedc <- reaped{pid, ws}
			}
		}
	}()
	controlc := make(chan syscall.Signal)
	go func() {
		defer close(controlc)
		b := make([]byte, 1)
		for {
			n, err := control.Read(b)
			if n == 1 {
				controlc <- syscall.Signal(b[0])
			}
			if err != nil {
				return
			}
		}
	}()

	var (
		code     int
		killTick <-chan time.Time
		killedAt time.Time
		warned   bool
	)
	for {
		select {
		case sig, ok := <-controlc:
			if !ok { // dlock is gone, and so must COMMAND be
				controlc, sig = nil, syscall.SIGKILL
			}
			s.signal(sig)
			if s.killed && killTick == nil {
				killTick, killedAt = time.Tick(killEvery), time.Now()
			}
		case <-killTick:
			if n := s.signal(syscall.SIGKILL); n > 0 && !warned && time.Since(killedAt) > 5*time.Second {
				warned = true
				fmt.Fprintf(os.Stderr, "dlock: %d processes of %q still running 5s after SIGKILL; waiting for them\n", n, command[0])
			}
		case r, ok := <-reapedc:
			if !ok {
				return s.done(code)
			}
			if r.pid != leader {
				continue
			}
			code = waitCode(r.status)
			// The group may outlive its leader, but its id may be reused
			// once it is empty: from now on descendants are enough.
			s.pgid = 0
			if foreground {
				takeForeground(os.Stdin)
			}
			s.report("exited %d %d", code, len(descendants(os.Getpid())))
			if leaveChildren {
				return s.done(code)
			}
		}
	}
}
