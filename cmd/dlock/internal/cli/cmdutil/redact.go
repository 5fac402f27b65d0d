package cmdutil

import (
	"cmp"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// What the command writes never holds a secret it was given, whatever
// the shape of the input that carried it: a URL's user information, a
// password parameter or keyword of a connection string, a password
// variable or file. The command notes each input as it starts
// (NoteSecrets, NoteSecret), and every line it writes passes through
// Redact, which hides what was noted (see Redacting); messages that quote
// an input also quote it through RedactInput, so that it reads
// "redis://xxxxx@host:6379".

// Hidden replaces a secret in what the command writes.
const Hidden = "xxxxx"

// minSecret is the shortest secret, or piece of one, that Redact hides
// wherever it appears: a shorter one would hide parts of words.
const minSecret = 3

// secrets are what NoteSecrets and NoteSecret found, longest first.
var secrets struct {
	sync.Mutex
	list []string
}

// NoteSecret records s, a password read from a file or a variable, for
// Redact to hide.
func NoteSecret(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	add([]string{s})
}

// NoteSecrets records for Redact what may be a secret in each of inputs,
// command-line arguments or values of variables: the user information of
// anything that looks like a URL or a DSN (user:password@...), and the
// values of password parameters and keywords (?password=..., password =
// '...'). An input that carries none adds nothing.
func NoteSecrets(inputs ...string) {
	var found []string
	for _, in := range inputs {
		found = append(found, secretsOf(in)...)
	}
	add(found)
}

// add records found, with the pieces and quoted forms of each.
func add(found []string) {
	var all []string
	for _, s := range found {
		forms := []string{s}
		if u, err := url.PathUnescape(s); err == nil && u != s {
			forms = append(forms, u)
		}
		for _, f := range forms {
			all = append(all, f, strings.Trim(strconv.Quote(f), `"`))
			// A parser that splits the input where it should not (an
			// unencoded '#' or '@' in a URL, a quote in a keyword's value)
			// quotes pieces of it.
			all = append(all, strings.FieldsFunc(f, func(r rune) bool { return strings.ContainsRune(splitters, r) || r <= ' ' })...)
		}
	}
	all = slices.DeleteFunc(all, func(s string) bool { return len(s) < minSecret })
	if len(all) == 0 {
		return
	}
	secrets.Lock()
	defer secrets.Unlock()
	list := append(slices.Clone(secrets.list), all...) // Redact may be reading the old one
	slices.SortFunc(list, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	secrets.list = slices.Compact(list)
}

// splitters are the characters at which parsers of URLs, DSNs and
// connection strings cut their input.
const splitters = `/#?%@:,;=&()'"\`

// passwordValue matches a password parameter or keyword and its value:
// ?password=x& or &sentinel_password=x in a URL, up to the next '&';
// password=x, password = x or password='x y' in a PostgreSQL connection
// string (whose quoted values escape ' and \ with a backslash), up to the
// next white space; sslpassword, passwd. The groups are the name and the
// value, 1 and 2 for a URL's, 3 and 4 for a keyword's.
var passwordValue = regexp.MustCompile(`(?i)([?&][a-z_]*pass[a-z_]*=)([^&]*)|([a-z_]*pass[a-z_]*\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)`)

// hidePasswords returns s with the values passwordValue matches hidden.
func hidePasswords(s string) string {
	return passwordValue.ReplaceAllString(s, "${1}${3}"+Hidden)
}

// secretsOf returns what may be a secret in the input in.
func secretsOf(in string) []string {
	var found []string
	for _, m := range passwordValue.FindAllStringSubmatch(in, -1) {
		v := m[2] + m[4]
		if m[3] != "" && strings.HasPrefix(v, "'") {
			inner := strings.TrimSuffix(v[1:], "'")
			found = append(found, inner, strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(inner))
		} else {
			found = append(found, v)
			if i := strings.IndexByte(v, '#'); m[1] != "" && i >= 0 {
				found = append(found, v[:i]) // or is it the URL's fragment?
			}
		}
	}
	// User information: what comes before an '@', from the scheme (or
	// the start, or a separator of a list) on; its password follows the
	// first ':'. Where the input starts is not known for sure (a password
	// may hold ',', ' ' or '@'), so every candidate is noted.
	for at := strings.IndexByte(in, '@'); at >= 0; {
		before := in[:at]
		starts := []int{0}
		if i := strings.LastIndex(before, "://"); i >= 0 {
			starts[0] = i + 3
		}
		if i := strings.LastIndexAny(before, ", \t\n"); i >= 0 {
			starts = append(starts, i+1)
		}
		for _, s := range starts {
			if s > len(before) {
				continue
			}
			info := before[s:]
			if _, pw, ok := strings.Cut(info, ":"); ok {
				found = append(found, pw)
			} else if isRedisScheme(before[:s]) {
				// A token with no user: redis://TOKEN@host. Elsewhere
				// (postgres://app@host) it is a user name, and hiding it
				// would hide every "postgres" the command writes.
				found = append(found, info)
			}
		}
		next := strings.IndexByte(in[at+1:], '@')
		if next < 0 {
			break
		}
		at += 1 + next
	}
	return found
}

// isRedisScheme reports whether prefix, what comes before a URL's user
// information, ends with the scheme redis:// or rediss://.
func isRedisScheme(prefix string) bool {
	p := strings.ToLower(prefix)
	return strings.HasSuffix(p, "redis://") || strings.HasSuffix(p, "rediss://")
}

// Redact returns s with every secret that NoteSecrets and NoteSecret
// recorded replaced by xxxxx.
func Redact(s string) string {
	secrets.Lock()
	list := secrets.list
	secrets.Unlock()
	for _, secret := range list {
		if strings.Contains(s, secret) {
			s = strings.ReplaceAll(s, secret, Hidden)
		}
	}
	return s
}

// RedactInput returns raw, one input that may carry a password (a URL, a
// DSN, a connection string, a list of servers), for a message that quotes
// it: the user information hidden, everything between the scheme (or the
// start) and the last '@', whether or not raw parses (a password with an
// unencoded '#', '/' or '?' makes the rest of it look like a path or a
// fragment); password parameters and keywords hidden; and what Redact
// hides. Control characters are left to the %q of the messages.
func RedactInput(raw string) string {
	raw = hidePasswords(raw)
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		scheme := ""
		if i := strings.Index(raw[:at], "://"); i >= 0 {
			scheme = raw[:i+3]
		}
		raw = scheme + Hidden + "@" + raw[at+1:]
	}
	return Redact(raw)
}

// RedactIn returns msg, a message of a parser given the input raw, with
// what may be raw's secret hidden: its password parameters and keywords,
// its user information and every tail of it, and every piece of it
// between characters a parser splits at, whether or not NoteSecrets saw
// raw.
func RedactIn(msg, raw string) string {
	msg = hidePasswords(msg)
	for _, s := range secretsOf(raw) {
		if len(s) >= minSecret {
			msg = strings.ReplaceAll(msg, s, Hidden)
		}
		for _, piece := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(splitters, r) || r <= ' ' }) {
			if len(piece) >= minSecret {
				msg = strings.ReplaceAll(msg, piece, Hidden)
			}
		}
	}
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		info := raw[:at]
		if i := strings.Index(info, "://"); i >= 0 {
			info = info[i+3:]
		}
		// The message may quote the input from where the parser lost its
		// way: hide every tail of the user information.
		for k := range len(info) {
			msg = strings.ReplaceAll(msg, info[k:]+"@", Hidden+"@")
		}
	}
	return Redact(msg)
}

// Redacting returns a writer that writes to w what it is given with what
// Redact hides hidden. Each Write should be whole lines, or a whole
// message: a secret cut between two writes is not found.
func Redacting(w io.Writer) io.Writer { return redacting{w} }

type redacting struct{ w io.Writer }

func (r redacting) Write(p []byte) (int, error) {
	s := Redact(string(p))
	if s == string(p) {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap returns the writer under w, if Redacting made w, and otherwise
// w: a child process given the command's streams (dlock run's COMMAND)
// writes to them directly, and a terminal stays one.
func Unwrap(w io.Writer) io.Writer {
	if r, ok := w.(redacting); ok {
		return r.w
	}
	return w
}
