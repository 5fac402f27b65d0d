// Package dblease holds the lease machinery of a lock kept as a row of a
// database table, on the database's clock, whatever the database: what
// pglock and mysqllock share, and what another database's backend would.
// It holds the options of a lock (Config), the way Lock and TryLock go about
// their attempts (Locker), the waiters a release wakes (Waiters), the
// lease-mode lease (Grant) and the part of a session-mode lease that does
// not depend on the database (Session), and what a Client's leases share:
// their registries, the watchdog and the background clean-ups (Leases).
//
// What differs between the databases comes in through a Dialect: the
// statements on a lock's rows, how to read the driver's errors, and the
// package's name, which every error message starts with. A session-mode
// lease's connection is the package's own (see SessionConn).
package dblease
