package report

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/ipfence/ipfence/verify/history"
)

// The plots are 1200×600 px: at 96 dpi that is 900×450 pt, the size the
// fonts and line widths below are chosen for.
const (
	pngWidth  = 1200
	pngHeight = 600
	pngDPI    = 96
)

// Outcome colours, as on the timeline page.
var outcomeColors = [...]color.NRGBA{
	okOut:   {0x5a, 0xa8, 0x60, 0xff},
	failOut: {0xd9, 0x47, 0x3f, 0xff},
	infoOut: {0xf0, 0xa3, 0x3a, 0xff},
}

// faultHues colour the faults by name, in order of first appearance, as on
// the timeline page.
var faultHues = [...]color.NRGBA{
	{226, 74, 51, 0}, {52, 108, 214, 0}, {150, 84, 196, 0},
	{16, 148, 136, 0}, {196, 140, 12, 0}, {110, 110, 110, 0},
}

// glyphShapes tell the functions apart on the latency plot.
var glyphShapes = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.RingGlyph{},
	draw.CrossGlyph{}, draw.PlusGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{},
}

// LatencyPNG draws the latency of every completed client operation against
// the time it was invoked, a point per operation coloured by outcome and
// shaped by function, on a log scale, with the fault periods shaded and
// named. Operations that never completed have no latency and are left out.
func LatencyPNG(path string, events []history.Event, faults []Fault) error {
	f, err := latencyFigure(events, faults)
	if err != nil {
		return fmt.Errorf("latency plot %s: %w", path, err)
	}
	return f.writePNG(path)
}

// RatePNG draws the throughput: completions per second of client
// operations, a line per outcome, counted in buckets of one second (less
// when the test is short, more when it is very long), with the fault
// periods shaded and named.
func RatePNG(path string, events []history.Event, faults []Fault) error {
	f, err := rateFigure(events, faults)
	if err != nil {
		return fmt.Errorf("rate plot %s: %w", path, err)
	}
	return f.writePNG(path)
}

// figure is a plot with its legend, which is drawn beside the data rather
// than over it, so that it hides no point.
type figure struct {
	p      *plot.Plot
	bands  *bands
	legend []legendEntry
}

type legendEntry struct {
	name  string
	thumb plot.Thumbnailer
}

// seconds converts nanoseconds to the plots' time unit.
func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// newFigure starts a plot whose x axis is the test's time in seconds, with
// the faults shaded behind whatever is added next.
func newFigure(r *run, title, ylabel string) *figure {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = "time since the test started (s)"
	p.X.Tick.Marker = plot.TickerFunc(timeTicks)
	p.Y.Label.Text = ylabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(11)
		a.Tick.Label.Font.Size = vg.Points(10)
	}
	b := newBands(r)
	f := &figure{p: p, bands: b}
	p.Add(b)
	for _, name := range b.names {
		f.legend = append(f.legend, legendEntry{name, swatch(b.colors[name])})
	}
	return f
}

// finish fixes the x axis to the whole test, adds the fault names over
// the data, and applies the y range.
func (f *figure) finish(r *run, ymin, ymax float64) {
	f.p.X.Min, f.p.X.Max = 0, math.Max(seconds(r.end), 1e-3)
	f.p.Y.Min, f.p.Y.Max = ymin, ymax
	labels := *f.bands
	labels.labels = true
	f.p.Add(&labels)
}

