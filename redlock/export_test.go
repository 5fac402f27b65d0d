package redlock

import "time"

// AwaitConfig waits up to five seconds until the Client has read every
// node's configuration once (see checkConfig).
func AwaitConfig(c *Client) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		done := true
		for _, st := range c.state {
			st.mu.Lock()
			done = done && !st.checked.IsZero() && !st.checking
			st.mu.Unlock()
		}
		if done {
			return
		}
	}
}
