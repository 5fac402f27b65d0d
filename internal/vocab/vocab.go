// Package vocab holds the words dlock's logs, metrics and command use for
// the kinds of lock, so that an operator meets one word for one thing:
// "mutex", "fair", "read", "write", "semaphore" (the words of dlock run
// --kind), and "reentrant" and "session" for the kinds the command does
// not take.
package vocab

import "strings"

// kinds maps the Go names of dlock.Event.Lock to their words.
var kinds = map[string]string{
	"Mutex":          "mutex",
	"ReentrantMutex": "reentrant",
	"FairMutex":      "fair",
	"RWMutex.read":   "read",
	"RWMutex.write":  "write",
	"Semaphore":      "semaphore",
	"SessionMutex":   "session",
}

// Kind returns the word for lock, a dlock.Event's Lock: "mutex" for
// "Mutex", "fair" for "FairMutex", "read" for "RWMutex.read", and so on. A
// fence guard's name ("SQL", "Row", "Redis", "Memory"), and any name it
// does not know, comes back in lower case.
func Kind(lock string) string {
	if w, ok := kinds[lock]; ok {
		return w
	}
	return strings.ToLower(lock)
}
