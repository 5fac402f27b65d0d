package chaos

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check of the fenced register, beside the checker's
// own: the clients' calls to the register, each from the moment it was
// sent to the moment its reply arrived, must be a history that a fenced
// register executing one call at a time could have produced
// (porcupine, https://github.com/anishathalye/porcupine). The model's state is the
// highest fence accepted and the value written with it. A write is
// accepted if and only if its fence is at least that fence, and then
// becomes the state; a read returns the state. So a write reported
// accepted is seen by every read that begins after its reply, unless a
// higher fence came between; a refused write is never seen; and a write
// refused while its fence was the highest, or accepted below it, is a
// violation too.

// regInput is a call to the register.
type regInput struct {
	write bool
	fence uint64 // a write's
	value string // a write's
}

// regOutput is the register's reply, as the client received it.
type regOutput struct {
	known    bool   // the reply arrived: false for a call pending when its client stopped
	accepted bool   // to a write
	fence    uint64 // to a read
	value    string // to a read
}

// regState is the model's state: the highest fence accepted and the value
// written with it.
type regState struct {
	fence uint64
	value string
}

func (s regState) String() string {
	if s.fence == 0 && s.value == "" {
		return "empty"
	}
	return fmt.Sprintf("fence %d = %q", s.fence, s.value)
}

// registerStep is the model's step function.
func registerStep(state, input, output any) (bool, any) {
	s, in, out := state.(regState), input.(regInput), output.(regOutput)
	if !in.write {
		// A read's reply, if it came, must be the state; a read changes nothing.
		return !out.known || (regState{out.fence, out.value} == s), s
	}
	accept := in.fence >= s.fence
	next := s
	if accept {
		next = regState{in.fence, in.value}
	}
	if out.known && out.accepted != accept {
		return false, s
	}
	return true, next
}

// registerModel is the model of the register, starting from init.
func registerModel(init regState) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: registerStep,
		DescribeOperation: func(input, output any) string {
			return describeRegOp(input.(regInput), output.(regOutput))
		},
		DescribeState: func(state any) string { return state.(regState).String() },
	}
}

func describeRegOp(in regInput, out regOutput) string {
	var reply string
	switch {
	case !out.known:
		reply = "no reply"
	case in.write && out.accepted:
		reply = "accepted"
	case in.write:
		reply = "refused"
	default:
		reply = regState{out.fence, out.value}.String()
	}
	if in.write {
		return fmt.Sprintf("write fence %d = %q: %s", in.fence, in.value, reply)
	}
	return "read: " + reply
}

// registerOps returns the clients' calls to the register in evs, in the
// order they were sent. A call whose reply never came (its client stopped
// or crashed first) returns at the end of time, with its outcome unknown.
func registerOps(evs []Event) []porcupine.Operation {
	var ops []porcupine.Operation
	pending := map[int]int{} // client -> its pending call, an index in ops
	for _, e := range evs {
		switch e.Op {
		case OpRegRead, OpRegWrite:
			in := regInput{write: e.Op == OpRegWrite}
			if in.write {
				in.fence, in.value = e.Fence, e.Value
			}
			// A call made while one is pending leaves that one unknown.
			pending[e.Client] = len(ops)
			ops = append(ops, porcupine.Operation{ClientId: e.Client, Input: in, Call: int64(e.At),
				Output: regOutput{}, Return: math.MaxInt64})
		case OpRegReply:
			i, ok := pending[e.Client]
			if !ok {
				continue // a reply to no call: nothing to check it against
			}
			delete(pending, e.Client)
			op := &ops[i]
			out := regOutput{known: true}
			if op.Input.(regInput).write {
				out.accepted = e.Err == ""
			} else {
				out.fence, out.value = e.Fence, e.Value
			}
			op.Output, op.Return = out, int64(e.At)
		}
	}
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int {
		switch {
		case a.Call < b.Call:
			return -1
		case a.Call > b.Call:
			return 1
		}
		return 0
	})
	return ops
}

