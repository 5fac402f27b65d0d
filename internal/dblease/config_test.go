package dblease

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func TestConfigCheck(t *testing.T) {
	retry := dlock.ExponentialBackoff(time.Millisecond, time.Second)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // a part of the error; "" for none
	}{
		{"defaults", NewConfig(30*time.Second, retry), ""},
		{"shortest", Config{TTL: 10 * time.Millisecond, Retry: retry}, ""},
		{"longest", Config{TTL: time.Hour, Retry: retry}, ""},
		{"too short", Config{TTL: 9 * time.Millisecond, Retry: retry}, "pglock: TTL 9ms is outside the range 10ms to 1h0m0s; set it with WithTTL"},
		{"too long", Config{TTL: time.Hour + 1, Retry: retry}, "pglock: TTL 1h0m0.000000001s is outside"},
		{"negative hold", Config{TTL: time.Second, MaxHold: -1, Retry: retry}, "pglock: WithMaxHold(-1ns): want a positive duration"},
		{"no retry", Config{TTL: time.Second}, "dlock:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Check("pglock", 10*time.Millisecond, time.Hour)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check() = %v; want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Check() = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestNewConfig(t *testing.T) {
	retry := dlock.NoRetry()
	c := NewConfig(time.Minute, retry)
	if c.TTL != time.Minute || !c.Renew || c.Retry != retry || c.MaxHold != 0 {
		t.Errorf("NewConfig(1m, NoRetry()) = %+v; want TTL 1m, renewal on, that retry, no cap", c)
	}
}

func TestApply(t *testing.T) {
	type option func(*Config)
	c := Config{}
	Apply(&c, []option{nil, func(c *Config) { c.TTL = time.Second }, nil, func(c *Config) { c.Renew = true }})
	if c.TTL != time.Second || !c.Renew {
		t.Errorf("Apply skipping nils = %+v; want TTL 1s and renewal on", c)
	}
}

func TestUnits(t *testing.T) {
	for _, tc := range []struct {
		d, unit time.Duration
		want    int64
	}{
		{time.Second, time.Millisecond, 1000},
		{time.Second + 1, time.Millisecond, 1001}, // rounded up: never less than the TTL
		{999 * time.Microsecond, time.Millisecond, 1},
		{1500 * time.Millisecond, time.Second, 2},
		{10 * time.Millisecond, time.Microsecond, 10000},
	} {
		if got := Units(tc.d, tc.unit); got != tc.want {
			t.Errorf("Units(%v, %v) = %d; want %d", tc.d, tc.unit, got, tc.want)
		}
	}
}
