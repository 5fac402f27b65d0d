package chaos

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A Kind names a kind of violation the checker finds.
type Kind string

// The kinds of violation. StaleWrite and FenceRegression are never within
// the documented limits: fencing must hold whatever the fault.
const (
	// LeaseOverlap: two clients held valid leases on the lock at once,
	// each by its own account (from its grant to the first of its Until,
	// its Done and its Release).
	LeaseOverlap Kind = "lease-overlap"
	// SectionOverlap: two clients were in their critical sections at once.
	SectionOverlap Kind = "section-overlap"
	// FenceRegression: a grant's fence was not above the fence of every
	// grant told before it; with a fault during its Lock call, of every
	// lease granted before that call began (a call under way may then have
	// been granted first, its key lost to the fault, and told later).
	FenceRegression Kind = "fence-regression"
	// StaleWrite: the fenced register accepted a write from a holder after
	// it had accepted one from a later holder.
	StaleWrite Kind = "stale-write-accepted"
	// HolderRefused: the fenced register refused the write of the latest
	// holder while its lease was valid: its fence was below an earlier
	// holder's.
	HolderRefused Kind = "holder-refused"
	// LostUpdate: an addition the unfenced set acknowledged is missing
	// from its final contents.
	LostUpdate Kind = "lost-update"
	// LockFailed: a Lock call failed instead of waiting: it returned an
	// error before its context ended (see LockTimedOut). Every fault the
	// harness injects heals, and Lock waits through transient faults
	// (the dlock.Locker contract), so this is never within the limits;
	// but see enforceLockWaits.
	LockFailed Kind = "lock-failed"
	// NotLinearizable: the clients' calls to the fenced register, as they
	// saw them, are not a linearizable history of a fenced register: a
	// write reported accepted that a later read does not see, a refused
	// write that one does, a read of a value never written.
	NotLinearizable Kind = "not-linearizable"
	// LinearizabilityUnknown: the linearizability check ran out of its
	// budget (CheckConfig.LinearizabilityBudget) before it could decide.
	// It fails the run: an undecided history is not a linearizable one.
	LinearizabilityUnknown Kind = "linearizability-unknown"
)

// Kinds lists every kind of violation, in the order reports show them.
var Kinds = []Kind{LeaseOverlap, SectionOverlap, StaleWrite, FenceRegression, HolderRefused, LostUpdate, LockFailed,
	NotLinearizable, LinearizabilityUnknown}

// A Violation is one thing the checker found wrong.
type Violation struct {
	Kind   Kind   `json:"kind"`
	At     Mono   `json:"at"`
	Detail string `json:"detail"`
	// Fault is the fault in whose window the violation happened, if any
	// ("kill-restart-empty node 1"), and Limit, if not empty, is why
	// that fault on this backend is known to allow it (see Expect).
	Fault string `json:"fault,omitempty"`
	Limit string `json:"limit,omitempty"`
	// Clients are the clients involved.
	Clients []int `json:"clients"`
}

// Explained reports whether the violation is a documented limit.
func (v Violation) Explained() bool { return v.Limit != "" }

// A Recovery is the time from a fault to the next grant.
type Recovery struct {
	Fault  string        `json:"fault"`
	At     Mono          `json:"at"`
	Lasted time.Duration `json:"lasted"`
	// FromStart is the time from the fault's start to the first grant
	// after it, and FromHeal from its end; -1 if no grant followed.
	FromStart time.Duration `json:"from_start"`
	FromHeal  time.Duration `json:"from_heal"`
}

// A Verdict is what the checker makes of a history.
type Verdict struct {
	Backend  string        `json:"backend"`
	Duration time.Duration `json:"duration"`
	Clients  int           `json:"clients"`

	Acquires       int `json:"acquires"`
	Grants         int `json:"grants"`
	FailedAcquires int `json:"failed_acquires"`
	Losses         int `json:"losses"` // leases that ended other than by release
	WritesAccepted int `json:"writes_accepted"`
	// StaleRefused counts the writes the fenced register refused from a
	// holder that had been superseded: fencing at work.
	StaleRefused int `json:"stale_refused"`
	Added        int `json:"added"` // acknowledged additions to the unfenced set
	Crashes      int `json:"crashes"`
	Faults       int `json:"faults"`

	// LockFailures counts the Lock calls that failed instead of waiting
	// (each is a LockFailed violation); FailedAcquires counts those and
	// the calls that waited 10 TTL in vain.
	LockFailures int `json:"lock_failures"`
	// Register is the verdict of the linearizability check of the fenced
	// register: RegisterLinearizable, RegisterNotLinearizable or
	// RegisterUnknown.
	Register string `json:"register"`
	// RegisterOps counts the clients' calls to the register it checked.
	RegisterOps int `json:"register_ops"`

	Violations []Violation `json:"violations"`
	Recoveries []Recovery  `json:"recoveries"`
	// Liveness sums up the recoveries and the Lock failures by kind of
	// fault, in the order the faults first came.
	Liveness []Liveness `json:"liveness"`
	// LivenessTarget is the longest time from a fault's end to the next
	// grant that docs/SAFETY.md sets as the target: the attribution
	// window (CheckConfig.Window), so that the lock is back before the
	// next fault can begin. Missing it is reported, not a violation.
	LivenessTarget time.Duration `json:"liveness_target"`
}

