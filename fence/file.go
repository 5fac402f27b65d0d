package fence

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FileSuffix is appended to a file's name to name the file that records
// the highest fence written to it, such as "report.csv.fence".
const FileSuffix = ".fence"

// WriteFile writes data to the file name, replacing it as a whole, with
// permissions perm, unless a higher fence than fence has written it: then
// it writes nothing and returns a *StaleError. An equal fence passes.
//
// It records the fence in name+FileSuffix, which it holds under an
// exclusive flock while it compares and records the fence, writes data to
// a temporary file in name's directory, syncs it and renames it over
// name, and syncs the directory. Readers see the old file or the new one,
// never part of either. Writers of one file take turns on the flock, so a
// stale writer that comes after a later one is refused, whichever
// machines they run on, on a shared filesystem whose flock is shared too
// (NFSv4, and Linux clients of NFSv3 with lock support, turn it into a
// lock of the server's). A crash may leave a temporary file named
// ".NAME.*.tmp" beside name, and a recorded fence whose data was not
// written: a retry with the same fence passes.
func WriteFile(name string, fence uint64, data []byte, perm os.FileMode) error {
	return fencedFile(name, fence, func() error { return replace(name, data, perm) })
}

// CheckFile records fence for the file name, as WriteFile does, without
// writing name: it returns a *StaleError if a higher fence is recorded.
// Writes to name made after it are not guarded by it.
func CheckFile(name string, fence uint64) error {
	return fencedFile(name, fence, func() error { return nil })
}

// fencedFile runs write under the flock of name's fence file, once fence
// is recorded there, unless it is stale.
func fencedFile(name string, fence uint64, write func() error) error {
	if err := checkInput(name, fence, maxResource); err != nil {
		return err
	}
	rec, err := os.OpenFile(name+FileSuffix, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("fence: opening the fence of %s: %w", name, err)
	}
	defer rec.Close() // and with it the flock
	for {
		err = syscall.Flock(int(rec.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("fence: locking %s: %w", rec.Name(), err)
	}
	newest, err := readFence(rec)
	if err != nil {
		return err
	}
	if newest > fence {
		return &StaleError{Resource: name, Fence: fence, Newest: newest}
	}
	if newest < fence {
		if err := writeFence(rec, fence); err != nil {
			return err
		}
	}
	return write()
}

// readFence returns the fence recorded in rec, 0 if it is empty.
func readFence(rec *os.File) (uint64, error) {
	b, err := io.ReadAll(io.NewSectionReader(rec, 0, 64))
	if err != nil {
		return 0, fmt.Errorf("fence: reading %s: %w", rec.Name(), err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, nil
	}
	f, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fence: %s holds %q, not a fence: remove it only if no holder of the lock can still write", rec.Name(), s)
	}
	return f, nil
}

// writeFence records fence in rec, durably.
func writeFence(rec *os.File, fence uint64) error {
	if err := rec.Truncate(0); err != nil {
		return fmt.Errorf("fence: recording the fence in %s: %w", rec.Name(), err)
	}
	if _, err := rec.WriteAt([]byte(strconv.FormatUint(fence, 10)+"\n"), 0); err != nil {
		return fmt.Errorf("fence: recording the fence in %s: %w", rec.Name(), err)
	}
	if err := rec.Sync(); err != nil {
		return fmt.Errorf("fence: syncing %s: %w", rec.Name(), err)
	}
	return nil
}

// replace writes data to name through a temporary file and a rename.
func replace(name string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("fence: writing %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, it fails and does nothing
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		return fmt.Errorf("fence: writing %s: %w", name, err)
	}
	// The rename, durably. Some filesystems cannot sync a directory; the
	// file is written all the same.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
