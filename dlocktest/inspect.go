package dlocktest

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// inspectShowsHolder checks that Inspect names the holder by its token,
// with the label its context carried, and the free lock after release.
func (s *suite) inspectShowsHolder(t *testing.T) {
	key := uniqueKey(t)
	l := s.lockers(t, key, 1, Options{TTL: 5 * time.Second})[0]
	label := "host=conformance pid=42 start=2026-11-25T00:00:00Z ünïcode"
	ctx := dlock.WithLabel(ctxFor(t, 10*time.Second), label+"\n")
	lease := mustLock(t, ctx, l)
	if !strings.HasSuffix(lease.Token(), label) {
		t.Errorf("Token() = %q, want it to end with the label %q", lease.Token(), label)
	}

	info := s.b.Inspect(t, key)
	if !info.Held() || len(info.Holders) != 1 {
		t.Fatalf("Inspect while held: %+v, want one holder", info)
	}
	h := info.Holders[0]
	switch info.Kind {
	case dlock.KindMutex, dlock.KindFairMutex:
		if h.Owner != lease.Token() || h.Label != label {
			t.Errorf("holder %q labelled %q, want %q labelled %q", h.Owner, h.Label, lease.Token(), label)
		}
	case dlock.KindReentrantMutex:
		// Its holder is shown by the SHA-1 of its token, with no label
		// (dlock.Holder, dlock.WithLabel).
		if sum := sha1.Sum([]byte(lease.Token())); h.Owner != hex.EncodeToString(sum[:]) || h.Label != "" {
			t.Errorf("reentrant holder %q labelled %q, want the SHA-1 of %q, unlabelled", h.Owner, h.Label, lease.Token())
		}
	default:
		t.Errorf("kind %q, want a kind of mutex", info.Kind)
	}
	if h.Mode != dlock.ModeExclusive {
		t.Errorf("mode %q, want %q", h.Mode, dlock.ModeExclusive)
	}
	if info.Fence != 0 && info.Fence < lease.Fence() {
		t.Errorf("Inspect's fence %d is below the holder's %d", info.Fence, lease.Fence())
	}
	if info.TTL > 5*time.Second {
		t.Errorf("TTL %v exceeds the lease's 5s", info.TTL)
	}

	if err := lease.Release(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if info := s.b.Inspect(t, key); info.Held() || info.Kind != dlock.KindFree {
		t.Errorf("Inspect after release: %+v, want free", info)
	}
}
