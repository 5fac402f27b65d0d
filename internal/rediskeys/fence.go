package rediskeys

import (
	"strconv"
	"sync"
)

// Fence counters. Every lock name draws its fences from the counter of its
// Cluster slot, dlock:fence:{tag}, where tag is a short string that hashes
// to the same slot as the name: at most 16384 counters per server or
// deployment, however many names are used, and each lives on the node of
// the names it serves. A counter only ever grows, and a missing one (a
// slot's first grant, or a restart that lost the data) starts from the
// server's clock in microseconds; see redislock's package doc for why
// fences therefore strictly increase for every name.
const Slots = 16384

// slotTags[s] is the shortest string, in base 36 (the first found counting
// up), whose slot is s: computed once, on first use, in a few
// milliseconds.
var (
	slotTagsOnce sync.Once
	slotTags     []string
)

// FenceKey returns the fence counter of name's slot.
func FenceKey(name string) string {
	return Prefix + "fence:{" + slotTag(Slot(name)) + "}"
}

// Slot is the Cluster hash slot of a key whose hash tag is name.
func Slot(name string) uint16 { return crc16(name) % Slots }

// slotTag returns the tag of slot s.
func slotTag(s uint16) string {
	slotTagsOnce.Do(func() {
		tags := make([]string, Slots)
		left := Slots
		for n := uint64(0); left > 0; n++ {
			t := strconv.FormatUint(n, 36)
			if i := Slot(t); tags[i] == "" {
				tags[i] = t
				left--
			}
		}
		slotTags = tags
	})
	return slotTags[s]
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster hashes keys with,
// a byte at a time from crcTable (a NewMutex runs it on every name).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

// crcTable[b] is the CRC-16/XMODEM of the byte b shifted through the
// polynomial 0x1021 eight times, one bit at a time.
var crcTable = func() (t [256]uint16) {
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return t
}()
