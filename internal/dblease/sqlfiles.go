package dblease

import (
	"io/fs"
	"strings"
)

// SQLFiles returns the reader of a dialect's statements, kept in files
// as sql/<name>.sql, each with a header comment that says what it does
// and what its parameters are: it returns the statement called name, its
// header dropped (it is for the reader of the file, not for every round
// trip and the server's list of sessions; comments further down stay),
// with r's replacements made. It panics, naming package pkg, if there is
// no such file: the package embeds every file it reads.
func SQLFiles(pkg string, files fs.FS, r *strings.Replacer) func(name string) string {
	return func(name string) string {
		b, err := fs.ReadFile(files, "sql/"+name+".sql")
		if err != nil {
			panic(pkg + ": missing embedded sql/" + name + ".sql")
		}
		return r.Replace(stripHeader(string(b)))
	}
}

// stripHeader drops text's leading comment lines.
func stripHeader(text string) string {
	for strings.HasPrefix(text, "--") {
		_, rest, _ := strings.Cut(text, "\n")
		text = rest
	}
	return strings.TrimSpace(text)
}
