package election

import (
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{Token: "tok", Term: 1, Value: "10.0.0.7:8080"},
		{Token: "tok", Term: 1<<53 - 1, Value: ""},
		{Token: "t", Term: 0, Value: "a value\nwith lines\n"},
	} {
		got, err := Parse(r.String())
		if err != nil || got != r {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", r.String(), got, err, r)
		}
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	for _, s := range []string{"", "tok", "12\n", "x\ntok\nv", "12\n\nvalue", "-1\ntok\nv", "1\ntok"} {
		if r, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %+v; want an error", s, r)
		}
	}
}

func TestPoll(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{30 * time.Second, MaxPoll},
		{time.Second, 250 * time.Millisecond},
		{10 * time.Millisecond, 5 * time.Millisecond},
	} {
		if got := Poll(c.ttl); got != c.want {
			t.Errorf("Poll(%v) = %v; want %v", c.ttl, got, c.want)
		}
	}
}
