package backend

import (
	"strings"
	"testing"
)

// The password of a Redis URL never appears in an error, whatever it
// contains and whether or not the URL parses.
func TestPasswordsNeverShown(t *testing.T) {
	secrets := []string{"S3cr/3tPW", "pa#ss", "pa?ss", "100%sure", "a@b", "col:on", "com,ma", "spa ce", " leading", "tr/#?%@:, all"}
	shapes := []string{
		"redis://alice:%s@127.0.0.1:6379",
		"redis://alice:%s@[::1",
		"redis://alice:%s@127.0.0.1:99999",
		"rediss://:%s@",
		"http://alice:%s@127.0.0.1:6379",
		"redis://%s@127.0.0.1:6379/notadb",
		"redis://127.0.0.1:6379/?password=%s",
		"redis://127.0.0.1:6379/0?dial_timeout=1s&sentinel_password=%s",
	}
	for _, secret := range secrets {
		for _, shape := range shapes {
			raw := strings.Replace(shape, "%s", secret, 1)
			for _, via := range []string{"flag", "env"} {
				f := Flags{}
				env := map[string]string{}
				if via == "flag" {
					f.Redis = []string{raw}
				} else {
					env[EnvRedis] = raw
				}
				_, err := f.Resolve(func(k string) string { return env[k] })
				if err == nil {
					continue // a URL that parses and needs no server yet
				}
				for _, part := range append(strings.FieldsFunc(secret, func(r rune) bool { return strings.ContainsRune("/#?%@:, ", r) }), secret) {
					if len(part) >= 3 && strings.Contains(err.Error(), part) {
						t.Errorf("%s %q: error shows %q of the password: %v", via, raw, part, err)
					}
				}
			}
		}
	}
}

// DLOCK_REDIS holds URLs separated by commas or spaces; a password that
// contains either is kept whole.
func TestSplitURLs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"redis://a:1,redis://b:2 redis://c:3", []string{"redis://a:1", "redis://b:2", "redis://c:3"}},
		{" redis://u:p,w d@a:1 ,  rediss://b:2\n", []string{"redis://u:p,w d@a:1", "rediss://b:2"}},
		{"redis://a:1", []string{"redis://a:1"}},
		{" , ", nil},
	} {
		got := SplitURLs(tc.in)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("SplitURLs(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
