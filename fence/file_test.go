package fence_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
)

// WriteFile replaces the file with the newest fence and the same again,
// refuses a lower one leaving the file as it was, and leaves no temporary
// file behind: only the file, its fence file and the fence file's lock.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "report.csv")
	for _, step := range []struct {
		fence uint64
		data  string
		stale bool
	}{{7, "a", false}, {7, "b", false}, {9, "c", false}, {8, "d", true}, {1, "e", true}} {
		err := fence.WriteFile(name, step.fence, []byte(step.data), 0o640)
		if step.stale != errors.Is(err, fence.ErrStale) || !step.stale && err != nil {
			t.Fatalf("WriteFile with fence %d: %v; want stale: %v", step.fence, err, step.stale)
		}
	}
	if b, _ := os.ReadFile(name); string(b) != "c" {
		t.Fatalf("file holds %q; want c", b)
	}
	if fi, _ := os.Stat(name); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v; want 0640", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(name + fence.FileSuffix); string(b) != "9\n" {
		t.Errorf("fence file holds %q; want 9", b)
	}
	if err := fence.CheckFile(name, 8); !errors.Is(err, fence.ErrStale) {
		t.Errorf("CheckFile with fence 8 after 9: %v; want ErrStale", err)
	}
	if err := fence.CheckFile(name, 10); err != nil {
		t.Errorf("CheckFile with fence 10: %v", err)
	}
	if err := fence.WriteFile(name, 9, []byte("f"), 0o640); !errors.Is(err, fence.ErrStale) {
		t.Errorf("WriteFile with fence 9 after CheckFile with 10: %v; want ErrStale", err)
	}
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if fmt.Sprint(names) != "[report.csv report.csv.fence report.csv.fence.lock]" {
		t.Errorf("the directory holds %v; want the file, its fence and the fence's lock", names)
	}
}