// The verdicts of the linearizability check (Verdict.Register).
const (
	RegisterLinearizable    = "linearizable"
	RegisterNotLinearizable = "NOT linearizable"
	RegisterUnknown         = "unknown"
)

// Liveness sums up how the lock came back after one kind of fault.
type Liveness struct {
	// Fault is the kind of fault; "" for the Lock failures outside the
	// window of every fault.
	Fault string `json:"fault"`
	// Faults counts the faults of this kind, and Followed those followed
	// by a grant before the run ended.
	Faults   int `json:"faults"`
	Followed int `json:"followed"`
	// HealMedian, HealP99 (nearest rank) and HealMax are the times from
	// the fault's end to the next grant, over the faults followed by one.
	HealMedian time.Duration `json:"heal_to_grant_median"`
	HealP99    time.Duration `json:"heal_to_grant_p99"`
	HealMax    time.Duration `json:"heal_to_grant_max"`
	// StartMedian and StartMax are the times from its start.
	StartMedian time.Duration `json:"start_to_grant_median"`
	StartMax    time.Duration `json:"start_to_grant_max"`
	// OverTarget counts the faults whose next grant came more than the
	// Verdict's LivenessTarget after their end, or never.
	OverTarget int `json:"over_target"`
	// LockFailed counts the Lock calls that failed instead of waiting in
	// the window of a fault of this kind.
	LockFailed int `json:"lock_failed"`
}

// Count returns the number of violations of kind k, and how many of them
// are documented limits.
func (v *Verdict) Count(k Kind) (all, explained int) {
	for _, x := range v.Violations {
		if x.Kind == k {
			all++
			if x.Explained() {
				explained++
			}
		}
	}
	return all, explained
}

// Unexplained returns the violations outside the documented limits.
func (v *Verdict) Unexplained() []Violation {
	var out []Violation
	for _, x := range v.Violations {
		if !x.Explained() {
			out = append(out, x)
		}
	}
	return out
}

// Failures returns the violations that fail the run: those outside the
// documented limits, but for the LockFailed ones while enforceLockWaits
// is false.
func (v *Verdict) Failures() []Violation {
	var out []Violation
	for _, x := range v.Unexplained() {
		if x.Kind != LockFailed || enforceLockWaits {
			out = append(out, x)
		}
	}
	return out
}

// OK reports whether the run is within the documented limits: no
// violation among Failures (a stale write accepted, a fence regression or
// a register history that is not linearizable is never explained).
func (v *Verdict) OK() bool { return len(v.Failures()) == 0 }

// CheckConfig says how to judge a history.
type CheckConfig struct {
	// Backend names the backend ("redis", "redlock3", ...), to look up
	// the documented limits in Expect.
	Backend string
	// Window is how long after a fault ends a violation is still put down
	// to it: the time the backend needs to settle, at least a TTL.
	Window time.Duration
	// LinearizabilityBudget is the most time the linearizability check of
	// the fenced register may take; by default
	// DefaultLinearizabilityBudget. A check that runs out of it fails the
	// run (LinearizabilityUnknown).
	LinearizabilityBudget time.Duration
}

// DefaultLinearizabilityBudget is CheckConfig.LinearizabilityBudget's default.
const DefaultLinearizabilityBudget = 30 * time.Second

// lease is one grant and its end, as its client saw it.
type lease struct {
	client int
	fence  uint64
	// called is when the Lock call that got the lease began, start when
	// it returned: the server granted the lease in between, so a lease
	// whose call began before another's start may have been granted
	// first, though it was told later.
	called  Mono
	start   Mono
	until   Mono // the latest Until the client was told
	end     Mono // first of until, done and release; set by close
	done    Mono
	release Mono
	lost    bool // ended other than by its release
}

