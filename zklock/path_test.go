package zklock

import (
	"strings"
	"testing"
)

func TestParseChild(t *testing.T) {
	tests := []struct {
		name    string
		ok      bool
		kind    kind
		seq     int64
		permits int
	}{
		{"_c_0123456789abcdef0123456789abcdef-lock-0000000042", true, kindLock, 42, 0},
		{"_c_2f1c4e06-7a4b-4f0e-9a55-3e4e1f7c2b10-lock-0000000007", true, kindLock, 7, 0}, // Curator's
		{"lock-0000000001", true, kindLock, 1, 0},
		{"_c_ab-read-0000000003", true, kindRead, 3, 0},
		{"_c_ab-write-0000000004", true, kindWrite, 4, 0},
		{"_c_2f1c4e06-7a4b-4f0e-9a55-3e4e1f7c2b10-__READ__0000000008", true, kindRead, 8, 0},  // Curator's reader
		{"_c_2f1c4e06-7a4b-4f0e-9a55-3e4e1f7c2b10-__WRIT__0000000009", true, kindWrite, 9, 0}, // and writer
		{"_c_ab-__WRIT__0000000010", true, kindWrite, 10, 0},
		{"_c_ab-permit12-0000000005", true, kindPermit, 5, 12},
		{"_c_ab-permit0-0000000005", false, 0, 0, 0},
		{"_c_ab-permit-0000000005", false, 0, 0, 0},
		{"_c_ab-lock--000000005", false, 0, 0, 0}, // an overflowed counter
		{"_c_ab-lock-+000000005", false, 0, 0, 0},
		{"config", false, 0, 0, 0},
		{"0000000001", false, 0, 0, 0},
		{"_c_ab-other-0000000001", false, 0, 0, 0},
	}
	for _, tt := range tests {
		c, ok := parseChild(tt.name)
		if ok != tt.ok || ok && (c.kind != tt.kind || c.seq != tt.seq || c.permits != tt.permits) {
			t.Errorf("parseChild(%q) = %+v, %v; want kind %v seq %d permits %d ok %v", tt.name, c, ok, tt.kind, tt.seq, tt.permits, tt.ok)
		}
	}
	if _, err := parseChildren("/x", []string{"lock-0000000001", "_c_ab-lock--2147483648"}); err == nil || !strings.Contains(err.Error(), "overflowed") {
		t.Errorf("an overflowed sequence: %v", err)
	}
	if _, err := parseChildren("/x", []string{"_c_ab-__READ__-000000005"}); err == nil || !strings.Contains(err.Error(), "overflowed") {
		t.Errorf("an overflowed reader's sequence: %v", err)
	}
	// Another lock's path ("/x/release--2024") is no lock node of /x's.
	if kids, err := parseChildren("/x", []string{"release--2024", "x--5", "lock--5", "v--0000000001", "lock-0000000001"}); err != nil || len(kids) != 1 {
		t.Errorf("children named like no overflowed node: %+v, %v; want the lock node alone", kids, err)
	}
	kids, err := parseChildren("/x", []string{"_c_b-lock-0000000010", "_c_a-lock-0000000002", "lock-0000000005"})
	if err != nil || kids[0].seq != 2 || kids[1].seq != 5 || kids[2].seq != 10 {
		t.Errorf("parseChildren sorts by sequence, not name: %+v, %v", kids, err)
	}
}

func TestFenceOf(t *testing.T) {
	const now = 1_795_433_218_589 // ms since the epoch, November 2026
	// Later parents outrank every sequence an earlier parent can reach in
	// the milliseconds between them: fewer than 2^fenceSeqBits child
	// changes per millisecond of its life.
	for _, life := range []int64{1, 2, 1000, 2048 << 10} {
		last := min(life<<fenceSeqBits-1, 1<<31-1)
		if fenceOf(now, last) >= fenceOf(now+life, 0) {
			t.Errorf("a parent %dms younger does not outrank %d sequence numbers", life, last)
		}
	}
	if fenceOf(now, 5) <= fenceOf(now, 4) {
		t.Error("fences do not follow the sequence")
	}
	// Below 2^53, where JSON and JavaScript read them exactly, until
	// fenceHorizon; a parent created before fenceEpoch counts from it.
	const maxJSON = 1 << 53
	for _, ctime := range []int64{now, fenceEpoch, fenceHorizon.UnixMilli()} {
		if f := fenceOf(ctime, 1<<31-1); f >= maxJSON {
			t.Errorf("fenceOf(%d, 2^31-1) = %d; want below 2^53", ctime, f)
		}
	}
	if fenceHorizon.Year() < 2080 {
		t.Errorf("fences reach 2^53 in %d", fenceHorizon.Year())
	}
	if f := fenceOf(fenceEpoch-1000, 7); f != 7 {
		t.Errorf("a parent older than the epoch: fence %d; want its sequence, 7", f)
	}
}

func TestCheckPath(t *testing.T) {
	for _, ok := range []string{"/a", "/locks/nightly-report", "/a/b.c/d..e", "/日本/ロック", "/locks/\uf900", "/a/release--2024"} {
		if err := checkPath(ok); err != nil {
			t.Errorf("checkPath(%q) = %v", ok, err)
		}
	}
	// A segment named like a lock node, overflowed or not, would be read
	// as a holder of the lock above it.
	for _, bad := range []string{"/a/_c_ab-lock-0000000001/b", "/a/_c_ab-__READ__-000000005", "/a/_c_ab-latch-0000000001"} {
		if err := checkPath(bad); err == nil || !strings.Contains(err.Error(), "named as a lock's node") {
			t.Errorf("checkPath(%q) = %v; want a refusal naming the segment", bad, err)
		}
	}
	// Characters above U+FFFF are surrogate pairs in ZooKeeper's Java, which
	// it refuses (TestIntegrationServerRefusesWhatCheckPathRefuses).
	for _, bad := range []string{"/locks/🔒", "/locks/\U00010000", "/locks/\ufff0", "/locks/\x7f"} {
		if err := checkPath(bad); err == nil || !strings.Contains(err.Error(), "does not allow") {
			t.Errorf("checkPath(%q) = %v; want a refusal naming the character", bad, err)
		}
	}
}

func TestLatchNode(t *testing.T) {
	for name, want := range map[string]bool{
		"latch-0000000002": true,
		"_c_3b1f6f0e-0c4d-4d55-9a57-6c1b0a3e2f10-latch-0000000002": true,
		"latch-000000002":      false, // 9 digits
		"latch-00000000x2":     false,
		"report-1700000000":    false, // a timestamp, not a latch
		"mylatch-0000000001":   true,  // Curator sorts it as a latch node
		"_c_x-lock-0000000001": false,
		"latch":                false,
		"":                     false,
	} {
		if got := latchNode(name); got != want {
			t.Errorf("latchNode(%q) = %v, want %v", name, got, want)
		}
	}
}
