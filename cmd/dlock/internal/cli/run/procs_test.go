package run

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	cases := []struct {
		stat  string
		state byte
		ppid  int
		ok    bool
	}{
		{"42 (sh) S 7 42 42 0 -1", 'S', 7, true},
		{"42 (a b) c) Z 1 42 42", 'Z', 1, true}, // a name with spaces and a parenthesis
		{"42 ((sd-pam)) R 300 1", 'R', 300, true},
		{"42 (sh)", 0, 0, false},
		{"42 sh S 7", 0, 0, false},
		{"42 (sh) S x", 0, 0, false},
	}
	for _, c := range cases {
		state, ppid, _, ok := parseStat([]byte(c.stat))
		if ok != c.ok || ok && (state != c.state || ppid != c.ppid) {
			t.Errorf("parseStat(%q) = %q, %d, %v; want %q, %d, %v", c.stat, state, ppid, ok, c.state, c.ppid, c.ok)
		}
	}
}

// descendants finds a grandchild in a process group of its own, and
// signalProcesses reaches it without the group.
func TestDescendants(t *testing.T) {
	pidFile := t.TempDir() + "/pid"
	cmd := exec.Command("sh", "-c", `setsid sleep 30 & echo $! > "$1"; wait`, "sh", pidFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var grandchild int
	for deadline := time.Now().Add(10 * time.Second); grandchild == 0; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			t.Fatal("the grandchild did not start")
		}
	}
	t.Cleanup(func() { syscall.Kill(grandchild, syscall.SIGKILL) })
	found := descendants(os.Getpid())
	if !slices.Contains(found, cmd.Process.Pid) || !slices.Contains(found, grandchild) {
		t.Fatalf("descendants = %v, want the child %d and the grandchild %d", found, cmd.Process.Pid, grandchild)
	}
	if n := signalProcesses(0, syscall.SIGKILL); n < 2 {
		t.Errorf("signalProcesses found %d descendants, want at least 2", n)
	}
	if err := cmd.Wait(); err == nil {
		t.Errorf("the child exited cleanly after SIGKILL")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(grandchild) + "/stat")
		if state, _, _, ok := parseStat(b); err != nil || ok && state == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the grandchild survived SIGKILL: %s", b)
		}
	}
}

// The supervisor signals a process it found in /proc through a pidfd,
// opened and then checked to be the process found: a pid that was reaped
// and reused between the scan and the signal (issue 33) names another
// process, whose start time differs, and is left alone. The reuse is
// played by a scanned entry whose pid is now a process started later.
func TestSignalOnlyTheProcessFound(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := descendantProcs(os.Getpid())
	i := slices.IndexFunc(found, func(p process) bool { return p.pid == cmd.Process.Pid })
	if i < 0 {
		t.Fatalf("descendantProcs = %v, without the child %d", found, cmd.Process.Pid)
	}
	now := found[i]
	earlier := process{pid: now.pid, start: now.start - 1} // the pid's earlier owner, as scanned
	if how := signalProcess(earlier, syscall.SIGKILL); how != signalReused {
		t.Errorf("signalling a pid that another process now has: %v; want %v", how, signalReused)
	}
	time.Sleep(100 * time.Millisecond)
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(now.pid) + "/stat"); err != nil {
		t.Fatalf("the process now at the pid was killed: %v", err)
	} else if state, _, _, _ := parseStat(b); state == 'Z' {
		t.Fatalf("the process now at the pid was killed: %s", b)
	}
	if how := signalProcess(now, syscall.SIGKILL); how != signalPidfd {
		t.Errorf("signalling the process found: %v; want %v", how, signalPidfd)
	}
	if err := cmd.Wait(); err == nil {
		t.Errorf("the process found exited cleanly after SIGKILL")
	}
	if how := signalProcess(now, syscall.SIGKILL); how != signalGone {
		t.Errorf("signalling a process reaped since: %v; want %v", how, signalGone)
	}
}