func (l *lease) close(stop Mono) {
	l.end = l.until
	for _, t := range []Mono{l.done, l.release, stop} {
		if t != 0 && t < l.end {
			l.end = t
		}
	}
}

// section is one critical section.
type section struct {
	client      int
	fence       uint64
	enter, exit Mono
}

type fault struct {
	name       string // kind and target, as reports show it
	kind       string
	start, end Mono
}

// parsed is a history taken apart: the leases, critical sections and
// faults as intervals, and the workload's records.
type parsed struct {
	start, stop Mono
	leases      []*lease
	byKey       map[[2]uint64]*lease
	sections    []*section
	faults      []*fault
	accepted    []Event
	refused     []Event
	failures    []Event // Lock calls that failed instead of waiting
	register    []Event // the clients' calls to the register and its replies
	added       map[string]Event
	final       []string
	haveFinal   bool
	clients     map[int]bool
	logs        []Event
}

func leaseKey(client int, fence uint64) [2]uint64 { return [2]uint64{uint64(client), fence} }

// parse takes evs, in time order, apart, counting into v.
func parse(evs []Event, v *Verdict) *parsed {
	p := &parsed{byKey: map[[2]uint64]*lease{}, added: map[string]Event{}, clients: map[int]bool{}}
	open := map[int]*section{}
	calling := map[int]Mono{} // each client's Lock call under way: when it began
	var openFault *fault
	for _, e := range evs {
		if e.Client > 0 {
			p.clients[e.Client] = true
		}
		switch e.Op {
		case OpStart:
			p.start = e.At
		case OpStop:
			p.stop = e.At
		case OpAcquire:
			v.Acquires++
			calling[e.Client] = e.At
		case OpFail:
			v.FailedAcquires++
			if failedInsteadOfWaiting(e) {
				p.failures = append(p.failures, e)
			}
		case OpRegRead, OpRegWrite, OpRegReply:
			p.register = append(p.register, e)
		case OpGrant:
			l := &lease{client: e.Client, fence: e.Fence, called: cmp.Or(calling[e.Client], e.At), start: e.At, until: e.Until}
			p.leases = append(p.leases, l)
			p.byKey[leaseKey(e.Client, e.Fence)] = l
		case OpRenew:
			if l := p.byKey[leaseKey(e.Client, e.Fence)]; l != nil && e.Until > l.until {
				l.until = e.Until
			}
		case OpDone:
			if l := p.byKey[leaseKey(e.Client, e.Fence)]; l != nil && l.done == 0 {
				l.done = e.At
				if e.Err != "" && e.Err != "released" {
					l.lost = true
					v.Losses++
				}
			}
		case OpRelease:
			if l := p.byKey[leaseKey(e.Client, e.Fence)]; l != nil && l.release == 0 {
				l.release = e.At
			}
		case OpEnter:
			s := &section{client: e.Client, fence: e.Fence, enter: e.At}
			p.sections = append(p.sections, s)
			open[e.Client] = s
		case OpExit:
			if s := open[e.Client]; s != nil {
				s.exit = e.At
				delete(open, e.Client)
			}
		case OpCrashed:
			v.Crashes++
			if s := open[e.Client]; s != nil {
				s.exit = e.At
				delete(open, e.Client)
			}
		case OpWrite:
			p.accepted = append(p.accepted, e)
		case OpRefused:
			p.refused = append(p.refused, e)
		case OpAdded:
			p.added[e.Value] = e
		case OpFinal:
			p.final, p.haveFinal = e.Values, true
		case OpFault:
			openFault = &fault{name: faultName(e.Fault, e.Target), kind: e.Fault, start: e.At}
			p.faults = append(p.faults, openFault)
		case OpHeal:
			if openFault != nil {
				openFault.end = e.At
				openFault = nil
			}
		case OpLog:
			p.logs = append(p.logs, e)
		}
	}
	if len(evs) > 0 {
		if p.stop == 0 {
			p.stop = evs[len(evs)-1].At
		}
		if p.start == 0 {
			p.start = evs[0].At
		}
	}
	for _, f := range p.faults {
		if f.end == 0 {
			f.end = p.stop
		}
	}
	for _, s := range p.sections {
		if s.exit == 0 {
			s.exit = p.stop
		}
	}
	for _, l := range p.leases {
		l.close(p.stop)
	}
	return p
}

