package chaos

import (
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// Timeline geometry, in pixels.
const (
	tlRowHeight = 18
	tlTop       = 34 // room for the fault labels and the axis
	tlLeft      = 70 // room for the row labels
	tlMinWidth  = 1100
	tlPerSecond = 80 // horizontal scale: the page scrolls for long runs
)

// WriteTimeline writes a self-contained HTML page, viewable in a browser
// without a server, with a timeline of each result: every client's
// leases and critical sections, the faults, the fenced register's
// refusals, and the violations (red outside the documented limits, amber
// within them), each with its details on hover; and below it, by fault,
// how soon the lock came back and the Lock calls that failed instead of
// waiting.
func WriteTimeline(w io.Writer, results []*Result) error {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>dlock chaos timeline</title>
<style>
body{font:13px system-ui,sans-serif;margin:16px;color:#222}
h2{font-size:16px;margin:24px 0 4px}
.scroll{overflow-x:auto;border:1px solid #ccc}
.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle}
text{font:11px system-ui,sans-serif}
table.live{border-collapse:collapse;margin-top:6px}
table.live td,table.live th{border:1px solid #ccc;padding:2px 8px;text-align:right}
table.live td:first-child,table.live th:first-child{text-align:left}
</style></head><body>
<h1 style="font-size:18px">dlock chaos timeline</h1>
<p class="legend"><span><i class="sw" style="background:#9ecae1"></i>lease, valid from its grant to the first of its Until, Done and Release</span><span><i class="sw" style="background:#3182bd"></i>critical section</span><span><i class="sw" style="background:#fdae6b"></i>lease that ended lost</span><span><i class="sw" style="background:rgba(120,120,120,.25)"></i>fault</span><span><i class="sw" style="background:#222"></i>stale write refused by its fence</span><span><i class="sw" style="background:#d62728"></i>violation</span><span><i class="sw" style="background:#ff9f1c"></i>violation within a documented limit</span></p>
`)
	for _, r := range results {
		writeRunTimeline(&b, r)
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeRunTimeline(b *strings.Builder, r *Result) {
	v := r.Verdict
	var scratch Verdict
	p := parse(r.History.Events(), &scratch)
	clients := r.Options.Clients
	if clients == 0 {
		clients = len(p.clients)
	}
	dur := p.stop.Sub(p.start)
	width := max(tlMinWidth, int(dur.Seconds()*tlPerSecond))
	x := func(t Mono) float64 {
		if dur <= 0 {
			return tlLeft
		}
		return tlLeft + float64(t-p.start)/float64(dur)*float64(width)
	}
	y := func(client int) int { return tlTop + (client-1)*tlRowHeight }
	height := tlTop + clients*tlRowHeight + 10
	verdict := "within the documented limits"
	if !v.OK() {
		verdict = fmt.Sprintf("%d violations outside the documented limits", len(v.Failures()))
	}
	if n := len(v.Unexplained()) - len(v.Failures()); n > 0 {
		verdict += fmt.Sprintf(" (%d Lock failures not enforced yet)", n)
	}
	fmt.Fprintf(b, "<h2>%s: %v, %d clients, seed %d, %d faults, %d grants, %d Lock calls failed instead of waiting, register %s: %s</h2>\n",
		html.EscapeString(v.Backend), v.Duration.Round(time.Second), clients, r.Options.Seed, v.Faults, v.Grants,
		v.LockFailures, html.EscapeString(v.Register), verdict)
	fmt.Fprintf(b, `<div class="scroll"><svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">`+"\n", width+tlLeft+20, height)

	// The axis: a tick every second, labelled every five.
	for s := 0; float64(s) <= dur.Seconds(); s++ {
		xs := x(p.start.Add(time.Duration(s) * time.Second))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`, xs, tlTop, xs, height-10)
		if s%5 == 0 {
			fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="#888">%ds</text>`, xs+2, tlTop-4, s)
		}
	}
	for c := 1; c <= clients; c++ {
		fmt.Fprintf(b, `<text x="4" y="%d">client %d</text>`+"\n", y(c)+13, c)
	}
	for _, f := range p.faults {
		x0, x1 := x(f.start), x(f.end)
		fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="rgba(120,120,120,.25)"><title>%s, %v</title></rect>`,
			x0, tlTop-14, max(x1-x0, 2), height-tlTop+4, html.EscapeString(f.name), f.end.Sub(f.start).Round(time.Millisecond))
		fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="#555">%s</text>`+"\n", x0+2, tlTop-16, html.EscapeString(f.kind))
	}
	for _, l := range p.leases {
		fill := "#9ecae1"
		if l.lost {
			fill = "#fdae6b"
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>client %d, fence %d, valid %v</title></rect>`,
			x(l.start), y(l.client)+2, max(x(l.end)-x(l.start), 1), tlRowHeight-4, fill, l.client, l.fence, l.end.Sub(l.start).Round(time.Millisecond))
	}
	b.WriteString("\n")
	for _, s := range p.sections {
		fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#3182bd"><title>client %d in its critical section, fence %d, %v</title></rect>`,
			x(s.enter), y(s.client)+6, max(x(s.exit)-x(s.enter), 1), tlRowHeight-12, s.client, s.fence, s.exit.Sub(s.enter).Round(time.Millisecond))
	}
	b.WriteString("\n")
	for _, e := range p.refused {
		fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="3" height="%d" fill="#222"><title>client %d's write with fence %d refused: the register had seen %d</title></rect>`,
			x(e.At)-1, y(e.Client), tlRowHeight, e.Client, e.Fence, e.Max)
	}
	for _, vi := range v.Violations {
		color := "#d62728"
		if vi.Explained() {
			color = "#ff9f1c"
		}
		title := fmt.Sprintf("%s: %s", vi.Kind, vi.Detail)
		if vi.Fault != "" {
			title += " (after " + vi.Fault + ")"
		}
		if vi.Explained() {
			title += ". Documented limit: " + vi.Limit
		}
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"><title>%s</title></line>`+"\n",
			x(vi.At), tlTop, x(vi.At), height-10, color, html.EscapeString(title))
	}
	b.WriteString("</svg></div>\n")
	writeLivenessTable(b, v)
}

// writeLivenessTable writes the liveness by fault as an HTML table.
func writeLivenessTable(b *strings.Builder, v *Verdict) {
	ls := v.Liveness
	if len(ls) == 0 {
		return
	}
	fmt.Fprintf(b, `<table class="live"><tr><th>fault</th><th>faults</th><th>start to grant, median</th><th>max</th>`+
		`<th>heal to grant, median</th><th>p99</th><th>max</th><th>no grant after</th><th>over the target (%v from the heal)</th>`+
		`<th>Lock calls failed instead of waiting</th></tr>`+"\n", v.LivenessTarget)
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	for _, l := range ls {
		if l.Fault == "" {
			fmt.Fprintf(b, "<tr><td>no fault</td>%s<td>%d</td></tr>\n", strings.Repeat("<td></td>", 8), l.LockFailed)
			continue
		}
		times := strings.Repeat("<td>-</td>", 5)
		if l.Followed > 0 {
			times = fmt.Sprintf("<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>",
				ms(l.StartMedian), ms(l.StartMax), ms(l.HealMedian), ms(l.HealP99), ms(l.HealMax))
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td>%d</td>%s<td>%d</td><td>%d</td><td>%d</td></tr>\n",
			html.EscapeString(l.Fault), l.Faults, times, l.Faults-l.Followed, l.OverTarget, l.LockFailed)
	}
	b.WriteString("</table>\n")
}