// render draws the figure and returns the image and the canvas of the data
// area, through which data coordinates map to pixels.
func (f *figure) render() (*vgimg.Canvas, draw.Canvas) {
	c := vgimg.NewWith(
		vgimg.UseWH(vg.Length(pngWidth)*vg.Inch/pngDPI, vg.Length(pngHeight)*vg.Inch/pngDPI),
		vgimg.UseDPI(pngDPI))
	dc := draw.New(c)
	sty := legendStyle()
	var textW vg.Length
	for _, e := range f.legend {
		textW = max(textW, sty.Width(e.name))
	}
	const thumbW, gap = vg.Length(18), vg.Length(6)
	right := vg.Length(12)
	if len(f.legend) > 0 {
		right += thumbW + gap + textW
	}
	area := draw.Crop(dc, 0, -right, 0, 0)
	area = draw.Crop(area, vg.Points(4), 0, vg.Points(4), -vg.Points(6))
	f.p.Draw(area)
	data := f.p.DataCanvas(area)

	// The legend: a thumbnail and a name per line, from the top of the
	// data area down.
	lineH := sty.FontExtents().Height * 1.35
	x := area.Max.X + vg.Points(10)
	y := data.Max.Y - lineH
	for _, e := range f.legend {
		thumb := &draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x, Y: y}, Max: vg.Point{X: x + thumbW, Y: y + lineH*0.8}}}
		e.thumb.Thumbnail(thumb)
		dc.FillText(sty, vg.Point{X: x + thumbW + gap, Y: y + lineH*0.4}, e.name)
		y -= lineH
	}
	return c, data
}

func legendStyle() text.Style {
	return text.Style{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, vg.Points(10)),
		Handler: plot.DefaultTextHandler,
		YAlign:  draw.YCenter,
	}
}

// writePNG renders the figure into the file at path.
func (f *figure) writePNG(path string) (err error) {
	c, _ := f.render()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("writing %s: %w", path, cerr)
		}
	}()
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(out); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// latencyFloor is the smallest latency drawn: a log scale has no 0, and an
// operation whose invoke and completion share a clock reading took less
// than a microsecond.
const latencyFloor = time.Microsecond

func latencyFigure(events []history.Event, faults []Fault) (*figure, error) {
	r, err := prepare(events, faults)
	if err != nil {
		return nil, err
	}
	ops := r.completed()
	f := newFigure(r, fmt.Sprintf("Latency of %d completed operations", len(ops)), "latency (log scale)")
	p := f.p
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.TickerFunc(latencyTicks)

	// A series per (outcome, f): colour says the outcome, shape the f.
	var fs []string
	for _, s := range ops {
		if !slices.Contains(fs, s.f) {
			fs = append(fs, s.f)
		}
	}
	series := make(map[[2]int]plotter.XYs)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ops {
		ms := float64(max(time.Duration(s.end-s.start), latencyFloor)) / float64(time.Millisecond)
		lo, hi = min(lo, ms), max(hi, ms)
		k := [2]int{int(s.outcome), slices.Index(fs, s.f)}
		series[k] = append(series[k], plotter.XY{X: seconds(s.start), Y: ms})
	}
	// ok first, so that the rarer fail and info points are drawn on top.
	for _, o := range []outcome{okOut, infoOut, failOut} {
		for fi := range fs {
			xy := series[[2]int{int(o), fi}]
			if len(xy) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(xy)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle = pointStyle(o, fi)
			p.Add(sc)
		}
	}
	for _, o := range []outcome{okOut, failOut, infoOut} {
		n := 0
		for fi := range fs {
			n += len(series[[2]int{int(o), fi}])
		}
		if n > 0 {
			sty := pointStyle(o, 0)
			sty.Radius = vg.Points(3)
			f.legend = append(f.legend, legendEntry{fmt.Sprintf("%s (%d)", o, n), glyphThumb(sty)})
		}
	}
	if len(fs) > 1 {
		for fi, name := range fs {
			sty := pointStyle(okOut, fi)
			sty.Color = color.NRGBA{0x4a, 0x55, 0x63, 0xff}
			sty.Radius = vg.Points(3)
			f.legend = append(f.legend, legendEntry{name, glyphThumb(sty)})
		}
	}
	if len(ops) == 0 {
		lo, hi = 1, 1000
	}
	// The axis starts at a whole decade, so that it has at least one
	// labelled tick, below the fastest op so that no point sits on the
	// edge; above the slowest there is room for the fault names (slow ops
	// are often timeouts, all at one latency).
	ymin := math.Pow(10, math.Floor(math.Log10(lo/1.2)))
	f.finish(r, ymin, hi*1.5)
	return f, nil
}

