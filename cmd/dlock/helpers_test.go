package main_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// result is how one dlock process ended.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// dlock runs the binary with args and extra environment variables, and
// waits at most a minute for it.
func dlock(t testing.TB, env []string, args ...string) result {
	t.Helper()
	p := startDlock(t, env, args...)
	return p.wait(t, time.Minute)
}

// proc is a dlock process running in the background.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	start          time.Time
	exited         chan struct{}
	err            error
}

func startDlock(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	return startDlockTo(t, nil, env, args...)
}

// startDlockTo is startDlock with dlock's stderr going to the file
// stderr, if not nil, rather than to the result.
func startDlockTo(t testing.TB, stderr *os.File, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary(t), args...), exited: make(chan struct{})}
	// A clean environment: no DLOCK_* from the machine running the tests.
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	p.cmd.Env = append(base, env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if stderr != nil {
		p.cmd.Stderr = stderr
	}
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting dlock %v: %v", args, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *proc) wait(t testing.TB, limit time.Duration) result {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(limit):
		p.cmd.Process.Signal(syscall.SIGQUIT)
		<-p.exited
		t.Fatalf("dlock %v still running after %v; stderr:\n%s", p.cmd.Args[1:], limit, p.stderr.String())
	}
	r := result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String(), took: time.Since(p.start)}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		t.Fatalf("dlock %v: %v", p.cmd.Args[1:], p.err)
	}
	return r
}

// kill kills the process, waits for it to exit, and returns its stderr:
// the buffers may be read only once it has exited.
func (p *proc) kill() string {
	p.cmd.Process.Kill()
	<-p.exited
	return p.stderr.String()
}

func (p *proc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// eventually polls cond every 20ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitFile waits until path exists and holds want.
func waitFile(t testing.TB, path, want string, d time.Duration) {
	t.Helper()
	if !eventually(d, func() bool { b, _ := os.ReadFile(path); return strings.Contains(string(b), want) }) {
		b, _ := os.ReadFile(path)
		t.Fatalf("%s does not contain %q after %v: %q", path, want, d, b)
	}
}

// processAlive reports whether the process with the decimal pid exists
// and is not a zombie.
func processAlive(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// runConcurrently runs f for every item as a subtest of t named by name,
// at most n at once, and returns when all have run. Unlike subtests that
// call t.Parallel, these do not queue for a slot of -test.parallel behind
// every test of the package that is waiting for one: t's own slot covers
// them, so that a long test starts its work with the package.
func runConcurrently[T any](t *testing.T, n int, items []T, name func(T) string, f func(*testing.T, T)) {
	t.Helper()
	slots := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, item := range items {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			t.Run(name(item), func(t *testing.T) { f(t, item) })
		})
	}
	wg.Wait()
}
