package dblease

import (
	"context"
	"errors"
	"testing"

	"github.com/dlock-go/dlock/internal/background"
)

// A clean-up look is done once the row is freed, or once the connection
// that may still take it has ended; it looks again while that connection
// lives or the database cannot be reached, and gives up on a statement
// the database refuses (the table is gone, or not a lock table).
func TestLookAgainVerdict(t *testing.T) {
	refused := errors.New("test: no such table")
	unreachable := errors.New("test: connection refused")
	for _, tc := range []struct {
		name         string
		freed, alive bool
		err          error
		want         background.Outcome
	}{
		{"freed", true, true, nil, background.Cleaned},
		{"not held, connection ended", false, false, nil, background.Cleaned},
		{"not held, connection alive", false, true, nil, background.Unreachable},
		{"refused", false, false, refused, background.Nothing},
		{"unreachable", false, false, unreachable, background.Unreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Dialect{
				Faults: Faults{Pkg: "test"},
				Look: func(context.Context, string, string, int64) (bool, bool, error) {
					return tc.freed, tc.alive, tc.err
				},
				IsServerError: func(err error) bool { return errors.Is(err, refused) },
			}, ClientConfig{}, nil)
			if got := c.lookAgain(context.Background(), "l", "token", 7); got != tc.want {
				t.Errorf("lookAgain = %v; want %v", got, tc.want)
			}
		})
	}
}
