package redislock_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock"
)

// lateConn is a Conn whose failed calls return late: once the server has
// failed a call, the call returns only after the time in until. So the
// deadline of a Lock passes after the server refused and before the Lock
// looks at the failure: as when, on a loaded machine, the goroutine that
// got the failure runs again only after the deadline that it beat.
type lateConn struct {
	redislock.Conn
	until *atomic.Int64 // UnixNano
}

func (c lateConn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	c.Conn.Eval(ctx, calls, results)
	for _, r := range results {
		if r.Err != nil {
			time.Sleep(time.Until(time.Unix(0, c.until.Load())))
			return
		}
	}
}

// Issue 36: a Lock whose context ends while the server refuses
// connections reports the context's error and ErrUnavailable, even when
// its deadline passes between the server's refusal and the moment the
// Lock looks at it (the attempt was taken for one that the context cut
// short, which tells nothing of the server: the error said only "lock not
// obtained: context deadline exceeded"). Each kind that waits, on each
// transport.
func TestIntegrationDeadlineAfterRefusal(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	makers := releasers // every kind whose calls change the server's state
	for _, tr := range transports {
		for _, m := range makers {
			t.Run(tr.name+"/"+m.name, func(t *testing.T) {
				t.Parallel() // each on its own proxy
				p := testenv.StartProxy(t, d.addrs()[0])
				var dialer net.Dialer
				via := &deployment{servers: d.servers, dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return dialer.DialContext(ctx, network, p.Addr())
				}}
				until := new(atomic.Int64)
				c := redislock.New(lateConn{Conn: tr.open(t, via), until: until})
				t.Cleanup(func() { c.Close() })
				p.SetRefuse(true)
				p.Reset()
				// The server refuses within milliseconds; a second is
				// enough for that on a loaded machine.
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				deadline, _ := ctx.Deadline()
				until.Store(deadline.Add(20 * time.Millisecond).UnixNano())
				l, err := m.make(c, t.Name()).Lock(ctx)
				if err == nil {
					l.Release(context.Background())
					t.Fatal("Lock on a server that refuses succeeded")
				}
				t.Logf("Lock: %v", err)
				for _, w := range []error{dlock.ErrNotObtained, context.DeadlineExceeded, dlock.ErrUnavailable} {
					if !errors.Is(err, w) {
						t.Errorf("Lock whose deadline passed after the server refused = %v; want it to match %v", err, w)
					}
				}
			})
		}
	}
}
