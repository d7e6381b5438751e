package report

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/ipfence/ipfence/verify/history"
)

// readPNG decodes the PNG at path and checks its size.
func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s does not decode as PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != pngWidth || b.Dy() != pngHeight {
		t.Errorf("%s is %d×%d px, want %d×%d", path, b.Dx(), b.Dy(), pngWidth, pngHeight)
	}
	return img
}

// early is a history whose operations all run in the first 2 s, with a
// fault from 5 s to 8 s and a nemesis event at 10 s that ends the test:
// from 2 s on, the plots' data areas are empty but for the fault's band.
func early() ([]history.Event, []Fault) {
	var b builder
	for i := range 20 {
		at := float64(i) * 100
		p := history.Process(i % 2)
		b.invoke(p, "read", nil, at)
		typ := history.OK
		if i%5 == 4 {
			typ = history.Fail
		}
		b.done(p, typ, "read", int64(i), at+1+float64(i%10))
	}
	b.invoke(history.Nemesis, "stop", nil, 10_000)
	return b.events, []Fault{{Name: "partition halves", Start: 5 * time.Second, End: 8 * time.Second}}
}

// pixel returns the colour at data coordinates (x, y) of a figure drawn
// into img.
func pixel(t *testing.T, f *figure, img image.Image, x, y float64) color.RGBA {
	t.Helper()
	_, data := f.render()
	trX, trY := f.p.Transforms(&data)
	px := int(math.Round(float64(trX(x) / vg.Inch * pngDPI)))
	py := pngHeight - int(math.Round(float64(trY(y)/vg.Inch*pngDPI)))
	if !(image.Point{px, py}.In(img.Bounds())) {
		t.Fatalf("data point (%g, %g) is at pixel (%d, %d), outside the image", x, y, px, py)
	}
	r, g, b, _ := img.At(px, py).RGBA()
	return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}
}

// bandTint is the fault band's first colour over white, as drawn.
func bandTint() color.RGBA {
	h := faultHues[0]
	a := 0x2c / 255.0
	mix := func(c uint8) uint8 { return uint8(math.Round(255*(1-a) + float64(c)*a)) }
	return color.RGBA{mix(h.R), mix(h.G), mix(h.B), 255}
}

func near(a, b color.RGBA) bool {
	d := func(x, y uint8) bool { return math.Abs(float64(x)-float64(y)) <= 3 }
	return d(a.R, b.R) && d(a.G, b.G) && d(a.B, b.B)
}

// checkBand checks that the band is drawn: at the same height, in the
// empty part of the data area, a pixel inside the fault (6.5 s) has the
// band's tint and one outside it (9 s) is white.
func checkBand(t *testing.T, f *figure, path string, y float64) {
	t.Helper()
	img := readPNG(t, path)
	in, out := pixel(t, f, img, 6.5, y), pixel(t, f, img, 9, y)
	white := color.RGBA{255, 255, 255, 255}
	if !near(in, bandTint()) || out != white {
		t.Errorf("inside the fault %v (want about %v), outside %v (want %v)", in, bandTint(), out, white)
	}
}

func TestLatencyPNG(t *testing.T) {
	events, faults := early()
	path := filepath.Join(t.TempDir(), "latency.png")
	if err := LatencyPNG(path, events, faults); err != nil {
		t.Fatal(err)
	}
	f, err := latencyFigure(events, faults)
	if err != nil {
		t.Fatal(err)
	}
	// Latencies run from 1 to 10 ms: y from the decade below to half as
	// much again above, x over the whole test.
	if f.p.Y.Min != 0.1 || f.p.Y.Max != 15 || f.p.X.Min != 0 || f.p.X.Max != 10 {
		t.Errorf("axes x [%g, %g] y [%g, %g], want [0, 10] and [0.1, 15]", f.p.X.Min, f.p.X.Max, f.p.Y.Min, f.p.Y.Max)
	}
	names := []string{}
	for _, e := range f.legend {
		names = append(names, e.name)
	}
	if got, want := names, []string{"partition halves", "ok (16)", "fail (4)"}; !slices.Equal(got, want) {
		t.Errorf("legend %q, want %q", got, want)
	}
	checkBand(t, f, path, 0.5)
}

func TestRatePNG(t *testing.T) {
	events, faults := early()
	path := filepath.Join(t.TempDir(), "rate.png")
	if err := RatePNG(path, events, faults); err != nil {
		t.Fatal(err)
	}
	f, err := rateFigure(events, faults)
	if err != nil {
		t.Fatal(err)
	}
	// A 10 s test has 200 ms buckets; the busiest holds 2 ok reads, 10/s.
	if f.p.Title.Text != "Throughput: completions per second, in 200ms buckets" || math.Abs(f.p.Y.Max-10*1.08) > 1e-9 {
		t.Errorf("title %q, y max %g; want 200ms buckets and %g", f.p.Title.Text, f.p.Y.Max, 10*1.08)
	}
	checkBand(t, f, path, f.p.Y.Max/2)
}

func TestRateBucket(t *testing.T) {
	for _, c := range []struct{ end, want time.Duration }{
		{0, time.Millisecond},
		{20 * time.Millisecond, time.Millisecond},
		{10 * time.Second, 200 * time.Millisecond},
		{29 * time.Second, 500 * time.Millisecond},
		{30 * time.Second, time.Second},
		{2000 * time.Second, time.Second},
		{3 * time.Hour, 10 * time.Second},
	} {
		if got := rateBucket(c.end); got != c.want {
			t.Errorf("rateBucket(%v) = %v, want %v", c.end, got, c.want)
		}
	}
}

// Tiny histories draw empty plots, with whatever faults there are.
func TestPNGEmpty(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		events []history.Event
		faults []Fault
	}{
		{"nothing", nil, nil},
		{"faults only", nil, []Fault{{Name: "f", Start: time.Second}}},
		{"nemesis only", []history.Event{
			{Process: history.Nemesis, Type: history.Invoke, F: "kill", Time: ms(1)},
			{Process: history.Nemesis, Type: history.Info, F: "kill", Time: ms(2)},
		}, nil},
		{"one op", []history.Event{
			{Process: 0, Type: history.Invoke, F: "read", Time: ms(1)},
			{Process: 0, Type: history.OK, F: "read", Time: ms(1)},
		}, nil},
		{"one pending op", []history.Event{{Process: 0, Type: history.Invoke, F: "read"}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			for name, draw := range map[string]func(string, []history.Event, []Fault) error{
				"latency": LatencyPNG, "rate": RatePNG,
			} {
				path := filepath.Join(dir, c.name+"-"+name+".png")
				if err := draw(path, c.events, c.faults); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				readPNG(t, path)
			}
		})
	}
}

func TestPNGBadPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "latency.png")
	if err := LatencyPNG(path, nil, nil); err == nil {
		t.Error("LatencyPNG into a missing folder succeeded")
	}
}
