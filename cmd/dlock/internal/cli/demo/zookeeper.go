package demo

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/servers"
	"github.com/dlock-go/dlock/zklock"
)

const (
	zkPath = "/dlock-demo/nightly-report"
	// zkCutTimeout is the session timeout of the holder that is cut off:
	// short, so that the ensemble expires it quickly.
	zkCutTimeout = 1500 * time.Millisecond
)

// zkConnect opens a Session that logs nothing.
func zkConnect(ctx context.Context, addr string, opts ...zklock.ClientOption) (*zklock.Client, error) {
	opts = append(opts, zklock.WithLogger(slog.New(slog.DiscardHandler)))
	return zklock.New(ctx, []string{addr}, opts...)
}

// zkPart runs part 4, if ZooKeeper is installed.
func (d *demo) zkPart(ctx context.Context) error {
	d.heading("4. ZooKeeper: first come, first served, and a holder cut off")
	switch {
	case d.o.NoZK:
		d.zkSkipped = "--no-zk"
		d.out.printf("Skipped (--no-zk).\n")
		return nil
	case servers.LookZooKeeper() != nil:
		d.zkSkipped = "not installed"
		d.out.printf("ZooKeeper not installed; skipping (apt-get install zookeeper to see it).\n")
		return nil
	}
	launched := time.Now()
	z, err := servers.LaunchZooKeeper()
	if err != nil {
		return fmt.Errorf("%w: %w", errUnavailable, err)
	}
	defer z.Close()
	d.out.printf("Started ZooKeeper (standalone) on %s (pid %d) in %.1fs.\n", z.Addr(), z.PID(), time.Since(launched).Seconds())

	sessions := make([]*zklock.Client, d.o.Workers)
	for i := range sessions {
		s, err := zkConnect(ctx, z.Addr())
		if err != nil {
			return fmt.Errorf("worker %d: %w", i+1, err)
		}
		defer s.Close()
		sessions[i] = s
	}
	if err := d.zkQueue(ctx, sessions); err != nil {
		return err
	}
	return d.zkCut(ctx, z, sessions[0])
}

