package zklock_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

// A reconnect to a session's only server whose connect answer comes
// after two thirds of the session timeout, but while the session still
// lives, keeps the session. Here the session timeout is 6s and the
// answer comes 4.2s late: cut at two thirds (4s), go-zookeeper paused 1s
// and dialled again about 6s after the cut, when the Client gives the
// session up (measured 6.0s and 6.1s: a new session each time); waited
// for, the answer takes the session back about 5.3s after the cut.
func TestIntegrationSlowReconnectAnswerKeepsSession(t *testing.T) {
	t.Parallel()
	z := sharedZK(t)
	p := testenv.StartProxy(t, z.Addr())
	c := connect(t, []string{p.Addr()}, zklock.WithSessionTimeout(6*time.Second))
	id := c.ID()
	p.SetReplyLatency(4200 * time.Millisecond)
	p.Reset()
	cut := time.Now()
	for c.Conn().State() != zk.StateConnected {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the server answered; the proxy holds the answer
	p.SetReplyLatency(0)
	for c.Conn().State() != zk.StateHasSession || c.ID() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("measured: session again %v after the cut, the same: %v", time.Since(cut).Round(time.Millisecond), c.ID() == id)
	if c.ID() != id {
		t.Errorf("a reconnect answered 4.2s late (session timeout 6s) lost session %#x for %#x", id, c.ID())
	}
}
