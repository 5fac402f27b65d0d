// Package run implements "dlock run": run a command while holding a lock,
// and stop it if the lock is lost.
//
// # Supervision
//
// dlock does not start COMMAND itself. It starts a copy of itself, the
// supervisor (SuperviseIfChild, called first thing in main, recognises
// it), which starts COMMAND in a process group of its own and is a child
// subreaper (PR_SET_CHILD_SUBREAPER): a process orphaned below it, such as
// a daemon that forked twice and left its session, is re-parented to it,
// so every process COMMAND starts stays its descendant. It finds them by
// their parent pids in /proc, and knows that none is left when wait
// reports that it has no children. It signals each through a pidfd, and
// only if the process that pidfd pins started when the one found did: a
// descendant reaped by its parent after the scan leaves a pid that the
// kernel may give to a process that is none of COMMAND's. Without pidfds
// (Linux before 5.3) it checks the start time and signals by pid, which
// narrows that window to microseconds without closing it.
//
//	dlock ──control pipe──▶ supervisor ──▶ COMMAND ──▶ its processes
//	      ◀──status pipe───
//
// dlock holds the lease, keeps the clock and tells the supervisor which
// signal to send to every process of COMMAND's, one byte a signal, on
// the control pipe. The supervisor reports on the status pipe when
// COMMAND starts, when its own process exits, and when nothing of it is
// left; dlock releases the lock then. When dlock dies, however it dies,
// the control pipe reaches end of file: the supervisor kills everything
// with SIGKILL, and COMMAND's own process has SIGKILL as its parent-death
// signal should the supervisor die too. A supervisor that dies while
// COMMAND runs leaves its orphans to dlock, which is a subreaper as well
// and kills them.
//
// # When COMMAND is stopped
//
// When the lease is lost, every process gets SIGTERM (and SIGCONT, so a
// stopped one sees it), then SIGKILL after --grace. A lease that was not
// renewed by --grace + KillLead before its Until gets the same stop early,
// SIGKILL going out KillLead before Until, so that COMMAND is gone before
// the lock's key expires on the server, which happens no sooner than
// Until + dlock.Drift(TTL). MaxGrace keeps that stop clear of the normal
// renewals, every TTL/3: they have about a quarter of the TTL to answer.
package run
