package dlock

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUnavailableError(t *testing.T) {
	cause := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	since := time.Date(2026, 11, 28, 14, 3, 7, 123456789, time.UTC)
	err := fmt.Errorf("redislock: lock %q: %w", "job", &UnavailableError{Service: "redis 127.0.0.1:6379", Since: since, Err: cause})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, cause) || errors.Is(err, ErrNotObtained) {
		t.Fatalf("%v: want it to match ErrUnavailable and its cause, not ErrNotObtained", err)
	}
	var u *UnavailableError
	if !errors.As(err, &u) || u.Service != "redis 127.0.0.1:6379" || !u.Since.Equal(since) {
		t.Fatalf("errors.As = %+v", u)
	}
	if want := "redis 127.0.0.1:6379 unavailable since 14:03:07.123Z: dial tcp"; !strings.Contains(err.Error(), want) {
		t.Errorf("%q does not contain %q", err, want)
	}
	made := Unavailable("etcd 127.0.0.1:2379", time.Now().Add(-6200*time.Millisecond), cause)
	if !strings.Contains(made.Error(), "(6.2s)") {
		t.Errorf("%q does not say for how long, rounded to tenths of a second", made)
	}
}

func TestReadable(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{333333333 * time.Nanosecond, 333 * time.Millisecond},
		{6234 * time.Millisecond, 6200 * time.Millisecond},
		{90400 * time.Millisecond, 90 * time.Second},
	} {
		if got := readable(c.in); got != c.want {
			t.Errorf("readable(%v) = %v; want %v", c.in, got, c.want)
		}
	}
}
