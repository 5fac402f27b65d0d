package dblease

import "testing"

// woken reports whether w has been woken, without waiting.
func woken(w *Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

func TestWaitersWake(t *testing.T) {
	var ws Waiters
	a1, a2, b := ws.Wait("a"), ws.Wait("a"), ws.Wait("b")
	ws.Wake("a")
	ws.Wake("a") // a second wake before the first is seen is not lost, nor does it block
	if !woken(a1) || !woken(a2) {
		t.Error("Wake(a) did not wake both waiters of a")
	}
	if woken(a1) {
		t.Error("two wakes before a receive were seen twice; want once")
	}
	if woken(b) {
		t.Error("Wake(a) woke a waiter of b")
	}
	ws.WakeAll()
	if !woken(a1) || !woken(a2) || !woken(b) {
		t.Error("WakeAll did not wake every waiter")
	}
	a1.Close()
	a2.Close()
	b.Close()
	if len(ws.m) != 0 {
		t.Errorf("after every waiter closed, %d names are left; want 0", len(ws.m))
	}
	ws.Wake("a") // nothing to wake: must not block or panic
}

func TestWaiterCloseKeepsOthers(t *testing.T) {
	var ws Waiters
	a1, a2 := ws.Wait("a"), ws.Wait("a")
	a1.Close()
	ws.Wake("a")
	if woken(a1) {
		t.Error("a closed waiter was woken")
	}
	if !woken(a2) {
		t.Error("closing one waiter of a unregistered the other")
	}
	a2.Close()
}
