package fence

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// Header is the HTTP header that carries a fence, in decimal: Transport
// sets it, and Handler reads it.
const Header = "Dlock-Fence"

// Handler returns a handler that admits a request to next only if its
// fence, from the Dlock-Fence header, is not stale for the resource that
// resource(r) names: store records it as the highest accepted, in one
// atomic step with the decision. Otherwise Handler answers itself:
//
//   - 400 Bad Request if the header is missing or not a fence (a decimal
//     from 1 to 2^63-1), or resource returns "" or a name the store does
//     not take (an SQL store's are at most 255 bytes), or the store was
//     made with WithMaxJump and the fence is further above the newest
//     than it allows;
//   - 409 Conflict if a higher fence has been accepted for the resource: a
//     later holder of the lock has written, and this request's lease is
//     no longer current;
//   - 503 Service Unavailable if store fails; the body does not say how,
//     since the store's error may name its tables or addresses. A Redis
//     store on a server that does not persist every write fails so on
//     every request (see NewRedis): a service may call its store's
//     Advance once when it starts, to see such an error early.
//
// The body is one line of plain text saying why. Requests for one
// resource run next one at a time in this process, in the order they
// were admitted, so a stale request admitted just before a newer one
// finishes before the newer one starts. A request whose context ends
// while it waits for its turn (its client has gone) is answered 503
// without being checked or admitted. Several processes sharing a Redis
// or SQL store refuse stale fences alike, but do not take turns: their
// handlers must write to a resource that checks the fence again (an SQL
// guard in the same transaction) if two admitted writes may not overlap.
//
// Handler trusts the fence a request carries: it cannot tell a holder's
// from a forged one. The endpoint must authenticate its writers (put
// Handler behind the service's authentication, and admit only the
// lock's holders). A single request with a fence far above the lock's,
// such as 2^63-1, would otherwise be admitted and make every real
// holder's requests stale (409) from then on, across restarts with a
// Redis or SQL store, until an operator resets the resource's record
// (see Resetter; "dlock fence reset" for the command's guards). A store
// made with WithMaxJump refuses such a fence, within the bound it sets.
func Handler(store Store, resource func(r *http.Request) string, next http.Handler) http.Handler {
	return &handler{store: store, resource: resource, next: next, turns: map[string]*turn{}}
}

type handler struct {
	store    Store
	resource func(*http.Request) string
	next     http.Handler

	mu    sync.Mutex
	turns map[string]*turn // the resources with a request in flight
}

// A turn serializes the requests of one resource: a request takes it by
// sending into its channel, and gives it up by receiving.
type turn struct {
	ch    chan struct{}
	users int // guarded by handler.mu
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	values := r.Header.Values(Header)
	if len(values) != 1 {
		http.Error(w, fmt.Sprintf("fence: want one %s header with the fence of the lease under which the request writes; got %d", Header, len(values)), http.StatusBadRequest)
		return
	}
	f, err := Parse(values[0])
	if err != nil {
		http.Error(w, fmt.Sprintf("fence: header %s is %q: want the lease's fence, a decimal number from 1 to 2^63-1", Header, values[0]), http.StatusBadRequest)
		return
	}
	res := h.resource(r)
	if res == "" {
		http.Error(w, "fence: the request names no resource", http.StatusBadRequest)
		return
	}
	t, err := h.enter(r.Context(), res)
	if err != nil {
		// The client has gone, or the server is shutting down.
		http.Error(w, "fence: the request ended while it waited for its turn", http.StatusServiceUnavailable)
		return
	}
	defer h.leave(res, t)
	err = h.store.Advance(r.Context(), res, f)
	var stale *StaleError
	var high *TooHighError
	var bad badInput
	switch {
	case errors.As(err, &stale):
		http.Error(w, stale.Error(), http.StatusConflict)
	case errors.As(err, &high):
		http.Error(w, high.Error(), http.StatusBadRequest)
	case errors.As(err, &bad):
		http.Error(w, bad.Error(), http.StatusBadRequest)
	case err != nil:
		// The store's error (table names, addresses) is for the
		// operator, who sees it through the store's observer.
		http.Error(w, "fence: the fence could not be checked; try again later", http.StatusServiceUnavailable)
	default:
		h.next.ServeHTTP(w, r)
	}
}

// enter waits for res's turn, or until ctx ends.
func (h *handler) enter(ctx context.Context, res string) (*turn, error) {
	h.mu.Lock()
	t := h.turns[res]
	if t == nil {
		t = &turn{ch: make(chan struct{}, 1)}
		h.turns[res] = t
	}
	t.users++
	h.mu.Unlock()
	select {
	case t.ch <- struct{}{}:
		return t, nil
	case <-ctx.Done():
		h.forget(res, t)
		return nil, ctx.Err()
	}
}

// leave ends res's turn.
func (h *handler) leave(res string, t *turn) {
	<-t.ch
	h.forget(res, t)
}

// forget drops a user of t, and forgets res when no request waits for it.
func (h *handler) forget(res string, t *turn) {
	h.mu.Lock()
	if t.users--; t.users == 0 {
		delete(h.turns, res)
	}
	h.mu.Unlock()
}

// A Transport is an http.RoundTripper that sets the Dlock-Fence header of
// every request to Fence, the fence of the lease under which the client
// writes, and sends it with Base (http.DefaultTransport if nil). It does
// not change the caller's request. A Transport with a zero Fence fails
// every request: no lease gives fence 0.
type Transport struct {
	Fence uint64
	Base  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.Fence == 0 {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, errors.New("fence: Transport with fence 0: set Fence to the lease's Fence()")
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set(Header, strconv.FormatUint(t.Fence, 10))
	return base.RoundTrip(r2)
}
