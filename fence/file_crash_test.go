package fence_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dlock-go/dlock/fence"
)

// crashEnv names the variable that makes the test binary a writer that
// kills itself, with SIGKILL, at one step of a WriteFile.
const crashEnv = "FENCE_TEST_FILE_CRASH"

// crashSpec is what a crashing writer writes, and where it dies.
type crashSpec struct {
	Name  string
	Fence uint64
	Data  string
	Step  string
}

// crashMain is the crashing writer: it runs WriteFile and kills itself
// when WriteFile reaches the step. It returns (exit 3) only if WriteFile
// never reached it.
func crashMain(spec string) int {
	var c crashSpec
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fence.SetFileStep(func(step string) {
		if step == c.Step {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	})
	err := fence.WriteFile(c.Name, c.Fence, []byte(c.Data), 0o644)
	fmt.Fprintf(os.Stderr, "WriteFile returned %v without reaching step %q\n", err, c.Step)
	return 3
}

// A writer of fence 200 is killed (SIGKILL) at each step of WriteFile in
// turn, after fence 100 has written: the file holds the data of 100 or of
// 200, whole; a stale write with fence 50 is refused, not written; and a
// retry with fence 200 writes.
func TestWriteFileCrash(t *testing.T) {
	for _, step := range fence.FileSteps {
		t.Run(strings.ReplaceAll(step, " ", "-"), func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, "report")
			if err := fence.WriteFile(name, 100, []byte("data-100"), 0o644); err != nil {
				t.Fatal(err)
			}
			spec, _ := json.Marshal(crashSpec{Name: name, Fence: 200, Data: "data-200", Step: step})
			w := exec.Command(os.Args[0], "-test.run=^$")
			w.Env = append(os.Environ(), crashEnv+"="+string(spec))
			w.Stderr = os.Stderr
			err := w.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the writer ended with %v; want it killed at step %q", err, step)
			}
			names := func() []string {
				entries, _ := os.ReadDir(dir)
				var s []string
				for _, e := range entries {
					s = append(s, e.Name())
				}
				return s
			}
			after := names()

			b, _ := os.ReadFile(name)
			if string(b) != "data-100" && string(b) != "data-200" {
				t.Fatalf("after the crash the file holds %q; want data-100 or data-200", b)
			}
			err = fence.WriteFile(name, 50, []byte("data-50"), 0o644)
			var stale *fence.StaleError
			if !errors.As(err, &stale) {
				t.Fatalf("after the crash (files %v), WriteFile with fence 50: %v; want a StaleError", after, err)
			}
			if stale.Newest != 100 && stale.Newest != 200 {
				t.Errorf("the StaleError's Newest is %d; want 100 or 200", stale.Newest)
			}
			if b2, _ := os.ReadFile(name); string(b2) != string(b) {
				t.Fatalf("the stale write changed the file from %q to %q", b, b2)
			}
			if err := fence.WriteFile(name, 200, []byte("data-200"), 0o644); err != nil {
				t.Fatalf("retry with fence 200: %v", err)
			}
			if b, _ := os.ReadFile(name); string(b) != "data-200" {
				t.Fatalf("after the retry the file holds %q; want data-200", b)
			}
			if err := fence.WriteFile(name, 150, []byte("data-150"), 0o644); !errors.Is(err, fence.ErrStale) {
				t.Fatalf("WriteFile with fence 150 after 200: %v; want ErrStale", err)
			}
			t.Logf("killed at %q: %q left, files %v", step, b, after)
		})
	}
}
