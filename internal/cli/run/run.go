package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/internal/cli/cmdutil"
)

// ConnectTimeout bounds connecting to the lock service, apart from --wait.
const ConnectTimeout = 15 * time.Second

// ReleaseTimeout bounds the release after COMMAND exits.
const ReleaseTimeout = 10 * time.Second

// Main runs "dlock run" with args (without "run") and returns the exit code.
func Main(args []string, io cmdutil.IO) int {
	o, err := Parse(args, io.Getenv)
	if errors.Is(err, cmdutil.ErrHelp) {
		cmdutil.PrintUsage(io.Out, Usage, FlagSet(new(Options)))
		return cmdutil.ExitOK
	}
	if err != nil {
		return cmdutil.Fail(io, err, cmdutil.ExitUsage)
	}
	spec, err := o.Backend.Resolve(io.Getenv)
	if err == nil {
		err = backend.CheckName(spec.Kind(), o.Name)
	}
	for _, w := range spec.Warnings {
		fmt.Fprintln(io.Err, "dlock:", w)
	}
	if err != nil {
		return cmdutil.Fail(io, fmt.Errorf("dlock run: %w", err), cmdutil.ExitUsage)
	}
	r := &runner{o: o, io: io, spec: spec}
	return r.run()
}

type runner struct {
	o    Options
	io   cmdutil.IO
	spec backend.Spec
}

// say writes one line to stderr, prefixed with "dlock: ".
func (r *runner) say(format string, args ...any) {
	fmt.Fprintf(r.io.Err, "dlock: "+format+"\n", args...)
}

type acquired struct {
	target *backend.Target
	lease  dlock.Lease
	waited time.Duration
	err    error
}

