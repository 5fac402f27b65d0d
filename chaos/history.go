package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
)

// An Op is the kind of a history event.
type Op string

// The operations a history records. Client processes record the lock's
// side (acquire to done) and the workload's acknowledgements; the
// protected resource records what it accepted; the fault scheduler
// records its faults.
const (
	OpAcquire  Op = "acquire"  // a Lock call began
	OpGrant    Op = "grant"    // Lock returned a lease: Fence, Until
	OpRenew    Op = "renew"    // the lease's Until moved to Until
	OpEnter    Op = "enter"    // the client entered its critical section
	OpExit     Op = "exit"     // and left it
	OpRelease  Op = "release"  // a Release call began; Err is its result
	OpDone     Op = "done"     // the lease's Done closed; Err is the lease's Err
	OpFail     Op = "fail"     // a Lock call returned an error: Err says why, Class what kind (see LockClass)
	OpAdded    Op = "added"    // the unfenced set acknowledged the addition of Value
	OpWrite    Op = "write"    // the fenced register accepted a write (Fence, Value)
	OpRefused  Op = "refused"  // the fenced register refused a write: Fence below Max
	OpFinal    Op = "final"    // the unfenced set's final contents (Values)
	OpFault    Op = "fault"    // a fault began: Fault, Target
	OpHeal     Op = "heal"     // the fault ended
	OpStart    Op = "start"    // the run began (after the servers were up)
	OpStop     Op = "stop"     // the run ended
	OpLog      Op = "log"      // a note: Value
	OpCrashed  Op = "crashed"  // a client process exited unexpectedly: Err
	OpSnapshot Op = "snapshot" // a client read the unfenced set: Values

	// A client's calls to the fenced register, as the client saw them:
	// each call is recorded when it is sent and its reply when it
	// arrives, for the linearizability check. A client has at most one
	// call pending.
	OpRegRead  Op = "reg-read"  // a client asked the register for its value
	OpRegWrite Op = "reg-write" // a client sent the register a write: Fence, Value
	OpRegReply Op = "reg-reply" // the register answered the pending call: to a read, the Fence and Value it holds; to a write, Err "" (accepted) or "refused" with Max
)

// The classes of a failed Lock call (OpFail's Class). Only LockTimedOut
// is a Lock that waited: the others failed instead of waiting.
const (
	LockTimedOut    = "timeout"      // the call's own context ended (it waited 10 TTL) before a grant
	LockUnavailable = "unavailable"  // it failed with an error matching dlock.ErrUnavailable before its context ended
	LockNotObtained = "not-obtained" // it failed with an error matching dlock.ErrNotObtained, and not ErrUnavailable, before its context ended
	LockError       = "error"        // it failed with any other error before its context ended
)

// An Event is one entry of a history.
type Event struct {
	At     Mono     `json:"at"`
	Op     Op       `json:"op"`
	Client int      `json:"client,omitempty"` // 1-based; 0 for the harness
	Fence  uint64   `json:"fence,omitempty"`
	Until  Mono     `json:"until,omitempty"`
	Max    uint64   `json:"max,omitempty"`
	Value  string   `json:"value,omitempty"`
	Values []string `json:"values,omitempty"`
	Err    string   `json:"err,omitempty"`
	Fault  string   `json:"fault,omitempty"`
	Target string   `json:"target,omitempty"`
	Class  string   `json:"class,omitempty"`
}

func (e Event) String() string {
	b, _ := json.Marshal(e) // an Event always marshals
	return string(b)
}

// A History is the record of one run: events from every process on one
// monotonic clock. It is safe for concurrent use.
type History struct {
	mu     sync.Mutex
	events []Event
	notify func(Event)
}

// Add appends e, stamping it with the current time if e.At is zero.
func (h *History) Add(e Event) {
	if e.At == 0 {
		e.At = Now()
	}
	h.mu.Lock()
	h.events = append(h.events, e)
	notify := h.notify
	h.mu.Unlock()
	if notify != nil {
		notify(e)
	}
}

// Events returns the events recorded so far, ordered by time (events with
// the same time keep the order they were added in).
func (h *History) Events() []Event {
	h.mu.Lock()
	evs := slices.Clone(h.events)
	h.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b Event) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return evs
}

// Len returns the number of events recorded so far.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events)
}

// WriteJSONLines writes the history, in time order, one JSON event a line.
func (h *History) WriteJSONLines(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, e := range h.Events() {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}

// ReadHistory reads a history written by WriteJSONLines.
func ReadHistory(r io.Reader) (*History, error) {
	h := &History{}
	dec := json.NewDecoder(r)
	for n := 1; dec.More(); n++ {
		var e Event
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("chaos: history event %d: %w", n, err)
		}
		if e.Op == "" || e.At == 0 {
			return nil, fmt.Errorf("chaos: history event %d has no op or time: %v", n, e)
		}
		h.events = append(h.events, e)
	}
	return h, nil
}
