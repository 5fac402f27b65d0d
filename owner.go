package dlock

import "context"

type ownerKey struct{}

// WithOwner returns a copy of ctx that carries owner as the identity of the
// caller for reentrant locks. A reentrant lock taken with a context that
// carries the same owner as a current hold increments the hold count instead
// of blocking. Lease.Context carries the lease's own token as its owner, so
// code running under a lease can take the same reentrant lock again.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the owner carried by ctx, and false if it carries none.
func OwnerFrom(ctx context.Context) (string, bool) {
	owner, ok := ctx.Value(ownerKey{}).(string)
	return owner, ok && owner != ""
}
