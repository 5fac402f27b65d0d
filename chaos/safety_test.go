package chaos

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// short names of the kinds of violation, for the matrix.
var shortKind = map[Kind]string{LeaseOverlap: "lease overlaps", SectionOverlap: "section overlaps", LostUpdate: "lost updates",
	FenceRegression: "fence regressions", HolderRefused: "refused holders", StaleWrite: "stale writes accepted"}

// expectationMatrix renders Expect as the Markdown table docs/SAFETY.md
// holds: a row per fault, a column per backend, and in each cell what the
// fault may cause there ("none": every violation is a failure).
func expectationMatrix() string {
	var faults []string
	for _, b := range Backends {
		fs := recordedFaults(b)
		for i, f := range fs {
			if slices.Contains(faults, f) {
				continue
			}
			at := len(faults)
			if i > 0 && !slices.Contains(FaultsFor(b), f) { // recorded only: after the fault it is recorded for

				if j := slices.Index(faults, fs[i-1]); j >= 0 {
					at = j + 1
				}
			}
			faults = slices.Insert(faults, at, f)
		}
	}
	var sb strings.Builder
	sb.WriteString("| fault | " + strings.Join(Backends, " | ") + " |\n|---|" + strings.Repeat("---|", len(Backends)) + "\n")
	for _, f := range faults {
		sb.WriteString("| " + f + " |")
		for _, b := range Backends {
			cell := "n/a"
			if slices.Contains(recordedFaults(b), f) {
				var ks []string
				for _, k := range Allowed(b, f) {
					ks = append(ks, shortKind[k])
				}
				cell = "none"
				if len(ks) > 0 {
					cell = strings.Join(ks, ", ")
				}
			}
			sb.WriteString(" " + cell + " |")
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// docs/SAFETY.md states the matrix that Expect implements.
func TestSafetyDocMatchesExpect(t *testing.T) {
	doc, err := os.ReadFile("../docs/SAFETY.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- expect:begin -->\n", "<!-- expect:end -->"
	_, rest, ok1 := strings.Cut(string(doc), begin)
	table, _, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("docs/SAFETY.md lacks the %q ... %q markers", begin, end)
	}
	if want := expectationMatrix(); table != want {
		t.Errorf("docs/SAFETY.md's matrix differs from Expect; replace it with:\n%s", want)
	}
}
