package fence

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
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
// permissions perm (before the umask), unless a higher fence than fence
// has written it: then it writes nothing and returns a *StaleError. An
// equal fence passes.
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
// such a file is the fence file, or the lock file, of another. So is a
// name that is a symbolic link (the rename would replace the link, and
// the fence would guard it rather than the file that other writers reach
// by another path: give the path of the file it points to), and a fence
// file or lock file that is a symbolic link or not a regular file (a link
// could lead out of the directory, to a file that the write would create
// or change).
//
// The files WriteFile creates have the permissions open(2) gives them:
// perm for the file, and those of the fence file it replaces (0644 for
// the first) for the fence file and 0644 for the lock file, less the
// process's umask. It never widens them: with umask 077 each is the
// owner's alone.
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
	if fi, err := os.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return badInput{fmt.Sprintf("fence: %s is a symbolic link: give the path of the file it points to, which the fence then guards", name)}
	}
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
	record, lock, err := lockFile(name)
	if err != nil {
		return err
	}
	defer lock.Close() // and with it the flock
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

// lockFile refuses a name that is the fence file or the lock file of
// another, and takes the exclusive flock of name's lock file, which
// closing lock lets go. It returns the name of name's fence file.
func lockFile(name string) (record string, lock *os.File, err error) {
	if clean := filepath.Clean(name); strings.HasSuffix(clean, FileSuffix) || strings.HasSuffix(clean, FileSuffix+lockSuffix) {
		return "", nil, badInput{fmt.Sprintf("fence: %s ends in %s or %s%s, as the files that record another file's fence, and that its writers lock, are named: "+
			"writes to it would replace them; give the file another name", name, FileSuffix, FileSuffix, lockSuffix)}
	}
	record = name + FileSuffix
	lock, err = openRegular(record+lockSuffix, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", nil, fmt.Errorf("fence: opening the lock of %s: %w", name, err)
	}
	for {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		lock.Close()
		return "", nil, fmt.Errorf("fence: locking %s: %w", lock.Name(), err)
	}
	step("locked")
	return record, lock, nil
}

// readRecord returns the fence recorded in the fence file record, 0 if
// there is none, and the file's permissions (0644 if there is none). A
// file that does not hold a fence is an error.
func readRecord(record string) (uint64, os.FileMode, error) {
	f, err := openRegular(record, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0o644, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("fence: reading the fence: %w, so it holds no fence and every write to the file it guards is refused", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("fence: reading %s: %w", record, err)
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

// openRegular opens name as os.OpenFile does, but refuses a symbolic
// link (O_NOFOLLOW: a link could lead to a file elsewhere, which a write
// would create or change) and anything but a regular file, with an error
// that names it. It does not wait for a writer of a named pipe.
func openRegular(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link, not a regular file", name)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%v)", name, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// replace writes data to name through a temporary file and a rename, and
// syncs both. The temporary file is created with permissions perm less
// the process's umask, by open(2), and keeps them. what names the file
// for the test's steps: "data" or "record".
func replace(name string, data []byte, perm os.FileMode, what string) error {
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	tmp, err := createTemp(dir, "."+tempBase(base)+".", ".tmp", perm)
	if err != nil {
		return fmt.Errorf("fence: writing %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, it fails and does nothing
	step(what + " temp created")
	_, err = tmp.Write(data)
	if err == nil {
		step(what + " temp written")
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

// createTemp creates a new file in dir, named prefix, up to 10 random
// digits and suffix, with permissions perm less the process's umask, as
// open(2) applies it (os.CreateTemp's are 0600, whatever the umask).
func createTemp(dir, prefix, suffix string, perm os.FileMode) (*os.File, error) {
	for range 10000 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("no unused temporary file name in %s", dir)
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
