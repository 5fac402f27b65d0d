package redisscript

import (
	"slices"
	"testing"

	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/redisconn"
)

// TestTypedCalls checks that each typed call sends the keys and arguments
// its script reads, in the positions its header lists: the same slices the
// callers built by hand before the typed calls.
func TestTypedCalls(t *testing.T) {
	k := rediskeys.For("n")
	b := k.Base
	for _, tc := range []struct {
		name       string
		got        redisconn.Call
		script     *Script
		keys, args []string
	}{
		{"acquire", AcquireCall{Lock: "L", Fence: "F", Token: "tok", TTL: "3000", Hold: "h"}.Call(Acquire), Acquire,
			[]string{"L", "F"}, []string{"tok", "3000", "h", ""}},
		{"acquire awaited, in line", AcquireCall{Lock: "L", Fence: "F", Token: "tok", TTL: "3000", Hold: "h", Awaited: true,
			Line: &LinePlace{Key: "W", Client: "c1", Since: 17, LifeMillis: 1050, OnWin: "stay"}}.Call(ReentrantAcquire), ReentrantAcquire,
			[]string{"L", "F", "W"}, []string{"tok", "3000", "h", "*", "c1", "17", "1050", "stay"}},
		{"release", ReleaseCall{Lock: "L", Token: "tok", Channel: "C"}.Call(Release), Release,
			[]string{"L"}, []string{"tok", "C"}},
		{"release, waking the line", ReleaseCall{Lock: "L", Token: "tok", Channel: "C", Hold: "h", Waiting: "W", Wake: "P"}.Call(ReentrantRelease),
			ReentrantRelease, []string{"L", "W"}, []string{"tok", "C", "h", "P"}},
		{"refresh", RefreshCall{Lock: "L", Token: "tok", TTL: "3000"}.Call(Refresh), Refresh,
			[]string{"L"}, []string{"tok", "3000"}},
		{"quorum retake", RefreshCall{Lock: "L", Token: "tok", TTL: "3000", Deposed: "D"}.Call(QuorumRetake), QuorumRetake,
			[]string{"L", "D"}, []string{"tok", "3000"}},
		{"quorum acquire", QuorumAcquireCall{Lock: "L", Fence: "F", Epoch: "E", Token: "tok", TTL: "3000", Window: "30000"}.Call(), QuorumAcquire,
			[]string{"L", "F", "E"}, []string{"tok", "3000", "30000", "0"}},
		{"quorum acquire, fresh slot", QuorumAcquireCall{Lock: "L", Fence: "F", Epoch: "E", Token: "tok", TTL: "3000", Window: "0", Fresh: true}.Call(), QuorumAcquire,
			[]string{"L", "F", "E"}, []string{"tok", "3000", "0", "1"}},
		{"quorum fence", QuorumFenceCall{Lock: "L", Counter: "F", Token: "tok", Fence: 1 << 60}.Call(), QuorumFence,
			[]string{"L", "F"}, []string{"tok", "1152921504606846976"}},
		{"join line", JoinLineCall{Lock: "L", Waiting: "W", Client: "c1", Since: 17, LifeMillis: 1050}.Call(), JoinLine,
			[]string{"L", "W"}, []string{"c1", "17", "1050"}},
		{"pass turn", PassTurnCall{Lock: "L", Waiting: "W", Wake: "P"}.Call(), PassTurn, []string{"L", "W"}, []string{"P"}},
		{"leave line", LeaveLineCall{Waiting: "W", Client: "c1"}.Call(), LeaveLine, []string{"W"}, []string{"c1"}},
		{"elect publish", ElectPublishCall{Lock: "L", Record: "R", Token: "tok", Value: "v", TTL: "3000", Channel: "C"}.Call(), ElectPublish,
			[]string{"L", "R"}, []string{"tok", "v", "3000", "C"}},
		{"elect read", ElectReadCall{Lock: "L", Record: "R"}.Call(), ElectRead, []string{"L", "R"}, nil},
		{"elect withdraw", ElectWithdrawCall{Record: "R", Value: "v", Channel: "C"}.Call(), ElectWithdraw, []string{"R"}, []string{"v", "C"}},
		{"fair acquire", FairAcquireCall{Lock: "L", Queue: "Q", Deadlines: "T", Fence: "F", Waiter: "w", TTL: "3000", Timeout: "9000",
			Join: true, Token: "tok"}.Call(), FairAcquire, []string{"L", "Q", "T", "F"}, []string{"w", "3000", "9000", "1", "tok"}},
		{"fair acquire, not joining", FairAcquireCall{Lock: "L", Queue: "Q", Deadlines: "T", Fence: "F", Waiter: "w", TTL: "3000", Timeout: "9000",
			Token: "w"}.Call(), FairAcquire, []string{"L", "Q", "T", "F"}, []string{"w", "3000", "9000", "0", "w"}},
		{"fair release", FairReleaseCall{Lock: "L", Queue: "Q", Deadlines: "T", Token: "tok", Wake: "P"}.Call(), FairRelease,
			[]string{"L", "Q", "T"}, []string{"tok", "P"}},
		{"fair release, back to the head", FairReleaseCall{Lock: "L", Queue: "Q", Deadlines: "T", Token: "tok", Wake: "P", Timeout: "9000", Waiter: "w"}.Call(),
			FairRelease, []string{"L", "Q", "T"}, []string{"tok", "P", "9000", "w"}},
		{"fair leave", FairLeaveCall{Lock: "L", Queue: "Q", Deadlines: "T", Waiter: "w", Wake: "P"}.Call(), FairLeave,
			[]string{"L", "Q", "T"}, []string{"w", "P"}},
		{"rw read acquire", RWAcquireCall{Main: "B", Writer: "W", Readers: "R", Intents: "I", Fence: "F", Token: "tok", TTL: "3000"}.Call(),
			RWReadAcquire, []string{"B", "W", "R", "I", "F"}, []string{"tok", "3000"}},
		{"rw write acquire", RWAcquireCall{Main: "B", Writer: "W", Readers: "R", Intents: "I", Fence: "F", Token: "tok", TTL: "3000",
			Write: &RWWriter{IntentLife: "6000", Intent: "i1", Owner: "o"}}.Call(), RWWriteAcquire,
			[]string{"B", "W", "R", "I", "F"}, []string{"tok", "3000", "6000", "i1", "o"}},
		{"rw write try", RWAcquireCall{Main: "B", Writer: "W", Readers: "R", Intents: "I", Fence: "F", Token: "tok", TTL: "3000",
			Write: &RWWriter{IntentLife: "0"}}.Call(), RWWriteAcquire,
			[]string{"B", "W", "R", "I", "F"}, []string{"tok", "3000", "0", "", ""}},
		{"rw release read", RWReleaseCall{Writer: "W", Readers: "R", Main: "B", Token: "tok", Channel: "C", Read: true}.Call(), RWRelease,
			[]string{"W", "R", "B"}, []string{"tok", "C", "r"}},
		{"rw release write", RWReleaseCall{Writer: "W", Readers: "R", Main: "B", Token: "tok", Channel: "C"}.Call(), RWRelease,
			[]string{"W", "R", "B"}, []string{"tok", "C", "w"}},
		{"rw refresh read", RWRefreshCall{Writer: "W", Readers: "R", Main: "B", Token: "tok", TTL: "3000", Read: true}.Call(), RWRefresh,
			[]string{"W", "R", "B"}, []string{"tok", "3000", "r"}},
		{"rw refresh write", RWRefreshCall{Writer: "W", Readers: "R", Main: "B", Token: "tok", TTL: "3000"}.Call(), RWRefresh,
			[]string{"W", "R", "B"}, []string{"tok", "3000", "w"}},
		{"rw downgrade", RWDowngradeCall{Writer: "W", Readers: "R", Fence: "F", Main: "B", Token: "tok", Reader: "r1", TTL: "3000", Channel: "C"}.Call(),
			RWDowngrade, []string{"W", "R", "F", "B"}, []string{"tok", "r1", "3000", "C"}},
		{"rw withdraw", RWWithdrawCall{Intents: "I", Intent: "i1", Channel: "C"}.Call(), RWWithdraw, []string{"I"}, []string{"i1", "C"}},
		{"semaphore acquire", SemaphoreAcquireCall{Permits: "P", Limit: "N", Fence: "F", Main: "B", Token: "tok", TTL: "3000", Default: 3}.Call(),
			SemaphoreAcquire, []string{"P", "N", "F", "B"}, []string{"tok", "3000", "3"}},
		// The old call also sent the hold, the permit's token, as ARGV[3],
		// which semaphore_release.lua does not read.
		{"semaphore release", SemaphoreReleaseCall{Permits: "P", Limit: "N", Main: "B", Token: "tok", Channel: "C"}.Call(), SemaphoreRelease,
			[]string{"P", "N", "B"}, []string{"tok", "C"}},
		{"semaphore refresh", SemaphoreRefreshCall{Permits: "P", Limit: "N", Main: "B", Token: "tok", TTL: "3000"}.Call(), SemaphoreRefresh,
			[]string{"P", "N", "B"}, []string{"tok", "3000"}},
		{"semaphore set limit", SemaphoreLimitCall{Permits: "P", Limit: "N", Record: "R", N: 5, Default: 3, Channel: "C", TTL: "3000",
			RecordLife: "600000"}.Call(), SemaphoreLimit, []string{"P", "N", "R"}, []string{"set", "5", "3", "C", "3000", "600000"}},
		{"semaphore add to limit", SemaphoreLimitCall{Permits: "P", Limit: "N", Record: "R", Add: true, N: -2, Default: 3, Channel: "C", TTL: "3000",
			RecordLife: "600000"}.Call(), SemaphoreLimit, []string{"P", "N", "R"}, []string{"add", "-2", "3", "C", "3000", "600000"}},
		{"semaphore available", SemaphoreAvailableCall{Permits: "P", Limit: "N", Default: 3}.Call(), SemaphoreAvailable,
			[]string{"P", "N"}, []string{"3"}},
		{"latch set", LatchSetCall{Count: "K", N: 4, Life: "86400000"}.Call(), LatchSet, []string{"K"}, []string{"4", "86400000"}},
		{"latch count", LatchCountCall{Count: "K"}.Call(), LatchCount, []string{"K"}, nil},
		{"latch count down", LatchCountDownCall{Count: "K", Record: "R", Channel: "Z", Life: "86400000", RecordLife: "600000"}.Call(),
			LatchCountDown, []string{"K", "R"}, []string{"Z", "86400000", "600000"}},
		{"inspect", InspectCall{Lock: "B", Fence: "F", Queue: "Q", Permits: "P", Limit: "N", Writer: "W", Readers: "R", Intents: "I", Waiting: "L"}.Call(),
			Inspect, []string{"B", "F", "Q", "P", "N", "W", "R", "I", "L"}, nil},
		// InspectOf and ForceUnlockOf against the old InspectKeys and
		// ForceUnlockCall's expressions.
		{"inspect of a name", InspectOf("n").Call(), Inspect, []string{b, rediskeys.For("n").Fence, b + ":queue", b + ":permits", b + ":limit",
			b + ":writer", b + ":readers", b + ":wintent", b + ":waiting"}, nil},
		{"force unlock", ForceUnlockCall{Lock: "B", Writer: "W", Readers: "R", Intents: "I", Permits: "P", Queue: "Q", Waiting: "L",
			Channel: "C", FairWake: "FW", Wake: "WK"}.Call(), ForceUnlock, []string{"B", "W", "R", "I", "P", "Q", "L"}, []string{"C", "FW", "WK"}},
		{"force unlock of a name", ForceUnlockOf("n").Call(), ForceUnlock,
			[]string{b, b + ":writer", b + ":readers", b + ":wintent", b + ":permits", b + ":queue", b + ":waiting"},
			[]string{k.Channel, b + ":w:", b + ":wake:"}},
		{"quorum force", QuorumForceCall{Lock: "B", Deposed: "D", Channel: "C"}.Call(), QuorumForce, []string{"B", "D"}, []string{"C"}},
		{"quorum depose", QuorumDeposeCall{Lock: "B", Deposed: "D", LifeMillis: 6000, Tokens: []string{"t1", "t2"}}.Call(), QuorumDepose,
			[]string{"B", "D"}, []string{"6000", "t1", "t2"}},
	} {
		if tc.got.Script != tc.script || !slices.Equal(tc.got.Keys, tc.keys) || !slices.Equal(tc.got.Args, tc.args) {
			t.Errorf("%s: got %s KEYS %q ARGV %q, want %s KEYS %q ARGV %q", tc.name,
				tc.got.Script.Name, tc.got.Keys, tc.got.Args, tc.script.Name, tc.keys, tc.args)
		}
	}
}
