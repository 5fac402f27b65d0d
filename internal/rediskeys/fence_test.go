package rediskeys

import "testing"

func TestSlotTagsCoverEverySlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31c3 {
		t.Fatalf("crc16 = %#x, want 0x31c3 (CRC-16/XMODEM)", got)
	}
	longest := 0
	for s := uint16(0); s < Slots; s++ {
		tag := slotTag(s)
		if Slot(tag) != s {
			t.Fatalf("tag %q of slot %d is in slot %d", tag, s, Slot(tag))
		}
		longest = max(longest, len(tag))
	}
	if longest > 4 {
		t.Errorf("longest tag is %d characters; base 36 covers 16384 slots in 4", longest)
	}
}

func TestFenceKeySharesTheNamesSlot(t *testing.T) {
	for _, name := range []string{"a", "orders/42", "ünïcode", "x"} {
		k := For(name)
		if got, want := Slot(hashTag(k.Fence)), Slot(name); got != want {
			t.Errorf("%q: fence key %q is in slot %d, the name in %d", name, k.Fence, got, want)
		}
	}
}

// hashTag is the part of key Redis Cluster hashes: the text between the
// first { and the next }.
func hashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					return key[i+1 : j]
				}
			}
		}
	}
	return key
}
