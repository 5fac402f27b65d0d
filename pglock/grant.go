package pglock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/internal/dblease"
)

// newGrant returns a Mutex's lease: the row holds its token. The caller
// registers it with the client (see dblease.Grant.Keep).
func newGrant(ctx context.Context, m *Mutex, token string, fence uint64, until time.Time) *dblease.Grant {
	return dblease.NewGrant(ctx, m.c.leases, m.ev, m.name, token, fence, until, m.cfg.Config)
}
