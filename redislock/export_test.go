package redislock

import (
	"time"

	"github.com/dlock-go/dlock/internal/rediskeys"
)

// FenceKey is the fence counter of a lock name's slot, for tests.
var FenceKey = rediskeys.FenceKey

// SetRequestMemory sets how long the server remembers a request's
// outcome, for tests, and returns a function that restores it.
func SetRequestMemory(d time.Duration) (restore func()) {
	old := requestMemory
	requestMemory = d
	return func() { requestMemory = old }
}

// SetResendFor sets how long a call that must take effect once is sent
// again while its reply is lost, for tests, and returns a function that
// restores it.
func SetResendFor(d time.Duration) (restore func()) {
	old := resendFor
	resendFor = d
	return func() { resendFor = old }
}

// ClientID is c's name in lines of waiting clients, for tests.
func ClientID(c *Client) string { return c.id }
