package dlock_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlock-go/dlock"
)

func TestWithLabel(t *testing.T) {
	if _, ok := dlock.LabelFrom(context.Background()); ok {
		t.Error("LabelFrom of a bare context reports a label")
	}
	for _, c := range []struct{ in, want string }{
		{"host=a pid=1", "host=a pid=1"},
		{"line\nbreak\x00nul\ttab", "line break nul tab"},
		{"  padded \n", "padded"},
		{"bad \xff byte", "bad ? byte"},
		{"", ""},
	} {
		got, _ := dlock.LabelFrom(dlock.WithLabel(context.Background(), c.in))
		if got != c.want {
			t.Errorf("WithLabel(%q) carries %q, want %q", c.in, got, c.want)
		}
	}
	long := strings.Repeat("é", dlock.MaxLabelBytes) // 2 bytes a rune
	got, _ := dlock.LabelFrom(dlock.WithLabel(context.Background(), long))
	if len(got) > dlock.MaxLabelBytes || len(got) < dlock.MaxLabelBytes-1 || !utf8.ValidString(got) {
		t.Errorf("a long label became %d bytes (valid UTF-8: %v), want at most %d, cut at a rune", len(got), utf8.ValidString(got), dlock.MaxLabelBytes)
	}
}
