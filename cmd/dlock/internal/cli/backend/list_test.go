package backend

import "testing"

// globEscape makes every character of a prefix match itself in Redis's
// SCAN MATCH patterns.
func TestGlobEscape(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"jobs/nightly", "jobs/nightly"},
		{"a*b", `a\*b`},
		{"a?b", `a\?b`},
		{"[x]", `\[x\]`},
		{`back\slash`, `back\\slash`},
		{"ü-^%_", "ü-^%_"},
	} {
		if got := globEscape(tt.in); got != tt.want {
			t.Errorf("globEscape(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