// Check judges a history: it finds every violation, attributes each to
// the fault in whose window it happened, and marks those the documented
// limits of cfg.Backend allow (see Expect).
func Check(h *History, cfg CheckConfig) *Verdict {
	v := &Verdict{Backend: cfg.Backend}
	p := parse(h.Events(), v)
	v.Duration = p.stop.Sub(p.start)
	v.Clients = len(p.clients)
	v.Grants = len(p.leases)
	v.WritesAccepted = len(p.accepted)
	v.Added = len(p.added)
	v.Faults = len(p.faults)

	c := &checker{cfg: cfg, v: v, faults: p.faults}
	c.leaseOverlaps(p.leases)
	c.sectionOverlaps(p.sections, p.byKey)
	c.fenceOrder(p.leases)
	c.writes(p.accepted, p.refused, p.byKey, p.leases)
	if p.haveFinal {
		c.lostUpdates(p.added, p.final)
	}
	c.lockFailures(p.failures)
	c.linearizable(p.register, p.start, cmp.Or(cfg.LinearizabilityBudget, DefaultLinearizabilityBudget))
	v.Recoveries = recoveries(p.faults, p.leases)
	v.LivenessTarget = cfg.Window
	v.Liveness = liveness(p.faults, v.Recoveries, v.Violations, cfg.Window)
	slices.SortStableFunc(v.Violations, func(a, b Violation) int { return cmp.Compare(a.At, b.At) })
	return v
}

func faultName(kind, target string) string {
	if target == "" {
		return kind
	}
	return kind + " " + target
}

type checker struct {
	cfg    CheckConfig
	v      *Verdict
	faults []*fault
}

// report records a violation at time at, attributed to the latest fault
// whose window holds at.
func (c *checker) report(k Kind, at Mono, clients []int, format string, args ...any) {
	x := Violation{Kind: k, At: at, Clients: clients, Detail: fmt.Sprintf(format, args...)}
	if f := c.faultAt(at); f != nil {
		x.Fault = f.name
		x.Limit = Expect(c.cfg.Backend, f.kind, k)
	}
	c.v.Violations = append(c.v.Violations, x)
}

// faultAt returns the latest fault whose window holds at: from its start
// to Window after its end. It returns nil if there is none.
// faultDuring reports whether a fault was under way, or had ended less
// than Window before, at some time from from to to: one that may have
// lost a key granted in between.
func (c *checker) faultDuring(from, to Mono) bool {
	for _, f := range c.faults {
		end := f.end
		if end == 0 {
			end = to // not healed yet
		}
		if f.start <= to && end.Add(c.cfg.Window) >= from {
			return true
		}
	}
	return false
}

func (c *checker) faultAt(at Mono) *fault {
	for i := len(c.faults) - 1; i >= 0; i-- {
		f := c.faults[i]
		if at >= f.start && at <= f.end.Add(c.cfg.Window) {
			return f
		}
	}
	return nil
}

// failedInsteadOfWaiting reports whether e, an OpFail, is a Lock call
// that failed before its context ended. A history from before Class was
// recorded tells a call that waited in vain by its context's error.
func failedInsteadOfWaiting(e Event) bool {
	if e.Class == "" {
		return !strings.Contains(e.Err, context.DeadlineExceeded.Error())
	}
	return e.Class != LockTimedOut
}

// lockFailures reports every Lock call that failed instead of waiting.
func (c *checker) lockFailures(failures []Event) {
	for _, e := range failures {
		class := cmp.Or(e.Class, LockError)
		c.report(LockFailed, e.At, []int{e.Client}, "client %d's Lock call failed instead of waiting (%s): %s",
			e.Client, class, e.Err)
		c.v.LockFailures++
	}
}

// leaseOverlaps finds pairs of leases of different clients valid at once.
func (c *checker) leaseOverlaps(leases []*lease) {
	sorted := slices.Clone(leases)
	slices.SortFunc(sorted, func(a, b *lease) int { return cmp.Compare(a.start, b.start) })
	for i, a := range sorted {
		for _, b := range sorted[i+1:] {
			if b.start >= a.end {
				break // sorted by start: no later lease overlaps a either
			}
			if b.client == a.client || b.end <= b.start {
				continue
			}
			c.report(LeaseOverlap, b.start, []int{a.client, b.client},
				"client %d granted fence %d while client %d's lease (fence %d) was valid for another %v",
				b.client, b.fence, a.client, a.fence, a.end.Sub(b.start).Round(time.Microsecond))
		}
	}
}

