package dlock

import (
	"crypto/rand"
	"encoding/base64"
)

// TokenBytes is the number of random bytes in a token made by NewToken.
const TokenBytes = 16

// NewToken returns a fresh random owner token: 128 bits from crypto/rand,
// encoded as 22 characters of unpadded URL-safe base64.
func NewToken() string {
	var b [TokenBytes]byte
	rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+).
	return base64.RawURLEncoding.EncodeToString(b[:])
}
