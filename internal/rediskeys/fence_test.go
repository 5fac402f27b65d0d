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

// crc16 agrees with the bit-at-a-time definition of CRC-16/XMODEM.
func TestCRC16Table(t *testing.T) {
	bitwise := func(s string) uint16 {
		var crc uint16
		for i := 0; i < len(s); i++ {
			crc ^= uint16(s[i]) << 8
			for range 8 {
				if crc&0x8000 != 0 {
					crc = crc<<1 ^ 0x1021
				} else {
					crc <<= 1
				}
			}
		}
		return crc
	}
	for _, s := range []string{"", "a", "123456789", "orders/42", "ünïcode", "\x00\xff\x80", "bs2:17:12345"} {
		if got, want := crc16(s), bitwise(s); got != want {
			t.Errorf("crc16(%q) = %#x; want %#x", s, got, want)
		}
	}
}

func BenchmarkFenceKey(b *testing.B) {
	for b.Loop() {
		FenceKey("bs2:17:12345")
	}
}
