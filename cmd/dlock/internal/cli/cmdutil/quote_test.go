package cmdutil

import (
	"errors"

	"strings"
	"testing"

	"github.com/dlock-go/dlock"
)

func TestQuote(t *testing.T) {
	long := strings.Repeat("a", 10000)
	cases := []struct{ in, want string }{
		{"nightly", `"nightly"`},
		{"a\nb", `"a\nb"`},
		{long, `"` + strings.Repeat("a", 100) + `…" (10000 bytes)`},
		// A cut never splits a character: 33 three-byte runes are 99 bytes.
		{strings.Repeat("€", 40), `"` + strings.Repeat("€", 33) + `…" (120 bytes)`},
	}
	for _, c := range cases {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%.20q) = %q, want %q", c.in, got, c.want)
		}
	}
	msg := Shorten(`lib: lock "`+long+`" and dlock:{`+long+`}`, long)
	if len(msg) > 400 || strings.Count(msg, "(10000 bytes)") != 2 {
		t.Errorf("Shorten left %d bytes: %.300s", len(msg), msg)
	}
}

func TestReason(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{dlock.Lost(dlock.ErrTakenOver), "lock deleted or taken over by another owner"},
		{dlock.NotObtained(errors.New("redislock: a Mutex cannot take the name")), "redislock: a Mutex cannot take the name"},
		{dlock.ErrLost, "lock lost"},
		{dlock.NotObtained(errors.New("redlock: acquire of x: dlock: y")), "redlock: acquire of x: y"},
		{errors.New(`redis: key "dlock:{x}" gone`), `redis: key "dlock:{x}" gone`},
	}
	for _, c := range cases {
		if got := Reason(c.err); got != c.want {
			t.Errorf("Reason(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}
