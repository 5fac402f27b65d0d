package run

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// foregroundTTY returns in if it is the controlling terminal and dlock is
// in its foreground process group: then COMMAND, in a process group of its
// own (so that a lost lock can stop all of it), is made the foreground
// group, so that it can read the terminal and gets the terminal's Ctrl-C.
// Otherwise it returns nil.
func foregroundTTY(in any) *os.File {
	f, ok := in.(*os.File)
	if !ok {
		return nil
	}
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	if err != nil || pgrp != unix.Getpgrp() {
		return nil
	}
	return f
}

// takeForeground makes dlock's process group the terminal's foreground
// group again after COMMAND exits.
func takeForeground(tty *os.File) {
	signal.Ignore(syscall.SIGTTOU) // a background group changing it gets SIGTTOU
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(int(tty.Fd()), unix.TIOCSPGRP, unix.Getpgrp())
}