// timeTicks labels round numbers of seconds, 5 to 12 of them, with
// unlabelled ticks between.
func timeTicks(lo, hi float64) []plot.Tick {
	span := hi - lo
	if !(span > 0) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', -1, 64)}}
	}
	step, minor := 0.0, 0.0
	for e := math.Pow(10, math.Floor(math.Log10(span/12))); step == 0; e *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if span/(m*e) <= 12 {
				step, minor = m*e, m*e/map[float64]float64{1: 5, 2: 4, 5: 5}[m]
				break
			}
		}
	}
	dec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	var ticks []plot.Tick
	for i := math.Ceil(lo / minor); i*minor <= hi+minor*1e-9; i++ {
		v := i * minor
		t := plot.Tick{Value: v}
		if n := v / step; math.Abs(n-math.Round(n)) < 1e-6 {
			t.Label = strconv.FormatFloat(math.Round(n)*step, 'f', dec, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// latencyTicks labels each decade of a log axis in milliseconds with its
// unit ("100 µs", "1 ms", "1 s"), with unlabelled ticks at 2–9 times it.
func latencyTicks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		d := math.Pow(10, e)
		if d >= lo*(1-1e-9) && d <= hi*(1+1e-9) {
			ticks = append(ticks, plot.Tick{Value: d, Label: fmt.Sprint(time.Duration(math.Round(d * float64(time.Millisecond))))})
		}
		for m := 2.0; m < 10; m++ {
			if v := m * d; v >= lo && v <= hi {
				ticks = append(ticks, plot.Tick{Value: v})
			}
		}
	}
	return ticks
}

// pointStyle is the glyph of one latency point. Points are small and a
// little translucent, so that where thousands overlap the density shows.
func pointStyle(o outcome, fi int) draw.GlyphStyle {
	c := outcomeColors[o]
	c.A = 0xc0
	return draw.GlyphStyle{Color: c, Radius: vg.Points(1.6), Shape: glyphShapes[fi%len(glyphShapes)]}
}

// rateBucket picks the bucket width for a test lasting end: one second,
// unless that gives fewer than 30 buckets (a short test: a round fraction
// of a second) or more than 2000 (a round number of seconds).
func rateBucket(end time.Duration) time.Duration {
	steps := []time.Duration{}
	for e := time.Millisecond; e <= time.Hour; e *= 10 {
		steps = append(steps, e, 2*e, 5*e)
	}
	switch {
	case end < 30*time.Second:
		for i := len(steps) - 1; i >= 0; i-- {
			if steps[i] <= time.Second && end/steps[i] >= 30 {
				return steps[i]
			}
		}
		return time.Millisecond
	case end > 2000*time.Second:
		for _, s := range steps {
			if end/s <= 2000 {
				return s
			}
		}
	}
	return time.Second
}

func rateFigure(events []history.Event, faults []Fault) (*figure, error) {
	r, err := prepare(events, faults)
	if err != nil {
		return nil, err
	}
	width := rateBucket(time.Duration(r.end))
	n := int(r.end/int64(width)) + 1
	var counts [3][]int
	for o := range counts {
		counts[o] = make([]int, n)
	}
	var total [3]int
	for _, s := range r.spans {
		if s.outcome > infoOut {
			continue
		}
		b := min(max(int(s.end/int64(width)), 0), n-1)
		counts[s.outcome][b]++
		total[s.outcome]++
	}
	f := newFigure(r, fmt.Sprintf("Throughput: completions per second, in %v buckets", width), "completions per second (ops/s)")
	hi := 0.0
	for _, o := range []outcome{okOut, infoOut, failOut} {
		if total[o] == 0 {
			continue
		}
		xy := make(plotter.XYs, n)
		for b := range n {
			// The last bucket ends with the test, so its rate is over the
			// part of it the test covered.
			from := int64(b) * int64(width)
			covered := min(int64(width), r.end-from)
			if covered <= 0 {
				covered = int64(width)
			}
			rate := float64(counts[o][b]) / seconds(covered)
			xy[b] = plotter.XY{X: seconds(from + covered/2), Y: rate}
			hi = max(hi, rate)
		}
		line, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		line.LineStyle = draw.LineStyle{Color: outcomeColors[o], Width: vg.Points(1.5)}
		f.p.Add(line)
	}
	for _, o := range []outcome{okOut, failOut, infoOut} {
		if total[o] > 0 {
			f.legend = append(f.legend, legendEntry{fmt.Sprintf("%s (%d)", o, total[o]),
				lineThumb(draw.LineStyle{Color: outcomeColors[o], Width: vg.Points(2)})})
		}
	}
	if hi == 0 {
		hi = 1
	}
	f.finish(r, 0, hi*1.08)
	return f, nil
}

// bands shades the fault periods across the data area, or, with labels,
// writes their names along its top edge.
type bands struct {
	spans  []band
	names  []string // distinct names, in order of first appearance
	colors map[string]color.NRGBA
	labels bool
}

type band struct {
	name     string
	from, to float64 // s
	open     bool
	level    int // row of the name, so that overlapping faults' names do not collide
}

func newBands(r *run) *bands {
	b := &bands{colors: make(map[string]color.NRGBA)}
	for _, f := range r.faults {
		if _, ok := b.colors[f.name]; !ok {
			b.colors[f.name] = faultHues[len(b.names)%len(faultHues)]
			b.names = append(b.names, f.name)
		}
		b.spans = append(b.spans, band{name: f.name, from: seconds(f.start), to: seconds(f.end), open: f.open})
	}
	// Overlapping faults take successive rows for their names, first fit
	// in order of start.
	order := make([]int, len(b.spans))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		return cmp.Compare(b.spans[i].from, b.spans[j].from)
	})
	var rowEnds []float64
	for _, i := range order {
		s := &b.spans[i]
		row := slices.IndexFunc(rowEnds, func(end float64) bool { return end <= s.from })
		if row < 0 {
			row = len(rowEnds)
			rowEnds = append(rowEnds, 0)
		}
		rowEnds[row] = s.to
		s.level = row
	}
	return b
}