// zkQueue lets the workers queue in order and take the lock in rounds.
func (d *demo) zkQueue(ctx context.Context, sessions []*zklock.Client) error {
	d.out.printf("%d workers, each with its own session, take %q %d times each and hold it %v.\n",
		d.o.Workers, zkPath, d.o.Rounds, workTime)
	d.out.printf("Each waiter creates a sequential node and watches the one before it; worker 1 takes the lock\n")
	d.out.printf("first, and holds it until workers 2 to %d have queued, one after another.\n\n", d.o.Workers)
	d.out.printf("%-7s %-6s %-16s %-22s %s\n", "worker", "round", "node", "fence", "hand-over")
	b := newBoard(func(g grant) {
		hand := "-"
		if g.handover >= 0 {
			hand = ms(g.handover)
		}
		d.out.printf("%-7d %-6d %-16s %-22d %s\n", g.worker, g.round, nodeName(g.lease), g.lease.Fence(), hand)
	})
	d.zk = b
	gate := make(chan struct{})
	hold := func(ctx context.Context, w, round int, lease dlock.Lease) {
		if w == 1 && round == 1 {
			select {
			case <-gate:
			case <-lease.Done():
			case <-ctx.Done():
			}
		}
		holdFor(workTime)(ctx, w, round, lease)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	failed := func(err error) error {
		stop()
		wg.Wait()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if werr := b.err(); werr != nil {
			return werr
		}
		return err
	}
	adm := sessions[0].Conn()
	for w := 1; w <= len(sessions); w++ {
		m := sessions[w-1].NewMutex(zkPath)
		wg.Go(func() { b.contend(stopCtx, w, m, d.o.Rounds, hold) })
		// Wait until this worker's node is in the queue before the next
		// one asks: the queue's order is then the workers' order.
		for {
			kids, _, err := adm.Children(zkPath)
			if err == nil && len(kids) >= w {
				break
			}
			b.mu.Lock()
			bad := b.failed()
			b.mu.Unlock()
			if bad {
				return failed(nil)
			}
			select {
			case <-stopCtx.Done():
				return failed(stopCtx.Err())
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	close(gate)
	wg.Wait()
	if err := failed(nil); err != nil {
		return err
	}

	s := b.stats(0)
	b.mu.Lock()
	order := make([]string, len(b.grants))
	for i, g := range b.grants {
		order[i] = fmt.Sprint(g.worker)
	}
	b.mu.Unlock()
	d.out.printf("\n%d grants, served in the order: %s\n", s.grants, strings.Join(order, " "))
	d.out.printf("%s\n", b.verdict())
	d.out.printf("Every grant went to the oldest node in the queue (the node numbers only grow): first come, first served.\n")
	d.out.printf("Hand-over: median %s, longest %s; the release wakes the next waiter and nobody else.\n", ms(s.medHandover), ms(s.maxHandover))
	return nil
}

// nodeName returns the sequence part of a zklock lease's node, such as
// "lock-0000000003".
func nodeName(l dlock.Lease) string {
	zl, ok := l.(*zklock.Lease)
	if !ok {
		return "?"
	}
	p := zl.Path()
	if i := strings.LastIndex(p, "-lock-"); i >= 0 {
		return p[i+1:]
	}
	return p[strings.LastIndex(p, "/")+1:]
}

// zkCut shows a holder cut off from the ensemble: it is told on Done
// before the ensemble expires its session and lets the next waiter in.
func (d *demo) zkCut(ctx context.Context, z *servers.ZooKeeper, waiterSession *zklock.Client) error {
	proxy, err := servers.NewProxy(z.Addr())
	if err != nil {
		return err
	}
	defer proxy.Close()
	cutSession, err := zkConnect(ctx, proxy.Addr(), zklock.WithSessionTimeout(zkCutTimeout))
	if err != nil {
		return err
	}
	defer cutSession.Close()
	defer proxy.Blackhole(false) // before the Session closes

	b := newBoard(nil)
	d.zkCutBoard = b
	d.out.printf("\nA holder cut off from the ensemble (session timeout %v, through a proxy that can drop packets):\n", cutSession.Timeout())
	held, err := cutSession.NewMutex(zkPath).Lock(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	b.granted(1, 1, held, 0)
	d.out.printf("%s  X holds %q with fence %d; worker 1 queues behind it\n", since(start, start), zkPath, held.Fence())
	type result struct {
		lease dlock.Lease
		err   error
	}
	got := make(chan result, 1)
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	go func() {
		lease, err := waiterSession.NewMutex(zkPath).Lock(waitCtx)
		if err == nil {
			b.granted(2, 1, lease, time.Since(start))
		}
		got <- result{lease, err}
	}()
	for {
		kids, _, err := waiterSession.Conn().Children(zkPath)
		if err == nil && len(kids) >= 2 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-got:
			return fmt.Errorf("worker 1 behind X: got %v, %v before X was cut off", r.lease, r.err)
		case <-time.After(2 * time.Millisecond):
		}
	}
	proxy.Blackhole(true)
	cut := time.Now()
	d.out.printf("%s  X's network is cut: from now on no packet gets through, either way\n", since(start, cut))
	select {
	case <-held.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	told := time.Now()
	d.out.printf("%s  X's Done() closes: %v\n", since(start, told), held.Err())
	d.out.printf("         (X could not confirm its session, so its lease ended at Until: at most a third of the\n")
	d.out.printf("         session timeout after its last confirmation)\n")
	var r result
	select {
	case r = <-got:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.err != nil {
		return fmt.Errorf("worker 1 behind X: %w", r.err)
	}
	next := time.Now()
	d.out.printf("%s  worker 1 granted, fence %d: the ensemble heard nothing from X for %v, expired its\n",
		since(start, next), r.lease.Fence(), cutSession.Timeout())
	d.out.printf("         session and deleted its node. X was told %.2fs before that.\n", next.Sub(told).Seconds())
	b.releasing(r.lease)
	if err := r.lease.Release(ctx); err != nil {
		return err
	}
	d.out.printf("%s  %s\n", since(start, time.Now()), b.verdict())
	return nil
}