// Writers race with fences 1 to n, each writing its fence: the file ends
// with n's data, and the data of every write that returned nil was
// there until a higher fence wrote.
func TestWriteFileConcurrent(t *testing.T) {
	name := filepath.Join(t.TempDir(), "out")
	const n = 50
	var wg sync.WaitGroup
	for f := range uint64(n) {
		wg.Go(func() {
			if err := fence.WriteFile(name, f+1, []byte(strconv.FormatUint(f+1, 10)), 0o644); err != nil && !errors.Is(err, fence.ErrStale) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if b, _ := os.ReadFile(name); string(b) != fmt.Sprint(n) {
		t.Fatalf("file holds %q; want %d", b, n)
	}
}

// A fence file that does not hold a fence (empty, as a writer killed
// mid-record by an older version left it, or garbled) refuses every
// write and check, with an error that names it and says how to recover,
// and the data stays as it was; bad input is refused.
func TestWriteFileInput(t *testing.T) {
	name := filepath.Join(t.TempDir(), "x")
	for _, rec := range []string{"", "\n", " ", "garbage", "-5", "12x", "99999999999999999999", "9223372036854775808"} {
		if err := os.WriteFile(name, []byte("kept"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name+fence.FileSuffix, []byte(rec), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, f := range []uint64{1, 5, 1 << 40} {
			err := fence.WriteFile(name, f, []byte("new"), 0o644)
			if err == nil || errors.Is(err, fence.ErrStale) || !strings.Contains(err.Error(), name+fence.FileSuffix) || !strings.Contains(err.Error(), "dlock inspect") {
				t.Fatalf("WriteFile with fence %d beside a fence file holding %q: %v; want an error naming it and the way out", f, rec, err)
			}
			if err := fence.CheckFile(name, f); err == nil || errors.Is(err, fence.ErrStale) {
				t.Fatalf("CheckFile with fence %d beside a fence file holding %q: %v; want an error", f, rec, err)
			}
		}
		if b, _ := os.ReadFile(name); string(b) != "kept" {
			t.Fatalf("a refused write beside a fence file holding %q left %q; want kept", rec, b)
		}
		if b, _ := os.ReadFile(name + fence.FileSuffix); string(b) != rec {
			t.Fatalf("a refused write changed the fence file from %q to %q", rec, b)
		}
	}
	if err := os.WriteFile(name+fence.FileSuffix, []byte("7\n"), 0o644); err != nil { // the operator's repair
		t.Fatal(err)
	}
	if err := fence.WriteFile(name, 6, nil, 0o644); !errors.Is(err, fence.ErrStale) {
		t.Errorf("WriteFile with fence 6 after the fence file was repaired to 7: %v; want ErrStale", err)
	}
	if err := fence.WriteFile(name, 7, []byte("new"), 0o644); err != nil {
		t.Errorf("WriteFile with fence 7 after the fence file was repaired to 7: %v", err)
	}
	if err := fence.WriteFile(name, 0, nil, 0o644); err == nil {
		t.Error("WriteFile with fence 0 succeeded")
	}
	if err := fence.WriteFile(filepath.Join(t.TempDir(), "no", "dir"), 5, nil, 0o644); err == nil {
		t.Error("WriteFile in a missing directory succeeded")
	}
}

// The fence file and the lock file of a file are not files that WriteFile
// or CheckFile guard: a write to x.fence would replace the fence of x
// (and let a stale writer of x through), and one to x.fence.lock would
// replace the file whose flock the writers of x take turns on.
func TestWriteFileGuardFiles(t *testing.T) {
	name := filepath.Join(t.TempDir(), "x")
	if err := fence.WriteFile(name, 100, []byte("data-100"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{name + fence.FileSuffix, name + fence.FileSuffix + ".lock", filepath.Dir(name) + "/./" + filepath.Base(name) + fence.FileSuffix} {
		if err := fence.WriteFile(other, 1, []byte("5\n"), 0o644); err == nil || !strings.Contains(err.Error(), fence.FileSuffix) {
			t.Errorf("WriteFile of %s: %v; want an error naming %s", other, err, fence.FileSuffix)
		}
		if err := fence.CheckFile(other, 1); err == nil || !strings.Contains(err.Error(), fence.FileSuffix) {
			t.Errorf("CheckFile of %s: %v; want an error naming %s", other, err, fence.FileSuffix)
		}
	}
	if err := fence.WriteFile(name, 50, []byte("data-50"), 0o644); !errors.Is(err, fence.ErrStale) {
		t.Errorf("WriteFile of x with fence 50 after 100: %v; want ErrStale", err)
	}
	if b, _ := os.ReadFile(name); string(b) != "data-100" {
		t.Errorf("x holds %q; want data-100", b)
	}
}

// A fence file that is not a regular file (a named pipe, a directory) is
// an error, not a wait: the pipe would block its reader, which holds
// the lock that every other writer of the file waits for, until some
// process writes into it.
func TestWriteFileRecordNotRegular(t *testing.T) {
	dir := t.TempDir()
	pipe, sub := filepath.Join(dir, "p"), filepath.Join(dir, "d")
	if err := syscall.Mkfifo(pipe+fence.FileSuffix, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub+fence.FileSuffix, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{pipe, sub} {
		done := make(chan error, 1)
		go func() { done <- fence.WriteFile(name, 5, []byte("x"), 0o644) }()
		select {
		case err := <-done:
			if err == nil || errors.Is(err, fence.ErrStale) || !strings.Contains(err.Error(), name+fence.FileSuffix) {
				t.Errorf("WriteFile beside a %s that is not a regular file: %v; want an error naming it", name+fence.FileSuffix, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("WriteFile beside a %s that is a named pipe still waits after 5 s", name+fence.FileSuffix)
			if f, err := os.OpenFile(pipe+fence.FileSuffix, os.O_WRONLY, 0); err == nil { // lets it go on
				f.Close()
			}
			<-done
		}
	}
}

// A file whose name is as long as its lock file's name allows (244 bytes,
// with ".fence.lock" making 255) can be written: the temporary files'
// names, which add more, are cut short to fit.
func TestWriteFileLongName(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{200, 236, 240, 244} {
		name := filepath.Join(dir, strings.Repeat("n", n-2)+"é") // é is 2 bytes
		if err := fence.WriteFile(name, 10, []byte("ten"), 0o644); err != nil {
			t.Errorf("WriteFile of a %d-byte name: %v", n, err)
			continue
		}
		if err := fence.WriteFile(name, 9, []byte("nine"), 0o644); !errors.Is(err, fence.ErrStale) {
			t.Errorf("WriteFile of a %d-byte name with fence 9 after 10: %v; want ErrStale", n, err)
		}
		if b, _ := os.ReadFile(name); string(b) != "ten" {
			t.Errorf("the %d-byte name holds %q; want ten", n, b)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
