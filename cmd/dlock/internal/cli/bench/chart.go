package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strings"
	"time"
)

// The chart's geometry, in SVG user units.
const (
	chartWidth   = 960
	chartHeight  = 540
	plotLeft     = 80
	plotTop      = 56
	plotWidth    = 560
	plotHeight   = 400
	legendLeft   = plotLeft + plotWidth + 30
	legendRow    = 20
	xStep        = 0.02 // between plotted points, in nines
	maxLabelRune = 38
)

// palette is Tableau 10: distinct on white and for most colour blindness.
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// chart returns a self-contained SVG image of the latency distributions: a
// percentile plot with one line per result that has latencies. The x axis
// is in nines (0%, 90%, 99%, 99.9%, ...), so that the tail gets as much room
// as the median; the y axis is logarithmic.
func (rep *report) chart() []byte {
	var series []*Result
	for _, res := range rep.Results {
		if res.Latency.Count() > 0 {
			series = append(series, res)
		}
	}
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight)
	title := fmt.Sprintf("dlock bench: latency by percentile, %s %s, --kind %s", rep.Kind, strings.Join(rep.Addresses, ","), kindLabel(rep.Options))
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(&b, "<desc>%s</desc>\n", esc(fmt.Sprintf("Measured %s, %v per scenario. x: percentile (nines scale); y: latency (log scale). Cycle = TryLock + Release; hand-over = Release call to the next holder's Lock returning; wait = Lock call to return.",
		rep.Started.UTC().Format(time.RFC3339), rep.Options.Duration)))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", chartWidth, chartHeight)
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="15" font-weight="bold">%s</text>`+"\n", plotLeft, esc(title))

	if len(series) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d">no latencies were recorded</text>`+"\n", plotLeft, plotTop+plotHeight/2)
		b.WriteString("</svg>\n")
		return b.Bytes()
	}

	// Scales: x in nines up to the largest count; y in decades around
	// every value.
	xMax, lo, hi := 1.0, time.Duration(math.MaxInt64), time.Duration(1)
	for _, s := range series {
		xMax = max(xMax, math.Ceil(nines(s.Latency.Count())))
		lo, hi = min(lo, max(s.Latency.Min(), 1)), max(hi, s.Latency.Max())
	}
	yLo, yHi := math.Floor(math.Log10(float64(lo))), math.Ceil(math.Log10(float64(hi)))
	if yHi <= yLo {
		yHi = yLo + 1
	}
	px := func(x float64) float64 { return plotLeft + x/xMax*plotWidth }
	py := func(d time.Duration) float64 {
		v := math.Log10(float64(max(d, 1)))
		return plotTop + plotHeight - (v-yLo)/(yHi-yLo)*plotHeight
	}

	// Grid and axes.
	b.WriteString(`<g class="grid" stroke="#dddddd" stroke-width="1">` + "\n")
	for x := 0.0; x <= xMax; x++ {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`+"\n", px(x), plotTop, px(x), plotTop+plotHeight)
	}
	var yTicks []time.Duration
	for e := yLo; e <= yHi; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v > math.Pow(10, yHi) || m != 1 && yHi-yLo > 3 {
				continue
			}
			yTicks = append(yTicks, time.Duration(v))
		}
	}
	for _, t := range yTicks {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`+"\n", plotLeft, py(t), plotLeft+plotWidth, py(t))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<rect class="frame" x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333333"/>`+"\n", plotLeft, plotTop, plotWidth, plotHeight)
	b.WriteString(`<g class="labels" fill="#333333">` + "\n")
	for x := 0.0; x <= xMax; x++ {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(x), plotTop+plotHeight+18, esc(ninesLabel(int(x))))
	}
	for _, t := range yTicks {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", plotLeft-8, py(t), esc(formatDuration(t)))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">percentile</text>`+"\n", plotLeft+plotWidth/2, plotTop+plotHeight+42)
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">latency (log scale)</text>`+"\n", plotTop+plotHeight/2)
	b.WriteString("</g>\n")

	// One line per result, and its legend entry.
	for i, s := range series {
		color := palette[i%len(palette)]
		fmt.Fprintf(&b, `<g class="series" data-scenario="%s">`+"\n", esc(s.Label()))
		fmt.Fprintf(&b, "<title>%s</title>\n", esc(seriesLabel(s)))
		fmt.Fprintf(&b, `<polyline class="series" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round" stroke-linecap="round" points="`, color)
		for j, p := range percentilePoints(&s.Latency) {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", px(p.x), py(p.d))
		}
		b.WriteString(`"/>` + "\n")
		y := plotTop + 8 + i*legendRow
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", legendLeft, y, legendLeft+22, y, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", legendLeft+30, y, esc(truncate(seriesLabel(s), maxLabelRune)))
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// point is one point of a percentile plot: x in nines, d the latency.
type point struct {
	x float64
	d time.Duration
}

// percentilePoints samples l's quantiles every xStep nines, up to the
// nines of its count, where the maximum ends the line.
func percentilePoints(l *Recorder) []point {
	last := nines(l.Count())
	var pts []point
	for x := 0.0; x < last; x += xStep {
		pts = append(pts, point{x, l.Quantile(1 - math.Pow(10, -x))})
	}
	pts = append(pts, point{last, l.Max()})
	if len(pts) == 1 {
		pts = append(pts, pts[0]) // one value: a dot, drawn by the round cap
	}
	return pts
}

// nines returns the x of the last of n values: log10(n), the nines of the
// quantile 1-1/n.
func nines(n int64) float64 { return math.Log10(float64(max(n, 1))) }

// ninesLabel names the percentile n nines from zero: 0%, 90%, 99%, 99.9%...
func ninesLabel(n int) string {
	switch n {
	case 0:
		return "0%"
	case 1:
		return "90%"
	case 2:
		return "99%"
	}
	return "99." + strings.Repeat("9", n-2) + "%"
}

func seriesLabel(s *Result) string {
	return fmt.Sprintf("%s %s: %s", s.Label(), s.Measures, s.Description)
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// esc escapes s for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}
