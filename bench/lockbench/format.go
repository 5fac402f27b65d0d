package lockbench

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Result-table lookups and number formatting.

// med returns the median over repetitions of metric k.
func (r *Results) med(sc, name, k string) float64 {
	var v []float64
	for _, m := range r.runs[sc][name] {
		if m != nil {
			v = append(v, m[k])
		}
	}
	return median(v)
}

// rel returns the median over repetitions of name's metric k divided by
// ref's metric k in the same repetition; a repetition where either failed
// or ref's value is not positive is skipped.
func (r *Results) rel(sc, name, ref, k string) float64 {
	var v []float64
	a, b := r.runs[sc][name], r.runs[sc][ref]
	for i := range min(len(a), len(b)) {
		if a[i] != nil && b[i] != nil && b[i][k] > 0 {
			v = append(v, a[i][k]/b[i][k])
		}
	}
	return median(v)
}

func (r *Results) has(sc, name string) bool {
	for _, m := range r.runs[sc][name] {
		if m != nil {
			return true
		}
	}
	return false
}

func (r *Results) floor() string {
	for _, c := range r.contenders {
		if c.Floor {
			return c.Name
		}
	}
	return ""
}

func fmtInt(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	s := fmt.Sprintf("%.0f", x)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func fmtDur(ns float64) string {
	if math.IsNaN(ns) {
		return "n/a"
	}
	d := time.Duration(ns)
	a := math.Abs(ns)
	switch {
	case a >= float64(10*time.Millisecond):
		return fmt.Sprintf("%.1fms", ns/1e6)
	case a >= float64(time.Millisecond):
		return fmt.Sprintf("%.2fms", ns/1e6)
	case a >= float64(time.Microsecond):
		return fmt.Sprintf("%.1fµs", ns/1e3)
	}
	return d.String()
}

func fmtX(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	if math.Abs(x) >= 100 {
		return fmt.Sprintf("%.0f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

func fmtF(x float64, prec int) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.*f", prec, x)
}

func fmtBytes(x float64) string {
	switch {
	case math.IsNaN(x):
		return "n/a"
	case x >= 1<<20:
		return fmt.Sprintf("%.1f MiB", x/(1<<20))
	case x >= 1<<10:
		return fmt.Sprintf("%.0f KiB", x/(1<<10))
	}
	return fmt.Sprintf("%.0f B", x)
}

func passFail(ok bool) string {
	if ok {
		return "**PASS**"
	}
	return "**FAIL**"
}

// table writes a markdown table.
func table(b *strings.Builder, head []string, rows [][]string) {
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for range head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	b.WriteString("\n")
}
