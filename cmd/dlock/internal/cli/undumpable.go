package cli

import "golang.org/x/sys/unix"

// Undumpable makes the process undumpable (prctl PR_SET_DUMPABLE 0), so
// that the processes of its own user, dlock run's COMMAND among them,
// cannot read its secrets: not its /proc/PID/environ, which shows the
// environment the process started with (DLOCK_REDIS_PASSWORD, a
// DLOCK_POSTGRES URL with its password) whatever it unsets since, nor its
// memory, nor attach a debugger to it; and it leaves no core dump. Only
// root (CAP_SYS_PTRACE) still can. Its children are dumpable again once
// they exec. The dlock command calls it before Main; it fails only on a
// kernel without prctl.
func Undumpable() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
