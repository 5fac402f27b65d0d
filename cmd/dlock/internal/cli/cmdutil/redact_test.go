package cmdutil

import (
	"strings"
	"testing"
)

// RedactInput hides the password of every shape of input; NoteSecrets
// finds it, for Redact to hide wherever it appears.
func TestRedactShapes(t *testing.T) {
	for _, tc := range []struct{ in, secret, shown string }{
		{"redis://app:pw123@h:1", "pw123", "redis://xxxxx@h:1"},
		{"redis://tok123@h:1", "tok123", "redis://xxxxx@h:1"},
		{"redis://h:1/0?password=pw123&dial_timeout=1s", "pw123", "redis://h:1/0?password=xxxxx&dial_timeout=1s"},
		{"host=db password=pw123 port=abc", "pw123", "host=db password=xxxxx port=abc"},
		{"host=db password = pw123 port=abc", "pw123", "host=db password = xxxxx port=abc"},
		{"host=db PASSWORD='pw 123' port=abc", "pw 123", "host=db PASSWORD=xxxxx port=abc"},
		{`host=db password='pw\'123' port=abc`, `pw'123`, "host=db password=xxxxx port=abc"},
		{"app:pw123@tcp(h:3306)/db", "pw123", "xxxxx@tcp(h:3306)/db"},
		{"root:pw123@h:2379", "pw123", "xxxxx@h:2379"},
		{"h1:2181,app:pw123@h2:2181", "pw123", "xxxxx@h2:2181"},
	} {
		if got := RedactInput(tc.in); got != tc.shown || strings.Contains(got, tc.secret) {
			t.Errorf("RedactInput(%q) = %q; want %q", tc.in, got, tc.shown)
		}
		NoteSecrets("--flag=" + tc.in)
		if got := Redact("said: " + tc.secret + "."); got != "said: xxxxx." {
			t.Errorf("after NoteSecrets(%q), Redact shows %q", tc.in, got)
		}
	}
	NoteSecret("from-a-file")
	if got := Redact(`"from-a-file"`); got != `"xxxxx"` {
		t.Errorf("after NoteSecret, Redact shows %q", got)
	}
	// A user name is no secret: hiding it hid every "postgres" the
	// command wrote (bench's JSON said "kind": "xxxxx").
	NoteSecrets("--postgres=postgres://postgres@h:5432/db")
	if got := Redact(`"kind": "postgres"`); got != `"kind": "postgres"` {
		t.Errorf("after NoteSecrets of a URL with a user and no password, Redact shows %q", got)
	}
}
