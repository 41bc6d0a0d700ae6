package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"strings"

	"github.com/rdmabot/rdmabot/reports/stats"
)

// Chart colours: base and patched series (also checked by the
// screenshot test).
const (
	BaseColor    = "#1f5fbf"
	PatchedColor = "#d9331a"
)

// RenderHTML writes the run page: the verdict, the table, and one inline
// SVG chart per metric of every iteration, base against patched. It has
// no scripts and no external resources, so it can be archived as is.
func RenderHTML(c *Config, v *Verdict) ([]byte, error) {
	var charts []template.HTML
	for _, m := range v.In.Metrics {
		charts = append(charts, template.HTML(chartSVG(m)))
	}
	var console string
	switch {
	case v.Crash != nil:
		console = v.Crash.Console
	case v.In.Boot != nil:
		console = v.In.Boot.Console
	}
	var rows [][]string
	if len(v.Decision.Comparisons) > 0 {
		rows = metricRows(v.Decision)
	}
	data := map[string]any{
		"Bot": botName(c), "Outcome": v.Outcome.String(), "Sentence": Sentence(c, v), "Title": Title(v),
		"Provenance": provenance(v.In.Base), "Info": infoBlock(v), "Rows": rows,
		"Charts": charts, "Console": console, "Subject": v.In.Thread.Subject,
		"Base": BaseColor, "Patched": PatchedColor,
	}
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

var pageTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{.Bot}}: {{.Outcome}}: {{.Subject}}</title>
<style>
body{font:15px/1.4 sans-serif;margin:2em;color:#222;background:#fff;max-width:64em}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto}
table{border-collapse:collapse}td,th{padding:.2em .7em;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}
.v{font-weight:bold}.key span{display:inline-block;width:1em;height:.6em;margin:0 .3em 0 1em}
</style></head><body>
<h1>{{.Outcome}}</h1>
<p><b>{{.Subject}}</b></p>
<p class="v">{{.Sentence}}</p>
{{if .Title}}<pre>{{.Title}}</pre>{{end}}
<p><code>{{.Provenance}}</code></p>
{{if .Rows}}<table>{{range $i, $r := .Rows}}<tr>{{range $r}}{{if eq $i 0}}<th>{{.}}</th>{{else}}<td>{{.}}</td>{{end}}{{end}}</tr>{{end}}</table>{{end}}
{{if .Charts}}<h2>Every iteration</h2>
<p class="key"><span style="background:{{.Base}}"></span>base <span style="background:{{.Patched}}"></span>patched</p>
{{range .Charts}}{{.}}{{end}}{{end}}
{{if .Console}}<h2>Console</h2><pre>{{.Console}}</pre>{{end}}
<h2>How it was tested</h2>
<pre>{{.Info}}</pre>
</body></html>
`))

// chartSVG plots every iteration of every run in run order, base and
// patched on one axis, so a drift, a warm-up or an outlier run shows.
func chartSVG(m stats.Metric) string {
	const w, h, left, right, top, bottom = 720.0, 260.0, 60.0, 10.0, 24.0, 34.0
	flat := func(runs [][]float64) []float64 {
		var out []float64
		for _, r := range runs {
			out = append(out, r...)
		}
		return out
	}
	base, cand := flat(m.Base), flat(m.Cand)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range append(append([]float64{}, base...), cand...) {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if len(base)+len(cand) == 0 {
		return ""
	}
	pad := math.Max((hi-lo)*0.1, math.Abs(hi)*0.01)
	lo, hi = lo-pad, hi+pad
	n := max(len(base), len(cand))
	x := func(i int) float64 {
		if n == 1 {
			return left + (w-left-right)/2
		}
		return left + float64(i)*(w-left-right)/float64(n-1)
	}
	y := func(v float64) float64 { return top + (hi-v)/(hi-lo)*(h-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s per iteration">`, w, h, w, h, template.HTMLEscapeString(m.Name))
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="#fff" stroke="#999"/>`, left, top, w-left-right, h-top-bottom)
	label := m.Name
	if m.Unit != "" {
		label += " (" + m.Unit + ")"
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="16" font-size="13" font-family="sans-serif">%s, every iteration in run order</text>`, left, template.HTMLEscapeString(label))
	for i := 0; i <= 4; i++ {
		v := lo + (hi-lo)*float64(i)/4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="11" text-anchor="end" font-family="sans-serif">%.3g</text>`, left-4, y(v)+4, v)
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/>`, left, w-right, y(v), y(v))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="middle" font-family="sans-serif">iteration (runs interleaved base, patched)</text>`, (left+w-right)/2, h-8)
	series := func(vals []float64, color string) {
		var pts []string
		for i, v := range vals {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2.5" points="%s"/>`, color, strings.Join(pts, " "))
		for i, v := range vals {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`, x(i), y(v), color)
		}
	}
	series(base, BaseColor)
	series(cand, PatchedColor)
	b.WriteString(`</svg>`)
	return b.String()
}
