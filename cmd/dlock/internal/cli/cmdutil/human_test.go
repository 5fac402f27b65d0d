package cmdutil

import (
	"testing"
	"time"
)

func TestHuman(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{time.Second / 3, "333ms"},
		{10 * time.Second / 3, "3.33s"},
		{100 * time.Second / 3, "33.3s"},
		{150*time.Second + 400*time.Millisecond, "2m30s"},
		{1500 * time.Nanosecond, "2µs"},
		{-time.Second / 3, "-333ms"},
	} {
		if got := Human(tt.d); got != tt.want {
			t.Errorf("Human(%v) = %q; want %q", tt.d, got, tt.want)
		}
	}
}

func TestDownUp(t *testing.T) {
	for _, tt := range []struct {
		d        time.Duration
		down, up string
	}{
		{10 * time.Second / 3, "3.33s", "3.34s"},
		{3003 * time.Millisecond, "3s", "3.01s"},
		{3 * time.Second, "3s", "3s"},
		{time.Second / 3, "333ms", "334ms"},
	} {
		if got := Human(Down(tt.d)); got != tt.down {
			t.Errorf("Human(Down(%v)) = %q; want %q", tt.d, got, tt.down)
		}
		if got := Human(Up(tt.d)); got != tt.up {
			t.Errorf("Human(Up(%v)) = %q; want %q", tt.d, got, tt.up)
		}
	}
}