func (r *runner) run() int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	var observers []dlock.Observer
	if r.o.Verbose {
		observers = append(observers, dlock.LogObserver(slog.New(slog.NewTextHandler(r.io.Err, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	if r.o.MetricsAddr != "" {
		m, err := serveMetrics(r.o.MetricsAddr)
		if err != nil {
			r.say("cannot serve metrics on --metrics-addr %s: %v", r.o.MetricsAddr, err)
			return cmdutil.ExitOSErr
		}
		defer m.close()
		observers = append(observers, m.observer)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan acquired, 1)
	go func() { got <- r.acquire(ctx, dlock.Observers(observers...)) }()
	var a acquired
	select {
	case a = <-got:
	case sig := <-sigs:
		cancel()
		a = <-got
		if a.target != nil {
			defer a.target.Close()
		}
		if a.lease != nil {
			r.release(a.lease)
		}
		r.say("interrupted by %v while waiting for lock %q", sig, r.o.Name)
		return 128 + signum(sig)
	}
	if a.target != nil {
		defer a.target.Close()
	}
	if a.err != nil {
		if errors.Is(a.err, dlock.ErrNotObtained) {
			hint := ""
			if r.o.Wait == 0 && !r.o.WaitForever {
				hint = "; use --wait to wait for it"
			}
			why := "is held by another owner"
			if msg := a.err.Error(); msg != dlock.ErrNotObtained.Error() {
				why = "was not obtained: " + msg
			}
			r.say("lock %q %s (waited %v)%s", r.o.Name, why, a.waited.Round(time.Millisecond), hint)
			return r.o.ConflictExit
		}
		if cmdutil.IsUsage(a.err) {
			return cmdutil.Fail(r.io, fmt.Errorf("dlock run: %w", a.err), cmdutil.ExitUsage)
		}
		var u *unreachable
		if errors.As(a.err, &u) {
			r.say("cannot reach the lock service: %v", u.err)
		} else {
			r.say("lock %q: %v", r.o.Name, a.err)
		}
		return cmdutil.ExitUnavailable
	}
	if r.o.Verbose {
		r.say("holding lock %q (fence %d) on %s after %v", r.o.Name, a.lease.Fence(), a.target.Describe(), a.waited.Round(time.Millisecond))
	}
	return r.supervise(a.lease, sigs)
}

// acquire connects and takes the lock as the flags say.
func (r *runner) acquire(ctx context.Context, obs dlock.Observer) (a acquired) {
	cctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	t, err := backend.Connect(cctx, r.spec, obs)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			err = dlock.NotObtained(ctx.Err())
		}
		return acquired{err: &unreachable{err}}
	}
	a.target = t
	l, err := t.Locker(r.o.Name, backend.LockOptions{Kind: r.o.Kind, Permits: r.o.Permits, TTL: r.o.TTL})
	if err != nil {
		a.err = err
		return a
	}
	start := time.Now()
	switch {
	case r.o.WaitForever:
		a.lease, a.err = l.Lock(ctx)
	case r.o.Wait > 0:
		wctx, cancel := context.WithTimeout(ctx, r.o.Wait)
		a.lease, a.err = l.Lock(wctx)
		cancel()
	default:
		a.lease, a.err = l.TryLock(ctx)
	}
	a.waited = time.Since(start)
	return a
}

// unreachable is a failure to connect to the lock service.
type unreachable struct{ err error }

func (u *unreachable) Error() string { return u.err.Error() }
func (u *unreachable) Unwrap() error { return u.err }

// supervise runs COMMAND under lease, stopping it if the lease is lost,
// forwarding signals to it, and releasing the lease when it exits.
func (r *runner) supervise(lease dlock.Lease, sigs <-chan os.Signal) int {
	cmd := exec.Command(r.o.Command[0], r.o.Command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.io.In, r.io.Out, r.io.Err
	cmd.Env = append(os.Environ(),
		"DLOCK_NAME="+r.o.Name,
		"DLOCK_TOKEN="+lease.Token(),
		"DLOCK_FENCE="+strconv.FormatUint(lease.Fence(), 10))
	fg := foregroundTTY(r.io.In)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if fg != nil {
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, int(fg.Fd())
	}
	if err := cmd.Start(); err != nil {
		r.release(lease)
		code := cmdutil.ExitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = cmdutil.ExitNotFound
		}
		r.say("cannot run %q: %v", r.o.Command[0], err)
		return code
	}
	if fg != nil {
		defer takeForeground(fg)
	}
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		lost   error
		done   = lease.Done()
		killAt <-chan time.Time
		waitEr error
	)
loop:
	for {
		select {
		case waitEr = <-exited:
			break loop
		case sig := <-sigs:
			_ = syscall.Kill(-pgid, sig.(syscall.Signal))
		case <-done:
			done = nil
			lost = lease.Err()
			r.say("lost lock %q: %v; stopping %q (SIGTERM now, SIGKILL in %v)", r.o.Name, lost, r.o.Command[0], r.o.Grace)
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			killAt = time.After(r.o.Grace)
		case <-killAt:
			killAt = nil
			r.say("%q still running %v after SIGTERM; sending SIGKILL", r.o.Command[0], r.o.Grace)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	if lost != nil {
		return cmdutil.ExitLost
	}
	code := exitCode(cmd.ProcessState, waitEr)
	if err := r.release(lease); err != nil && errors.Is(err, dlock.ErrNotHeld) {
		r.say("lock %q was lost as %q exited (%v); its last moments may have overlapped another holder", r.o.Name, r.o.Command[0], err)
		return cmdutil.ExitLost
	}
	return code
}

// release releases lease, reporting a failure on stderr.
func (r *runner) release(lease dlock.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	defer cancel()
	err := lease.Release(ctx)
	if err != nil && !errors.Is(err, dlock.ErrNotHeld) {
		r.say("releasing lock %q: %v; it expires by itself within --ttl %v", r.o.Name, err, r.o.TTL)
	}
	return err
}

// exitCode is COMMAND's exit code, or 128+n if signal n killed it.
func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		return cmdutil.ExitError
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func signum(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 1
}
