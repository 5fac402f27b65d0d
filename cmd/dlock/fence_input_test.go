package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// dlock fence write refuses empty input without --allow-empty, and a
// terminal on standard input, with exit 64, and leaves the file as it
// was: a producer that failed must not replace good data.
func TestFenceWriteInput(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "report")
	if code, _, stderr := fenceCmd(t, "good", nil, "write", "--file", file, "--fence", "5"); code != 0 {
		t.Fatalf("first write: exit %d, %q", code, stderr)
	}
	if code, _, stderr := fenceCmd(t, "", nil, "write", "--file", file, "--fence", "5"); code != 64 || !strings.Contains(stderr, "--allow-empty") {
		t.Errorf("empty input: exit %d, %q; want 64 naming --allow-empty", code, stderr)
	}
	if b, _ := os.ReadFile(file); string(b) != "good" {
		t.Errorf("after empty input the file holds %q; want good", b)
	}

	ptmx, tty := openTerminal(t)
	defer ptmx.Close()
	defer tty.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "fence", "write", "--file", file, "--fence", "5")
	cmd.Stdin = tty
	var errb strings.Builder
	cmd.Stderr = &errb
	cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 64 || !strings.Contains(errb.String(), "terminal") {
		t.Errorf("terminal input: exit %d, %q; want 64 naming the terminal", code, errb.String())
	}
	if b, _ := os.ReadFile(file); string(b) != "good" {
		t.Errorf("after terminal input the file holds %q; want good", b)
	}

	if code, _, stderr := fenceCmd(t, "", nil, "write", "--file", file, "--fence", "5", "--allow-empty"); code != 0 {
		t.Errorf("empty input with --allow-empty: exit %d, %q; want 0", code, stderr)
	}
	if b, err := os.ReadFile(file); err != nil || len(b) != 0 {
		t.Errorf("after --allow-empty the file holds %q (%v); want it empty", b, err)
	}
	if code, _, stderr := fenceCmd(t, "", nil, "check", "--file", file, "--fence", "5", "--allow-empty"); code != 64 {
		t.Errorf("check --allow-empty: exit %d, %q; want 64", code, stderr)
	}
}

// The README's script: a report that fails replaces nothing, and a stale
// fence stops the script with 77 before its next command.
func TestFenceReadmeScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "report.csv")
	script := `
  tmp=$(mktemp)
  trap "rm -f \"$tmp\"" EXIT
  ./make-report > "$tmp"                                  # a report that fails stops here
  dlock fence write --file ` + file + ` < "$tmp"          # replace it unless stale, or exit 77
  echo after > ` + filepath.Join(dir, "after") + `
`
	run := func(report string, fence string) int {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "make-report"), []byte("#!/bin/sh\n"+report+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, "after"))
		cmd := exec.Command("sh", "-ec", script)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + filepath.Dir(binary(t)) + ":" + os.Getenv("PATH"), "DLOCK_FENCE=" + fence}
		out, _ := cmd.CombinedOutput()
		t.Logf("script with fence %s: %s", fence, out)
		return cmd.ProcessState.ExitCode()
	}
	if code := run("echo good", "5"); code != 0 {
		t.Fatalf("a good report: exit %d", code)
	}
	if code := run("echo partial; exit 3", "6"); code != 3 {
		t.Errorf("a failed report: exit %d; want its 3", code)
	}
	if b, _ := os.ReadFile(file); string(b) != "good\n" {
		t.Errorf("after a failed report the file holds %q; want the good one", b)
	}
	if code := run("echo late", "4"); code != 77 {
		t.Errorf("a stale fence: exit %d; want 77", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "after")); err == nil {
		t.Errorf("the script went on after a stale fence")
	}
}

// openTerminal opens a pseudo-terminal and returns its two ends.
func openTerminal(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("naming the pseudo-terminal: %v", err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the terminal end: %v", err)
	}
	return ptmx, tty
}

// dlock fence write --file refuses a symbolic link (exit 64) rather than
// replace it with a regular file.
func TestFenceWriteSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target"), filepath.Join(dir, "link")
	if err := os.WriteFile(target, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := fenceCmd(t, "new", nil, "write", "--file", link, "--fence", "5")
	if code != 64 || !strings.Contains(stderr, "symbolic link") {
		t.Errorf("write to a symlink: exit %d, %q; want 64 naming the link", code, stderr)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced (%v)", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "kept" {
		t.Errorf("the target holds %q; want kept", b)
	}
}
