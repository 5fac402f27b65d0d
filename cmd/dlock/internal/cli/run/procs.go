package run

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// setSubreaper makes the calling process a child subreaper: a process
// orphaned below it is re-parented to it rather than to init, so that it
// stays its descendant.
func setSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// A process is one found in /proc: its pid, and its start time (in clock
// ticks since boot), which tells it from a later process given the same
// pid.
type process struct {
	pid   int
	start uint64
}

// descendants returns the pids of the living (not zombie) descendants of
// the process root (see descendantProcs).
func descendants(root int) []int {
	procs := descendantProcs(root)
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.pid
	}
	return pids
}

// descendantProcs returns the living (not zombie) descendants of the
// process root, found by their parent pids in /proc. A descendant may
// fork meanwhile: a caller that must reach every one looks again.
func descendantProcs(root int) []process {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := dir.Readdirnames(-1)
	dir.Close()
	children := make(map[int][]process)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		state, ppid, start, ok := parseStat(b)
		if !ok || state == 'Z' || state == 'X' {
			continue // a dead process has no children either
		}
		children[ppid] = append(children[ppid], process{pid, start})
	}
	found := slices.Clone(children[root])
	for i := 0; i < len(found); i++ {
		found = append(found, children[found[i].pid]...)
	}
	return found
}

// parseStat returns the state, the parent pid and the start time from
// the contents of /proc/PID/stat, "pid (comm) state ppid ...", whose 22nd
// field is the start time. The command name may hold spaces and
// parentheses, so the fields are counted from the last ')'.
func parseStat(b []byte) (state byte, ppid int, start uint64, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, 0, 0, false
	}
	if len(f) > 19 { // the start time is field 22, the 20th after the name
		start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	}
	return f[0][0], ppid, start, true
}

// startTime returns the start time of the process that has pid now, or
// false if there is none.
func startTime(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	_, _, start, ok := parseStat(b)
	return start, ok
}

// How signalProcess reached a process, or why it did not.
type signalPath int

const (
	signalPidfd  signalPath = iota // through a pidfd of the process found
	signalKill                     // by pid, on a kernel without pidfds
	signalReused                   // not sent: the pid is another process's now
	signalGone                     // not sent: the process is gone
)

func (s signalPath) String() string {
	return [...]string{"pidfd", "kill", "reused", "gone"}[s]
}

// signalProcess sends sig to p, a process found in /proc, and to no other.
// Between the scan of /proc and the signal, p may have exited, been reaped
// by its parent and its pid given to a process that is none of COMMAND's:
// so it opens a pidfd of the pid, which pins whatever process has it, and
// signals through it only if that process started when p did. On a kernel
// without pidfds (Linux before 5.3, or one whose seccomp filter refuses
// pidfd_open) it checks the start time and signals by pid, which leaves
// the pid a few microseconds in which it could be reused.
func signalProcess(p process, sig syscall.Signal) signalPath {
	fd, err := unix.PidfdOpen(p.pid, 0)
	switch {
	case err == nil:
		defer unix.Close(fd)
		if start, ok := startTime(p.pid); !ok || start != p.start {
			return signalReused
		}
		if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
			return signalGone // exited since: the pidfd keeps its pid from being reused
		}
		return signalPidfd
	case errors.Is(err, unix.ESRCH):
		return signalGone
	}
	if start, ok := startTime(p.pid); !ok || start != p.start {
		return signalReused
	}
	if syscall.Kill(p.pid, sig) != nil {
		return signalGone
	}
	return signalKill
}

// signalProcesses sends sig to the process group pgid, if pgid > 0, and to
// every living descendant of the calling process (through signalProcess),
// and returns how many descendants it found. Any signal but SIGKILL is
// followed by SIGCONT, so that a stopped process acts on it. Signalling
// the group first reaches, in one step, its members that fork while /proc
// is read; the group's id cannot be reused while its leader, a child of
// the calling process, is not reaped.
func signalProcesses(pgid int, sig syscall.Signal) int {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
	procs := descendantProcs(os.Getpid())
	for _, p := range procs {
		signalProcess(p, sig)
	}
	if sig != syscall.SIGKILL && sig != syscall.SIGCONT {
		if pgid > 0 {
			_ = syscall.Kill(-pgid, syscall.SIGCONT)
		}
		for _, p := range procs {
			signalProcess(p, syscall.SIGCONT)
		}
	}
	return len(procs)
}

// killDescendants kills every descendant of the calling process, and the
// process group pgid if pgid > 0, and reaps them, until the calling
// process has no child left.
func killDescendants(pgid int) {
	for {
		signalProcesses(pgid, syscall.SIGKILL)
		pgid = 0 // once: the group may be empty, and its id reused, after this
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(-1, &ws, 0, nil); err != nil && err != syscall.EINTR {
			return // ECHILD: none left
		}
	}
}

// waitCode is the exit code a shell gives for ws: the exit status, or
// 128+n if signal n killed the process.
func waitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
