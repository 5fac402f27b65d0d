package zklock

import (
	"strings"
	"testing"
)

// judge: no node holds past a node of another kind of lock queued ahead
// of it, and nodes of another kind behind it do not count.
func TestJudge(t *testing.T) {
	mutex := func(kids []child, me int) verdict { return lowestHolds(kids, me) }
	permits := func(n int) func([]child, int) verdict {
		return func(kids []child, me int) verdict {
			if me < n {
				return verdict{held: true}
			}
			return verdict{children: true}
		}
	}
	for _, tt := range []struct {
		name   string
		nodes  string // one letter a node, lowest first: L lock, R read, W write, P permit (of 5), Q permit of 3
		me     int
		decide func([]child, int) verdict
		held   bool
		watch  int // the node waited for when not held; -1: the children
	}{
		{"permit alone", "P", 0, permits(5), true, 0},
		{"second permit", "PP", 1, permits(5), true, 0},
		{"permit behind a queued mutex", "PLP", 2, permits(5), false, 1},
		{"permit behind two kinds", "PLRP", 3, permits(5), false, 2},
		{"permit past its count", "PPP", 2, permits(2), false, -1},
		{"permit ahead of a mutex", "PPL", 1, permits(2), true, 0},
		{"mutex behind a permit", "PL", 1, mutex, false, 0},
		{"mutex ahead of permits", "LPP", 0, mutex, true, 0},
		{"mutex behind a mutex, permits behind", "LLP", 1, mutex, false, 0},
		{"reader behind readers and a mutex", "RRLR", 3, readerHolds, false, 2},
		{"reader behind readers", "RRPR", 1, readerHolds, true, 0},
		{"reader behind a writer", "WR", 1, readerHolds, false, 0},
		{"writer behind a permit", "PW", 1, lowestHolds, false, 0},
		{"permit behind another semaphore's", "PQP", 2, permits(5), false, 1},
		{"permit ahead of another semaphore's", "PPQ", 1, permits(5), true, 0},
		{"permit of another semaphore behind permits", "PPQ", 2, permits(3), false, 1},
	} {
		kids := make([]child, len(tt.nodes))
		for i, k := range tt.nodes {
			kids[i] = child{name: string(k) + strings.Repeat("x", i), seq: int64(i)}
			switch k {
			case 'R':
				kids[i].kind = kindRead
			case 'W':
				kids[i].kind = kindWrite
			case 'P':
				kids[i].kind, kids[i].permits = kindPermit, 5
			case 'Q':
				kids[i].kind, kids[i].permits = kindPermit, 3
			}
		}
		v := judge(kids, tt.me, tt.decide)
		switch {
		case v.held != tt.held:
			t.Errorf("%s: held = %v; want %v", tt.name, v.held, tt.held)
		case !v.held && tt.watch < 0 && !v.children:
			t.Errorf("%s: waits for %q; want the children", tt.name, v.watch)
		case !v.held && tt.watch >= 0 && v.watch != kids[tt.watch].name:
			t.Errorf("%s: waits for %q (children %v); want %q", tt.name, v.watch, v.children, kids[tt.watch].name)
		}
	}
}
