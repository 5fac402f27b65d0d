package etcdlock

import "testing"

func TestServerFixed(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"3.4.23", false}, {"3.4.30", false}, {"3.4.31", true}, {"3.4.45", true},
		{"3.5.12", false}, {"3.5.13", true}, {"3.5.13-rc.0", true}, {"v3.5.21", true},
		{"3.6.0", true}, {"3.6.0-rc.1", true}, {"3.7.3", true}, {"4.0.0", true},
		{"3.3.27", false}, {"2.3.8", false}, {"", false}, {"3.5", false}, {"x.y.z", false},
	} {
		if got := serverFixed(tc.v); got != tc.want {
			t.Errorf("serverFixed(%q) = %v; want %v", tc.v, got, tc.want)
		}
	}
}
