package zklock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// A connection the server accepted but never answers is given up two
// thirds of a session timeout after the connect request, not go-zookeeper's
// ten times that: a restarted ZooKeeper left a connection accepted while
// it started unanswered, and a Lock waiting through the restart was
// granted 16.8s after the server was back (session timeout 3s; go-zookeeper
// waits 20s). Here the proxy drops all data for 4.5s, so the new session
// the Client asks for once it gives up the old one (3s after the cut)
// goes unanswered; the Lock, started when data passes again, must be
// granted within the 2s bound, go-zookeeper's 1s pause before it dials
// again, and 5s for a loaded machine (5.3s in all measured at load 19),
// rather than the 16s to 19s it waited.
func TestIntegrationUnansweredConnectGivenUp(t *testing.T) {
	t.Parallel()
	z := sharedZK(t)
	p := testenv.StartProxy(t, z.Addr())
	c := connect(t, []string{p.Addr()})
	ctx := ctxFor(t, time.Minute)
	p.Blackhole(true)
	p.Reset() // the Client reconnects, to a proxy that drops its connect request
	time.Sleep(testSessionTimeout + 1500*time.Millisecond)
	p.Blackhole(false)
	back := time.Now()
	l, err := c.NewMutex(uniquePath(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(back)
	t.Logf("measured: granted %v after the connect requests passed again", took.Round(time.Millisecond))
	if bound := testSessionTimeout*2/3 + time.Second + 5*time.Second; took > bound {
		t.Errorf("Lock granted %v after the connect requests passed again; want within %v", took, bound)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
