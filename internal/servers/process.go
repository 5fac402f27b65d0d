package servers

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one run of a server. A single goroutine waits on cmd and
// closes done when it exits.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // result of cmd.Wait; valid once done is closed
}

func (p *process) running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// startProcess starts cmd from the spawner thread in a process group of
// its own, to be killed if this process dies, with its stdout and stderr
// appended to the file at logPath. A goroutine waits on it. what names the
// server in errors.
func startProcess(cmd *exec.Cmd, logPath, what string) (*process, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("servers: %w", err)
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
		return nil, fmt.Errorf("servers: starting %s: %w", what, err)
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
// server and logTail returns the last n lines of its log, of which the
// error shows logTailLines. A port already in use makes it match
// errAddrInUse, so that the caller can try another. That is looked for in
// all the log logTail holds, not in the lines shown: a JVM's
// BindException comes above a stack trace longer than those.
func (p *process) exitError(what string, logTail func(n int) string) error {
	err := fmt.Errorf("servers: %s exited before it was ready (%v); log tail:\n%s", what, p.err, logTail(logTailLines))
	if strings.Contains(strings.ToLower(logTail(math.MaxInt)), "address already in use") {
		return fmt.Errorf("%w: %w", err, errAddrInUse)
	}
	return err
}

// procState returns the state letter of pid from /proc.
func procState(pid int) (byte, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, false
	}
	return b[i+2], true
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

// withChildren returns pid and the PIDs of its children, such as a
// postmaster and its backends, each of which leads a process group of its
// own.
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
				return fmt.Errorf("servers: process %d still running %v after its parent exited", pid, timeout)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// tailLines returns up to the last n lines of the file at path.
func tailLines(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const window = 64 << 10
	skipFirst := false
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(fi.Size()-window, io.SeekStart); err == nil {
			skipFirst = true
		}
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), window)
	for sc.Scan() {
		if skipFirst {
			skipFirst = false
			continue
		}
		if line := sc.Text(); line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