// minBand is the narrowest a band is drawn, so that a fault that came and
// went within a pixel still shows.
const minBand = vg.Length(1.5)

// Plot implements plot.Plotter.
func (b *bands) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	sty := legendStyle()
	sty.Font.Size = vg.Points(9)
	sty.YAlign = draw.YBottom
	lineH := sty.FontExtents().Height * 1.25
	for _, s := range b.spans {
		x0, x1 := trX(s.from), trX(s.to)
		if x1-x0 < minBand {
			x1 = x0 + minBand
		}
		x0, x1 = max(x0, c.Min.X), min(x1, c.Max.X)
		if x1 <= x0 {
			continue
		}
		col := b.colors[s.name]
		if !b.labels {
			col.A = 0x2c
			c.FillPolygon(col, rect(x0, c.Min.Y, x1, c.Max.Y))
			continue
		}
		name := s.name
		if s.open {
			name += " (until the end)"
		}
		w := sty.Width(name) + vg.Points(6)
		if w > x1-x0 {
			continue // too narrow to name: the legend names its colour
		}
		y := c.Max.Y - lineH*vg.Length(s.level+1) - vg.Points(2)
		c.FillPolygon(color.NRGBA{255, 255, 255, 0xc8}, rect(x0+vg.Points(1), y, x0+w, y+lineH))
		col.A = 0xff
		c.FillPolygon(col, rect(x0, y, x0+vg.Points(2), y+lineH))
		c.FillText(sty, vg.Point{X: x0 + vg.Points(4), Y: y + vg.Points(1.5)}, name)
	}
}

func rect(x0, y0, x1, y1 vg.Length) []vg.Point {
	return []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
}

// Legend thumbnails.
type (
	glyphThumb draw.GlyphStyle
	lineThumb  draw.LineStyle
	swatch     color.NRGBA
)

func (g glyphThumb) Thumbnail(c *draw.Canvas) { c.DrawGlyph(draw.GlyphStyle(g), c.Center()) }

func (l lineThumb) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(draw.LineStyle(l), c.Min.X, y, c.Max.X, y)
}

func (s swatch) Thumbnail(c *draw.Canvas) {
	col := color.NRGBA(s)
	col.A = 0x60
	c.FillPolygon(col, rect(c.Min.X, c.Min.Y, c.Max.X, c.Max.Y))
}