// sectionOverlaps finds pairs of critical sections of different clients
// at once, and says whether one of them had outlived its lease.
func (c *checker) sectionOverlaps(sections []*section, byKey map[[2]uint64]*lease) {
	sorted := slices.Clone(sections)
	slices.SortFunc(sorted, func(a, b *section) int { return cmp.Compare(a.enter, b.enter) })
	for i, a := range sorted {
		for _, b := range sorted[i+1:] {
			if b.enter >= a.exit {
				break
			}
			if b.client == a.client {
				continue
			}
			l := byKey[[2]uint64{uint64(a.client), a.fence}]
			if l == nil || l.end > b.enter {
				c.report(SectionOverlap, b.enter, []int{a.client, b.client},
					"client %d (fence %d) entered its critical section while client %d (fence %d) was in its own: both leases valid",
					b.client, b.fence, a.client, a.fence)
				continue
			}
			// a's lease had ended, and its Done closed or its Until
			// passed, before b was granted: the lock held; a stayed in
			// its section after its lease because it was not running (the
			// clients do not look at Done inside the section). With no
			// client-pause fault under way, the machine stalled it.
			c.report(SectionOverlap, b.enter, []int{a.client, b.client},
				"client %d (fence %d) entered its critical section while client %d (fence %d) was in its own: "+
					"client %d's lease had ended %v before; it was still in its section, %v after entering it",
				b.client, b.fence, a.client, a.fence, a.client, b.enter.Sub(l.end).Round(time.Microsecond), b.enter.Sub(a.enter).Round(time.Microsecond))
			if x := &c.v.Violations[len(c.v.Violations)-1]; x.Limit == "" {
				x.Fault = "client stall (not injected)"
				x.Limit = limitClientPause
			}
		}
	}
}

// fenceOrder checks that every grant's fence is above those of all the
// grants before it.
func (c *checker) fenceOrder(leases []*lease) {
	sorted := slices.Clone(leases)
	slices.SortStableFunc(sorted, func(a, b *lease) int { return cmp.Compare(a.start, b.start) })
	// best[i] is the highest-fenced of sorted[:i+1].
	best := make([]*lease, len(sorted))
	for i, l := range sorted {
		best[i] = l
		if i > 0 && best[i-1].fence >= l.fence {
			best[i] = best[i-1]
		}
	}
	for _, l := range sorted {
		// Only a lease granted before l's Lock call began is known to
		// have been granted before l: one granted while the call was
		// under way may have been granted after it and told first (l's
		// key then lost early, which leaseOverlaps judges). So l is
		// judged against the highest fence granted before its call, not
		// the highest granted before it was told.
		// Without a fault during the call nothing can have lost l's key
		// early: a lease granted during the call was granted after l (or
		// while l held, which is no better), so l is judged against every
		// grant told before it.
		before := l.start
		if c.faultDuring(l.called, l.start) {
			before = l.called
		}
		n, _ := slices.BinarySearchFunc(sorted, before, func(m *lease, t Mono) int { return cmp.Compare(m.start, t) })
		if n == 0 {
			continue
		}
		if top := best[n-1]; l.fence <= top.fence {
			c.report(FenceRegression, l.start, []int{top.client, l.client},
				"client %d granted fence %d after client %d had been granted fence %d",
				l.client, l.fence, top.client, top.fence)
		}
	}
}

// writes checks the fenced register: no write accepted from a holder
// after one from a later holder (by grant order, whatever the fences say),
// and no refusal of the latest holder while its lease was valid.
func (c *checker) writes(accepted, refused []Event, byKey map[[2]uint64]*lease, leases []*lease) {
	grantOf := func(e Event) *lease { return byKey[[2]uint64{uint64(e.Client), e.Fence}] }
	var latest *lease // the latest-granted holder that has written
	var maxFence uint64
	var maxBy Event
	for _, w := range accepted {
		g := grantOf(w)
		switch {
		case w.Fence < maxFence:
			c.report(StaleWrite, w.At, []int{maxBy.Client, w.Client},
				"the register accepted fence %d from client %d after fence %d from client %d",
				w.Fence, w.Client, maxFence, maxBy.Client)
		case g != nil && latest != nil && g.start < latest.start && g.client != latest.client:
			c.report(StaleWrite, w.At, []int{latest.client, w.Client},
				"the register accepted a write from client %d (fence %d, granted first) after one from client %d (fence %d, granted later)",
				w.Client, w.Fence, latest.client, latest.fence)
		}
		if w.Fence > maxFence {
			maxFence, maxBy = w.Fence, w
		}
		if g != nil && (latest == nil || g.start > latest.start) {
			latest = g
		}
	}
	for _, r := range refused {
		g := grantOf(r)
		if g == nil {
			continue
		}
		current := r.At < g.end
		for _, l := range leases {
			// A later holder exists, or one with a higher fence granted
			// while g's Lock call was under way, which the server may
			// have granted after g: the refusal is right.
			later := l.start > g.start || l != g && l.fence > g.fence && l.start > g.called && c.faultDuring(g.called, g.start)
			if later && l.start < r.At {
				current = false
				break
			}
		}
		if current {
			c.report(HolderRefused, r.At, []int{r.Client},
				"the register refused client %d, the latest holder with a valid lease, fence %d: it had seen %d",
				r.Client, r.Fence, r.Max)
		} else {
			c.v.StaleRefused++
		}
	}
}

