package cmdutil

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxShown is how many bytes of a name Quote shows before it cuts it.
const MaxShown = 100

// Quote returns name quoted for a message, as %q would, but cut to about
// MaxShown bytes with an ellipsis and the name's length when it is longer:
// a 10,000-byte name is not echoed whole.
func Quote(name string) string {
	if len(name) <= MaxShown {
		return strconv.Quote(name)
	}
	cut := MaxShown
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…\" (%d bytes)", strings.TrimSuffix(strconv.Quote(name[:cut]), `"`), len(name))
}

// Shorten returns msg with every appearance of name, bare or quoted,
// replaced by Quote(name), if name is longer than MaxShown: for messages
// of libraries that echo a name whole.
func Shorten(msg, name string) string {
	if len(name) <= MaxShown {
		return msg
	}
	msg = strings.ReplaceAll(msg, strconv.Quote(name), Quote(name))
	return strings.ReplaceAll(msg, name, Quote(name))
}

// Reason returns err's message for a line that already says what failed
// ("dlock: lost lock "x": …"), on one line: without the "dlock: " that every error of
// the library starts with, and without the sentinels' own words that the
// line says already (lock lost, lock not obtained, lock not held).
func Reason(err error) string {
	msg := libraryPrefix.ReplaceAllString(err.Error(), "$1")
	for _, said := range []string{"lock lost: ", "lock not obtained: ", "lock not held: "} {
		msg = strings.TrimPrefix(msg, said)
	}
	return oneLine(msg)
}

// libraryPrefix matches "dlock: " as a word, not the end of "redlock: ".
var libraryPrefix = regexp.MustCompile(`(^|[^A-Za-z0-9_])dlock: `)

// MaxValue is how many bytes of a stored value Show shows.
const MaxValue = 256

// Show returns s, a value that something else stored (a holder's owner or
// label, a leader's value), for a line on a terminal: cut to MaxValue
// bytes and "...", as the libraries' Inspect cuts them, and quoted with
// Go's escapes if it holds anything a terminal would not print as itself,
// so that escape sequences cannot fake what the operator sees, nor a
// newline a second line.
func Show(s string) string {
	s = Cut(s)
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == utf8.RuneError }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// Cut returns s cut to MaxValue bytes, at the start of a character, and
// "...", if it is longer.
func Cut(s string) string {
	if len(s) <= MaxValue {
		return s
	}
	cut := MaxValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
