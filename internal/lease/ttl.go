package lease

import (
	"fmt"
	"time"
)

// CheckTTL returns the error, naming package pkg, of a TTL outside min to
// max, or nil.
func CheckTTL(pkg string, ttl, min, max time.Duration) error {
	if ttl < min || ttl > max {
		return fmt.Errorf("%s: TTL %v is outside the range %v to %v; set it with WithTTL", pkg, ttl, min, max)
	}
	return nil
}
