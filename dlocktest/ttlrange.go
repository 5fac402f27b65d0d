package dlocktest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// ttlOutOfRange: a TTL below 10ms or above 24 hours (every backend's
// MinTTL and MaxTTL) makes Lock and TryLock fail with a usage error that
// names WithTTL and does not match ErrNotObtained: retrying cannot help.
func (s *suite) ttlOutOfRange(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	for _, ttl := range []time.Duration{5 * time.Millisecond, 24*time.Hour + time.Second} {
		l := s.b.NewLocker(t, uniqueKey(t), Options{TTL: ttl})
		for _, try := range []bool{true, false} {
			var lease dlock.Lease
			var err error
			if try {
				lease, err = l.TryLock(ctx)
			} else {
				lease, err = l.Lock(ctx)
			}
			switch {
			case err == nil:
				lease.Release(ctx)
				t.Errorf("TTL %v: a lease was granted; want an error naming WithTTL", ttl)
			case errors.Is(err, dlock.ErrNotObtained):
				t.Errorf("TTL %v: %v matches ErrNotObtained; want a usage error", ttl, err)
			case !strings.Contains(err.Error(), "WithTTL"):
				t.Errorf("TTL %v: %v does not name WithTTL", ttl, err)
			}
		}
	}
}
