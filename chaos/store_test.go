package chaos

import (
	"slices"
	"testing"
)

// The fenced register accepts a fence at least as high as every one it
// accepted, refuses a lower one, and a read returns the last accepted
// write's fence and value.
func TestStoreRegister(t *testing.T) {
	h := &History{}
	s, err := NewStore(h)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := dialStore(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	read := func(wantFence uint64, wantValue string) {
		t.Helper()
		f, v, err := c.read()
		if err != nil || f != wantFence || v != wantValue {
			t.Fatalf("read %d %q, %v; want %d %q", f, v, err, wantFence, wantValue)
		}
	}
	write := func(fence uint64, value string, wantOK bool, wantMax uint64) {
		t.Helper()
		ok, max, err := c.write(1, fence, value)
		if err != nil || ok != wantOK || max != wantMax {
			t.Fatalf("write %d %q: %v %d, %v; want %v %d", fence, value, ok, max, err, wantOK, wantMax)
		}
	}
	read(0, "")
	write(10, "c1-1", true, 0)
	read(10, "c1-1")
	write(10, "c1-2", true, 0)
	write(9, "c2-1", false, 10)
	read(10, "c1-2")
	write(11, "c2-2", true, 0)
	read(11, "c2-2")
	var ops []Op
	for _, e := range h.Events() {
		ops = append(ops, e.Op)
	}
	if want := []Op{OpWrite, OpWrite, OpRefused, OpWrite}; !slices.Equal(ops, want) {
		t.Errorf("history %v; want %v", ops, want)
	}
}