// lostUpdates finds acknowledged additions missing from the final set.
func (c *checker) lostUpdates(added map[string]Event, final []string) {
	have := make(map[string]bool, len(final))
	for _, x := range final {
		have[x] = true
	}
	lost := make([]Event, 0)
	for val, e := range added {
		if !have[val] {
			lost = append(lost, e)
		}
	}
	slices.SortFunc(lost, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	for _, e := range lost {
		c.report(LostUpdate, e.At, []int{e.Client},
			"client %d's addition %q was acknowledged but is not in the final set", e.Client, e.Value)
	}
}

// liveness sums up the recoveries and the LockFailed violations by kind
// of fault, in the order the kinds first came, against target; a last row
// with no fault holds the LockFailed violations outside every fault's
// window, if any.
func liveness(faults []*fault, rs []Recovery, vs []Violation, target time.Duration) []Liveness {
	var out []Liveness
	index := map[string]int{}
	row := func(kind string) *Liveness {
		i, ok := index[kind]
		if !ok {
			i = len(out)
			index[kind] = i
			out = append(out, Liveness{Fault: kind})
		}
		return &out[i]
	}
	fromHeal := map[string][]time.Duration{}
	fromStart := map[string][]time.Duration{}
	for i, r := range rs {
		kind := faults[i].kind
		l := row(kind)
		l.Faults++
		if r.FromHeal >= 0 {
			l.Followed++
			fromHeal[kind] = append(fromHeal[kind], r.FromHeal)
		}
		if r.FromHeal < 0 && i < len(rs)-1 || r.FromHeal > target {
			l.OverTarget++ // the last fault may have had no time for a grant
		}
		if r.FromStart >= 0 {
			fromStart[kind] = append(fromStart[kind], r.FromStart)
		}
	}
	for _, x := range vs {
		if x.Kind != LockFailed {
			continue
		}
		kind, _, _ := strings.Cut(x.Fault, " ")
		if x.Fault == "" {
			kind = ""
		}
		row(kind).LockFailed++
	}
	for i := range out {
		l := &out[i]
		if ds := fromHeal[l.Fault]; len(ds) > 0 {
			slices.Sort(ds)
			l.HealMedian, l.HealP99, l.HealMax = ds[len(ds)/2], percentile(ds, 99), ds[len(ds)-1]
		}
		if ds := fromStart[l.Fault]; len(ds) > 0 {
			slices.Sort(ds)
			l.StartMedian, l.StartMax = ds[len(ds)/2], ds[len(ds)-1]
		}
	}
	if i, ok := index[""]; ok && i != len(out)-1 { // the row of no fault goes last
		row := out[i]
		out = append(slices.Delete(out, i, i+1), row)
	}
	return out
}

// percentile returns the p-th percentile of sorted, by nearest rank.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 × n)
	return sorted[max(rank, 1)-1]
}

// recoveries measures, for every fault, the time to the next grant.
func recoveries(faults []*fault, leases []*lease) []Recovery {
	starts := make([]Mono, len(leases))
	for i, l := range leases {
		starts[i] = l.start
	}
	slices.Sort(starts)
	next := func(t Mono) time.Duration {
		i, _ := slices.BinarySearch(starts, t+1)
		if i == len(starts) {
			return -1
		}
		return starts[i].Sub(t)
	}
	out := make([]Recovery, 0, len(faults))
	for _, f := range faults {
		out = append(out, Recovery{Fault: f.name, At: f.start, Lasted: f.end.Sub(f.start),
			FromStart: next(f.start), FromHeal: next(f.end)})
	}
	return out
}
