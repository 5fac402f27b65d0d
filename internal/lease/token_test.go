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

func TestIsToken(t *testing.T) {
	labelled := NewToken(dlock.WithLabel(context.Background(), "host=a"))
	for _, c := range []struct {
		s    string
		want bool
	}{
		{NewToken(context.Background()), true},
		{labelled, true},
		{labelled[:tokenChars] + "~", true},
		{"", false},
		{"10.0.0.7:8080", false},
		{strings.Repeat("a", tokenChars-1), false},
		{strings.Repeat("a", tokenChars+1), false},
		{strings.Repeat("a", tokenChars-1) + "!", false},
		{strings.Repeat("a", tokenChars) + "x~label", false},
		{"=FairMutex=" + labelled, false},
	} {
		if got := IsToken(c.s); got != c.want {
			t.Errorf("IsToken(%q) = %v, want %v", c.s, got, c.want)
		}
	}
}
