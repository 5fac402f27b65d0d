package fence

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

// FileSuffix is appended to a file's name to name the file that records
// the highest fence written to it, such as "report.csv.fence". The
// writers of the file take turns on an exclusive flock of a third file,
// named with ".lock" appended to that, such as "report.csv.fence.lock".
const FileSuffix = ".fence"

// lockSuffix is appended to the name of a fence file to name the file
// whose flock the writers take turns on. The fence file itself is
// replaced by a rename, so it cannot be the one locked: a writer waiting
// for the old file's flock would then read the old fence.
const lockSuffix = ".lock"

// WriteFile writes data to the file name, replacing it as a whole, with
// permissions perm, unless a higher fence than fence has written it: then
// it writes nothing and returns a *StaleError. An equal fence passes.
//
// It records the fence in name+FileSuffix and writes data, each through a
// temporary file in name's directory that it syncs and renames over the
// old one, syncing the directory after each rename, and the fence before
// the data. Readers see the old file or the new one, never part of
// either, and a writer killed at any step leaves the old fence or the
// new one recorded, with the old data or the new: a stale writer is
// refused all the same, and a retry with the same fence passes. Such a
// crash may leave a temporary file named ".NAME.*.tmp" beside name, or
// ".NAME.fence.*.tmp" (NAME cut short if it is long), which may be
// removed when no writer runs.
//
// The writers of one file take turns on an exclusive flock of
// name+FileSuffix+".lock", held while WriteFile compares, records and
// writes, so a stale writer that comes after a later one is refused,
// whichever machines they run on, on a shared filesystem whose flock is
// shared too (NFSv4, and Linux clients of NFSv3 with lock support, turn
// it into a lock of the server's). The lock file stays, empty.
//
// A name that ends in FileSuffix, or in FileSuffix+".lock", is refused:
// such a file is the fence file, or the lock file, of another.
//
// A fence file that does not hold a fence (empty, or with anything but a
// decimal number and a newline, as a crash of a WriteFile of an older
// version could leave it) refuses every write, with an error naming it:
// the fence it held is unknown, and guessing low would let a stale writer
// through. To recover, write into it a fence no lower than any holder of
// the lock may still write with, such as the lock's latest fence, which
// "dlock inspect" shows; or, if no holder of the lock can still write,
// remove it.
func WriteFile(name string, fence uint64, data []byte, perm os.FileMode) error {
	return fencedFile(name, fence, func() error { return replace(name, data, perm, "data") })
}

// CheckFile records fence for the file name, as WriteFile does, without
// writing name: it returns a *StaleError if a higher fence is recorded.
// Writes to name made after it are not guarded by it.
func CheckFile(name string, fence uint64) error {
	return fencedFile(name, fence, func() error { return nil })
}

// fencedFile runs write under the flock of name's lock file, once fence
// is recorded in name's fence file, unless it is stale.
func fencedFile(name string, fence uint64, write func() error) error {
	if err := checkInput(name, fence, maxResource); err != nil {
		return err
	}
	if clean := filepath.Clean(name); strings.HasSuffix(clean, FileSuffix) || strings.HasSuffix(clean, FileSuffix+lockSuffix) {
		return badInput{fmt.Sprintf("fence: %s ends in %s or %s%s, as the files that record another file's fence, and that its writers lock, are named: "+
			"writes to it would replace them; give the file another name", name, FileSuffix, FileSuffix, lockSuffix)}
	}
	record := name + FileSuffix
	lock, err := os.OpenFile(record+lockSuffix, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("fence: opening the lock of %s: %w", name, err)
	}
	defer lock.Close() // and with it the flock
	for {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("fence: locking %s: %w", lock.Name(), err)
	}
	step("locked")
	newest, mode, err := readRecord(record)
	if err != nil {
		return err
	}
	if newest > fence {
		return &StaleError{Resource: name, Fence: fence, Newest: newest}
	}
	if newest < fence {
		if err := replace(record, []byte(strconv.FormatUint(fence, 10)+"\n"), mode, "record"); err != nil {
			return fmt.Errorf("fence: recording fence %d for %s: %w", fence, name, err)
		}
	}
	return write()
}

// readRecord returns the fence recorded in the fence file record, 0 if
// there is none, and the file's permissions (0644 if there is none). A
// file that does not hold a fence is an error.
func readRecord(record string) (uint64, os.FileMode, error) {
	// O_NONBLOCK: opening a named pipe would wait for a writer, with the
	// lock held.
	f, err := os.OpenFile(record, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0o644, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("fence: reading %s: %w", record, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("fence: reading %s: %w", record, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, 0, fmt.Errorf("fence: %s is not a regular file (%v), so it holds no fence and every write to the file it guards is refused", record, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, 0, fmt.Errorf("fence: reading %s: %w", record, err)
	}
	s, ok := strings.CutSuffix(string(b), "\n")
	n, err := strconv.ParseUint(s, 10, 64)
	if !ok || err != nil || n > math.MaxInt64 {
		return 0, 0, fmt.Errorf("fence: %s holds %q, not a fence, so every write to the file it guards is refused: "+
			"write into it a fence no lower than any holder of the lock may still write with (the lock's latest fence, which dlock inspect shows), "+
			"or remove it if no holder of the lock can still write", record, b)
	}
	return n, fi.Mode().Perm(), nil
}

// replace writes data to name through a temporary file and a rename, and
// syncs both. what names the file for the test's steps: "data" or
// "record".
func replace(name string, data []byte, perm os.FileMode, what string) error {
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+tempBase(base)+".*.tmp")
	if err != nil {
		return fmt.Errorf("fence: writing %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, it fails and does nothing
	step(what + " temp created")
	_, err = tmp.Write(data)
	if err == nil {
		step(what + " temp written")
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		step(what + " temp synced")
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		return fmt.Errorf("fence: writing %s: %w", name, err)
	}
	step(what + " renamed")
	// The rename, durably. Some filesystems cannot sync a directory; the
	// file is written all the same.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	step(what + " dir synced")
	return nil
}

// tempBase returns base, cut short at a character's start if need be
// so that the name of a temporary file made from it, "." + base + "." +
// up to 10 random digits + ".tmp", fits in 255 bytes, the longest name
// of most filesystems.
func tempBase(base string) string {
	const longest = 255 - len("..") - 10 - len(".tmp")
	if len(base) <= longest {
		return base
	}
	n := longest
	for n > 0 && !utf8.RuneStart(base[n]) {
		n--
	}
	return base[:n]
}

// fileStep, if not nil, is called at each step of a write that changes
// files: the tests kill a writer there.
var fileStep func(step string)

func step(s string) {
	if fileStep != nil {
		fileStep(s)
	}
}
