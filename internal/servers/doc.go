// Package servers starts and controls real redis-server, ZooKeeper,
// PostgreSQL, MariaDB and etcd processes for the chaos harness, the dlock
// command's demo, benchmarks and (through internal/testenv) tests, and
// provides an in-process TCP proxy for injecting network faults. Every
// kind of server has the same controls (Addr, Kill, Stop, Pause, Resume,
// Restart, Close, LogTail, ...); what differs between them is in its own
// file.
//
// Servers listen only on 127.0.0.1, on ports chosen by [FreePort]. Every
// process is started in its own process group, is signalled only through
// its own PID, and is killed by the kernel if the process that started it
// dies. [StopAll] stops every server that is still running, for use at the
// end of a TestMain or a command.
//
// A new PostgreSQL or MariaDB data directory is a copy of one that initdb
// or mariadb-install-db made once per machine, kept in the user's cache
// directory (dlock-testenv, beside BuildEtcd's binaries).
//
// The Launch functions start a server and return it or an error; the
// Look functions say whether a server is installed, naming the Debian
// package to install if not. Nothing here imports testing: the testing.TB
// wrappers (Start functions that skip, fail and clean up) are in
// internal/testenv.
package servers
