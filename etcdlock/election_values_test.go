package etcdlock_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
)

// shortID returns a 22-character URL-safe base64 ID, the shape of a
// shortuuid or of 16 random bytes encoded: the shape of an owner token.
func shortID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// A leader whose value has the shape of an owner token (an instance ID of
// 22 URL-safe base64 characters, say) is named by Leader and Observe, once
// its Campaign has returned.
func TestIntegrationElectionTokenShapedValue(t *testing.T) {
	e := sharedEtcd(t)
	name := "compat/" + t.Name()
	ctx := ctxFor(t, time.Minute)
	obs := connect(t, []string{e.Addr()}).NewElection(name, etcdlock.WithTTL(interopTTL))
	seen := obs.Observe(ctx)
	for _, value := range []string{shortID(t), shortID(t) + "~pod-7"} {
		de := connect(t, []string{e.Addr()}).NewElection(name, etcdlock.WithTTL(interopTTL))
		l, err := de.Campaign(ctx, value)
		if err != nil {
			t.Fatal(err)
		}
		want := dlock.Leader{Value: value, Term: l.Fence()}
		if ld, err := obs.Leader(ctx); err != nil || ld != want {
			t.Errorf("Leader = %+v, %v; want %+v", ld, err, want)
		}
		select {
		case ld := <-seen:
			if ld != want {
				t.Errorf("Observe = %+v; want %+v", ld, want)
			}
		case <-time.After(interopTTL):
			t.Errorf("Observe did not name the leader %+v within %v", want, interopTTL)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if ld, err := obs.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
			t.Errorf("Leader after the resignation = %+v, %v; want ErrNoLeader", ld, err)
		}
	}

	// A concurrency candidate's such value is named once it has
	// Proclaimed it: as first written, it reads as a token.
	ce := etcdElection(t, e.Addr(), name)
	value := shortID(t)
	if err := ce.Campaign(ctx, value); err != nil {
		t.Fatal(err)
	}
	if ld, err := obs.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Errorf("Leader of a concurrency candidate with a token-shaped value = %+v, %v; want ErrNoLeader until it Proclaims", ld, err)
	}
	if err := ce.Proclaim(ctx, value); err != nil {
		t.Fatal(err)
	}
	want := dlock.Leader{Value: value, Term: uint64(ce.Rev())}
	if ld, err := obs.Leader(ctx); err != nil || ld != want {
		t.Errorf("Leader after Proclaim = %+v, %v; want %+v", ld, err, want)
	}
	if err := ce.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}
