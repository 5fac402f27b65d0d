package redisscript

import "testing"

func TestMajorityFence(t *testing.T) {
	for _, tc := range []struct {
		fences []uint64
		want   uint64
	}{
		{[]uint64{7}, 7},
		{[]uint64{403000000, 402900001, 402900001}, 402900001}, // one node lifted ahead of the grant's majority
		{[]uint64{5, 9, 7}, 7},
		{[]uint64{0, 9, 0}, 0}, // two nodes did not answer
		{[]uint64{3, 9, 9, 1}, 3},
		{[]uint64{8, 2, 9, 4, 6}, 6},
	} {
		if got := MajorityFence(tc.fences); got != tc.want {
			t.Errorf("MajorityFence(%v) = %d; want %d", tc.fences, got, tc.want)
		}
	}
}
