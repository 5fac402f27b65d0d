package lease

import (
	"context"
	"strings"

	"github.com/dlock-go/dlock"
)

// labelMark separates a token's random part from the label that follows
// it. It is not in the alphabet of dlock.NewToken.
const labelMark = "~"

// NewToken returns a fresh owner token for a grant taken with ctx: a
// dlock.NewToken, followed by the label that ctx carries (dlock.WithLabel),
// if any.
func NewToken(ctx context.Context) string {
	t := dlock.NewToken()
	if label, ok := dlock.LabelFrom(ctx); ok {
		t += labelMark + label
	}
	return t
}

// Label returns the label stored in a token that NewToken made, or "" if
// it has none. A token that does not start with a random part of
// NewToken's length (a reentrant owner, say) has none, whatever it holds.
func Label(token string) string {
	i := strings.Index(token, labelMark)
	if i < 0 {
		return ""
	}
	random := token[:i]
	random = random[max(0, len(random)-tokenChars):]
	if len(random) != tokenChars || strings.ContainsFunc(random, notTokenRune) {
		return ""
	}
	return token[i+len(labelMark):]
}

// tokenChars is the length of a dlock.NewToken.
const tokenChars = (dlock.TokenBytes*8 + 5) / 6

func notTokenRune(r rune) bool {
	return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}

// IsToken reports whether s has the shape of a token that NewToken made:
// a random part of NewToken's length, alone or followed by a label.
func IsToken(s string) bool {
	if len(s) < tokenChars || strings.ContainsFunc(s[:tokenChars], notTokenRune) {
		return false
	}
	return len(s) == tokenChars || strings.HasPrefix(s[tokenChars:], labelMark)
}