// A regSegment is a stretch of the register's history that can be checked
// on its own, from a known state.
type regSegment struct {
	init regState
	ops  []porcupine.Operation
}

// registerSegments cuts ops (sorted by call) after every read that
// overlaps no other call: every call before it returned before it began,
// every call after it began after it returned. Any linearization puts
// that read after everything before it and before everything after it,
// and the read, if the history is linearizable, saw the state there. So
// the history is linearizable if and only if each segment is, from the
// state the read that ends the one before saw. This bounds the checker's
// work by the longest stretch of overlapping calls instead of the whole
// run: the clients call the register while they hold the lock, so the
// stretches are short but where two clients were in their critical
// sections at once. (There is one register, so no partition by key.)
func registerSegments(ops []porcupine.Operation) []regSegment {
	var segs []regSegment
	init := regState{}
	start := 0
	maxReturn := int64(math.MinInt64) // of ops[:i]
	for i, op := range ops {
		out := op.Output.(regOutput)
		cut := !op.Input.(regInput).write && out.known && maxReturn < op.Call &&
			(i == len(ops)-1 || ops[i+1].Call > op.Return)
		maxReturn = max(maxReturn, op.Return)
		if cut {
			segs = append(segs, regSegment{init: init, ops: ops[start : i+1]})
			init, start = regState{out.fence, out.value}, i+1
		}
	}
	if start < len(ops) {
		segs = append(segs, regSegment{init: init, ops: ops[start:]})
	}
	return segs
}

// linearizable checks the clients' calls to the register, recorded in
// evs, for linearizability, within budget; it sets the verdict's Register
// and reports a NotLinearizable violation for the first segment that is
// not, or a LinearizabilityUnknown one when the budget ran out first.
// start is the run's start, for the times in the details.
func (c *checker) linearizable(evs []Event, start Mono, budget time.Duration) {
	ops := registerOps(evs)
	c.v.RegisterOps = len(ops)
	c.v.Register = RegisterLinearizable
	deadline := time.Now().Add(budget)
	for _, seg := range registerSegments(ops) {
		left := time.Until(deadline)
		res := porcupine.Unknown
		if left > 0 {
			res = porcupine.CheckOperationsTimeout(registerModel(seg.init), seg.ops, left)
		}
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Illegal:
			c.v.Register = RegisterNotLinearizable
			c.report(NotLinearizable, Mono(seg.ops[0].Call), segmentClients(seg),
				"the fenced register's history is not linearizable: no order of these calls, starting from %s, "+
					"explains their replies: %s", seg.init, describeSegment(seg, start))
		default:
			c.v.Register = RegisterUnknown
			c.report(LinearizabilityUnknown, Mono(seg.ops[0].Call), segmentClients(seg),
				"the linearizability check of the fenced register gave up after %v, at a stretch of %d overlapping "+
					"calls; the history is not known to be linearizable", budget, len(seg.ops))
		}
		return
	}
}

func segmentClients(seg regSegment) []int {
	var cs []int
	for _, op := range seg.ops {
		if !slices.Contains(cs, op.ClientId) {
			cs = append(cs, op.ClientId)
		}
	}
	slices.Sort(cs)
	return cs
}

// describeSegment lists the first calls of seg, each with its client, its
// reply and its times from the run's start.
func describeSegment(seg regSegment, start Mono) string {
	const most = 8
	var parts []string
	for i, op := range seg.ops {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(seg.ops)-most))
			break
		}
		ret := "never"
		if op.Return != math.MaxInt64 {
			ret = Mono(op.Return).Sub(start).Round(time.Microsecond).String()
		}
		parts = append(parts, fmt.Sprintf("client %d %s (%v to %s)", op.ClientId,
			describeRegOp(op.Input.(regInput), op.Output.(regOutput)),
			Mono(op.Call).Sub(start).Round(time.Microsecond), ret))
	}
	return strings.Join(parts, "; ")
}
