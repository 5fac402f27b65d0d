// Package interop tests that dlock's locks exclude the locks of other
// libraries on the same keys, against the real libraries: bsm/redislock
// and redsync (Go modules), redis-py's Lock (Debian's python3-redis) and
// node-redlock (npm), with redislock.WithBareKey and redlock.WithBareKey.
// It is a module of its own, so that dlock does not depend on them; the
// Makefile's test target runs it. See docs/interop-redis.md.
package interop
