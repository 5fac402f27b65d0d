package run

import (
	"bytes"
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

// descendants returns the pids of the living (not zombie) descendants of
// the process root, found by their parent pids in /proc. A descendant may
// fork meanwhile: a caller that must reach every one looks again.
func descendants(root int) []int {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := dir.Readdirnames(-1)
	dir.Close()
	children := make(map[int][]int)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		state, ppid, ok := parseStat(b)
		if !ok || state == 'Z' || state == 'X' {
			continue // a dead process has no children either
		}
		children[ppid] = append(children[ppid], pid)
	}
	found := slices.Clone(children[root])
	for i := 0; i < len(found); i++ {
		found = append(found, children[found[i]]...)
	}
	return found
}

// parseStat returns the state and the parent pid from the contents of
// /proc/PID/stat, "pid (comm) state ppid ...". The command name may hold
// spaces and parentheses, so the fields are counted from the last ')'.
func parseStat(b []byte) (state byte, ppid int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return f[0][0], ppid, err == nil
}

// signalProcesses sends sig to the process group pgid, if pgid > 0, and to
// every living descendant of the calling process, and returns how many
// descendants it found. Any signal but SIGKILL is followed by SIGCONT, so
// that a stopped process acts on it. Signalling the group first reaches,
// in one step, its members that fork while /proc is read.
func signalProcesses(pgid int, sig syscall.Signal) int {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
	pids := descendants(os.Getpid())
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
	if sig != syscall.SIGKILL && sig != syscall.SIGCONT {
		if pgid > 0 {
			_ = syscall.Kill(-pgid, syscall.SIGCONT)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	return len(pids)
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
