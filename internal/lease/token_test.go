package lease

import (
	"context"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
)

func TestTokenLabel(t *testing.T) {
	plain := NewToken(context.Background())
	if len(plain) != tokenChars || Label(plain) != "" {
		t.Errorf("NewToken without a label = %q (label %q), want %d characters and no label", plain, Label(plain), tokenChars)
	}
	ctx := dlock.WithLabel(context.Background(), "host=a~b pid=1")
	tok := NewToken(ctx)
	if got := Label(tok); got != "host=a~b pid=1" {
		t.Errorf("Label(%q) = %q", tok, got)
	}
	if got := Label("=FairMutex=" + tok); got != "host=a~b pid=1" {
		t.Errorf("a FairMutex token's label = %q", got)
	}
	for _, owner := range []string{"worker~1", "~", "", "short~label", strings.Repeat("!", tokenChars) + "~x"} {
		if got := Label(owner); got != "" {
			t.Errorf("Label(%q) = %q, want none: not a token NewToken made", owner, got)
		}
	}
}
