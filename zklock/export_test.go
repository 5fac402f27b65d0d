package zklock

// SetAfterParents makes f run each time c has made the parents of a lock
// path, dir, just before it creates its lock node there. Call it before
// c's first lock.
func SetAfterParents(c *Client, f func(dir string)) { c.afterParents = f }

// MaxParentRestarts is maxParentRestarts.
const MaxParentRestarts = maxParentRestarts
