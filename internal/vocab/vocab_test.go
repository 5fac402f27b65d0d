package vocab

import "testing"

func TestKind(t *testing.T) {
	for lock, want := range map[string]string{
		"Mutex": "mutex", "ReentrantMutex": "reentrant", "FairMutex": "fair", "RWMutex.read": "read",
		"RWMutex.write": "write", "Semaphore": "semaphore", "SessionMutex": "session", "SQL": "sql",
		"Memory": "memory", "": "",
	} {
		if got := Kind(lock); got != want {
			t.Errorf("Kind(%q) = %q, want %q", lock, got, want)
		}
	}
}
