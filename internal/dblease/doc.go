// Package dblease holds what a lock kept as a row of a database table,
// on the database's clock, needs whatever the database: everything of
// pglock and mysqllock but their statements, the order in which an
// attempt sends them, and the reading of their driver's errors; and what
// another database's backend would need.
//
// A package's Client holds a Client (New): its options (ClientConfig),
// the registries of its held leases of each mode, the watchdog that
// renews them, the waiters a release wakes (Waiters), and the background
// clean-ups of rows an interrupted statement may have left held
// (Abandon), which Close waits for. Each of its locks holds a Locker
// (Client.NewLocker), which goes about Lock and TryLock, making the
// package's attempts, and hands out what an attempt was granted: the
// lease-mode lease (Grant, through Locker.Granted) or the session-mode
// lease (Session, through Locker.SessionGranted). Info and Leader make
// what Inspect and an election report of what the package read.
//
// What differs between the databases comes in through a Dialect: the
// statements on a lock's rows, how to read the driver's errors (its
// Faults), the largest fence, and the package's name, which every error
// message starts with. A session-mode lease's connection is the
// package's own (see SessionConn).
package dblease
