package fence_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dlock-go/dlock/fence"
)

// A symbolic link where WriteFile or CheckFile would read or create the
// fence file, its lock or the file itself is refused with an error naming
// it, and nothing is written where it points: the link may lead out of
// the directory, to a file of another's that the writer may write.
func TestWriteFileSymlinks(t *testing.T) {
	for _, link := range []string{"x" + fence.FileSuffix, "x" + fence.FileSuffix + ".lock", "x"} {
		t.Run(link, func(t *testing.T) {
			dir, elsewhere := t.TempDir(), t.TempDir()
			name := filepath.Join(dir, "x")
			held := filepath.Join(elsewhere, "held") // an existing file
			if err := os.WriteFile(held, []byte("1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			absent := filepath.Join(elsewhere, "absent")
			for _, target := range []string{held, absent} {
				if err := os.Remove(filepath.Join(dir, link)); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
				if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
					t.Fatal(err)
				}
				for call, err := range map[string]error{
					"WriteFile": fence.WriteFile(name, 5, []byte("data"), 0o644),
					"CheckFile": fence.CheckFile(name, 5),
				} {
					if link == "x" && call == "CheckFile" {
						continue // CheckFile writes no data: the file may be anything
					}
					if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, link)) || !strings.Contains(err.Error(), "symbolic link") {
						t.Errorf("%s with %s a symbolic link to %s: %v; want an error naming the link", call, link, target, err)
					}
				}
				if b, err := os.ReadFile(held); err != nil || string(b) != "1\n" {
					t.Errorf("the link's target %s holds %q, %v; want it unchanged", held, b, err)
				}
				if _, err := os.Lstat(absent); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a write beside %s, a link to %s, created it: %v", link, absent, err)
				}
				if fi, err := os.Lstat(filepath.Join(dir, link)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("%s is no longer the symbolic link: %v, %v", link, fi.Mode(), err)
				}
			}
		})
	}
}

// The lock file beside a fence file must be a regular file: a named pipe
// or a directory there is refused, with an error naming it.
func TestWriteFileLockNotRegular(t *testing.T) {
	dir := t.TempDir()
	pipe, sub := filepath.Join(dir, "p"), filepath.Join(dir, "d")
	if err := syscall.Mkfifo(pipe+fence.FileSuffix+".lock", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub+fence.FileSuffix+".lock", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{pipe, sub} {
		if err := fence.WriteFile(name, 5, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), name+fence.FileSuffix+".lock") {
			t.Errorf("WriteFile beside a lock file that is not a regular file: %v; want an error naming it", err)
		}
	}
}

// WriteFile creates its files as open(2) does, with the process's umask
// taken from perm, and never gives a file more permissions than that: with
// umask 077 every file it writes is the owner's alone, and perm 0666 with
// umask 022 is not world-writable.
func TestWriteFileUmask(t *testing.T) {
	for _, c := range []struct {
		umask      int
		perm, want os.FileMode
	}{{0o077, 0o644, 0o600}, {0o022, 0o666, 0o644}, {0o027, 0o660, 0o640}} {
		old := syscall.Umask(c.umask)
		dir := t.TempDir()
		name := filepath.Join(dir, "x")
		err := fence.WriteFile(name, 5, []byte("five"), c.perm)
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		for file, want := range map[string]os.FileMode{name: c.want, name + fence.FileSuffix: 0o644 &^ os.FileMode(c.umask), name + fence.FileSuffix + ".lock": 0o644 &^ os.FileMode(c.umask)} {
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != want {
				t.Errorf("umask %03o, perm %v: %s is %v, %v; want %v", c.umask, c.perm, filepath.Base(file), fi.Mode().Perm(), err, want)
			}
		}
	}
}
