package dot

import (
	"fmt"
	"html"
	"math"
	"regexp"
	"strings"
)

// Drawing constants: a monospace font of 12 px is about 7.2 px a
// character; labels are cut so that one long value cannot make a box the
// width of a screen.
const (
	charW     = 7.2
	lineH     = 15.0
	maxCols   = 56
	maxLines  = 8
	margin    = 24.0
	titleH    = 28.0
	arrowLen  = 10.0
	arrowHalf = 4.5
)

var colorRe = regexp.MustCompile(`^(#[0-9a-fA-F]{3,8}|[a-zA-Z]{1,24})$`)

// color is an attribute's colour when it is a name or a hex colour, else
// the fallback: a value goes into an attribute, and must not carry more.
func color(attrs map[string]string, key, fallback string) string {
	if c := attrs[key]; colorRe.MatchString(c) {
		return c
	}
	return fallback
}

// esc makes s text for SVG: escaped, and without the control characters
// XML cannot hold, which become U+FFFD.
func esc(s string) string {
	s = strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t') || r == 0xFFFE || r == 0xFFFF {
			return 0xFFFD
		}
		return r
	}, s)
	return html.EscapeString(s)
}

// lines splits a label into the lines drawn: at its line breaks, and
// long lines wrapped at spaces (or anywhere, in a word longer than a
// line) to cols characters; past maxLines the last line drawn is "…".
func lines(label string, cols int) []string {
	label = strings.ReplaceAll(strings.ReplaceAll(label, `\l`, "\n"), `\r`, "\n")
	var out []string
	for _, l := range strings.Split(strings.TrimRight(label, "\n"), "\n") {
		r := []rune(l)
		for len(r) > cols {
			cut := cols
			for k := cols; k > cols/2; k-- {
				if r[k] == ' ' {
					cut = k
					break
				}
			}
			out = append(out, string(r[:cut]))
			r = r[cut:]
			if len(r) > 0 && r[0] == ' ' {
				r = r[1:]
			}
		}
		out = append(out, string(r))
	}
	if len(out) > maxLines {
		out = append(out[:maxLines-1], "…")
	}
	return out
}

type point struct{ x, y float64 }

type box struct {
	c     point
	w, h  float64
	lines []string
}

// clip returns where the segment from the box's centre towards p leaves
// the box.
func (b box) clip(p point) point {
	dx, dy := p.x-b.c.x, p.y-b.c.y
	if dx == 0 && dy == 0 {
		return b.c
	}
	s := math.Inf(1)
	if dx != 0 {
		s = math.Min(s, (b.w/2)/math.Abs(dx))
	}
	if dy != 0 {
		s = math.Min(s, (b.h/2)/math.Abs(dy))
	}
	s = math.Min(s, 1)
	return point{b.c.x + dx*s, b.c.y + dy*s}
}

// SVG draws the graph: a self-contained SVG document.
func (g *Graph) SVG() string {
	n := len(g.Nodes)
	boxes := make([]box, n)
	maxW, maxH := 0.0, 0.0
	for i, nd := range g.Nodes {
		label, ok := nd.Attrs["label"]
		if !ok {
			label = nd.ID
		}
		ls := lines(label, maxCols)
		w := 0.0
		for _, l := range ls {
			w = math.Max(w, float64(len([]rune(l)))*charW)
		}
		boxes[i] = box{w: w + 16, h: float64(len(ls))*lineH + 10, lines: ls}
		maxW, maxH = math.Max(maxW, boxes[i].w), math.Max(maxH, boxes[i].h)
	}
	// A circle on which neighbours' boxes sit apart with room for the
	// labels of the edges between them: the chord between neighbours is
	// at least the widest box and some.
	r := 0.0
	switch {
	case n == 2:
		r = (maxH + 140) / 2
	case n > 2:
		r = math.Max(120, (maxW+120)/(2*math.Sin(math.Pi/float64(n))))
	}
	for i := range boxes {
		a := -math.Pi/2 + 2*math.Pi*float64(i)/float64(max(n, 1))
		boxes[i].c = point{r * math.Cos(a), r * math.Sin(a)}
	}
	// The drawing's bounds grow with every box, curve and label; the
	// viewBox is them and a margin.
	minX, minY, maxX, maxY := -1.0, -1.0, 1.0, 1.0
	grow := func(x0, y0, x1, y1 float64) {
		minX, minY, maxX, maxY = math.Min(minX, x0), math.Min(minY, y0), math.Max(maxX, x1), math.Max(maxY, y1)
	}
	for _, bx := range boxes {
		grow(bx.c.x-bx.w/2, bx.c.y-bx.h/2, bx.c.x+bx.w/2, bx.c.y+bx.h/2)
	}

	var b strings.Builder
	// Edges between the same two nodes bend further each, so that none
	// hides another.
	seen := map[[2]int]int{}
	for _, e := range g.Edges {
		key := [2]int{min(e.From, e.To), max(e.From, e.To)}
		k := seen[key]
		seen[key]++
		c := color(e.Attrs, "color", "black")
		fc := color(e.Attrs, "fontcolor", c)
		var path string
		var tip, dir, mid, normal point
		if e.From == e.To {
			// A loop out of the box, away from the circle's centre.
			bx := boxes[e.From]
			out := bx.c
			l := math.Hypot(out.x, out.y)
			if l == 0 {
				out, l = point{0, -1}, 1
			}
			u := point{out.x / l, out.y / l}
			s := 1 + 0.5*float64(k)
			p0 := bx.clip(point{bx.c.x + u.x*100 - u.y*30, bx.c.y + u.y*100 + u.x*30})
			p1 := bx.clip(point{bx.c.x + u.x*100 + u.y*30, bx.c.y + u.y*100 - u.x*30})
			c0 := point{p0.x + (u.x*70-u.y*40)*s, p0.y + (u.y*70+u.x*40)*s}
			c1 := point{p1.x + (u.x*70+u.y*40)*s, p1.y + (u.y*70-u.x*40)*s}
			tip, dir = p1, point{p1.x - c1.x, p1.y - c1.y}
			path = fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", p0.x, p0.y, c0.x, c0.y, c1.x, c1.y, p1.x, p1.y)
			mid = point{(p0.x + 3*c0.x + 3*c1.x + p1.x) / 8, (p0.y + 3*c0.y + 3*c1.y + p1.y) / 8}
			normal = u
			grow(math.Min(c0.x, c1.x), math.Min(c0.y, c1.y), math.Max(c0.x, c1.x), math.Max(c0.y, c1.y))
		} else {
			a, z := boxes[e.From], boxes[e.To]
			dx, dy := z.c.x-a.c.x, z.c.y-a.c.y
			d := math.Hypot(dx, dy)
			// Bend to the left of the direction of travel, as drawn (y
			// grows downwards): a pair's two edges part.
			bend := d * (0.12 + 0.1*float64(k))
			normal = point{dy / d, -dx / d}
			ctrl := point{(a.c.x+z.c.x)/2 + normal.x*bend, (a.c.y+z.c.y)/2 + normal.y*bend}
			p0, p1 := a.clip(ctrl), z.clip(ctrl)
			tip, dir = p1, point{p1.x - ctrl.x, p1.y - ctrl.y}
			path = fmt.Sprintf("M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f", p0.x, p0.y, ctrl.x, ctrl.y, p1.x, p1.y)
			mid = point{0.25*p0.x + 0.5*ctrl.x + 0.25*p1.x, 0.25*p0.y + 0.5*ctrl.y + 0.25*p1.y}
		}
		l := math.Hypot(dir.x, dir.y)
		if l == 0 {
			dir, l = point{1, 0}, 1
		}
		u := point{dir.x / l, dir.y / l}
		base := point{tip.x - u.x*arrowLen, tip.y - u.y*arrowLen}
		fmt.Fprintf(&b, `<g class="edge"><path d="%s" fill="none" stroke="%s" stroke-width="1.4"/>`, path, c)
		fmt.Fprintf(&b, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>`,
			tip.x, tip.y, base.x-u.y*arrowHalf, base.y+u.x*arrowHalf, base.x+u.y*arrowHalf, base.y-u.x*arrowHalf, c)
		if label := e.Attrs["label"]; label != "" {
			// The label sits beside the curve on the side it bends to,
			// anchored so that it grows away from the curve.
			ls := lines(label, 44)
			at := point{mid.x + normal.x*8, mid.y + normal.y*8}
			w := 0.0
			for _, line := range ls {
				w = math.Max(w, float64(len([]rune(line)))*charW)
			}
			anchor, x0 := "middle", at.x-w/2
			switch {
			case normal.x > 0.3:
				anchor, x0 = "start", at.x
			case normal.x < -0.3:
				anchor, x0 = "end", at.x-w
			}
			hgt := float64(len(ls)) * lineH
			y := at.y - hgt/2 + lineH/2
			if anchor == "middle" && normal.y > 0 {
				y = at.y + lineH/2
			} else if anchor == "middle" {
				y = at.y - hgt + lineH/2
			}
			grow(x0, y-lineH/2, x0+w, y+hgt-lineH/2)
			for i, line := range ls {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="%s" dominant-baseline="middle" fill="%s" stroke="#fff" stroke-width="4" paint-order="stroke">%s</text>`,
					at.x, y+float64(i)*lineH, anchor, fc, esc(line))
			}
		}
		b.WriteString("</g>\n")
	}
	for i, bx := range boxes {
		nd := g.Nodes[i]
		fmt.Fprintf(&b, `<g class="node" id="%s"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="3" fill="#f7f9fb" stroke="%s" stroke-width="1.2"/>`,
			esc("node-"+nd.ID), bx.c.x-bx.w/2, bx.c.y-bx.h/2, bx.w, bx.h, color(nd.Attrs, "color", "#1d232b"))
		for k, line := range bx.lines {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" xml:space="preserve">%s</text>`,
				bx.c.x-bx.w/2+8, bx.c.y-bx.h/2+5+lineH*float64(k)+11, esc(line))
		}
		b.WriteString("</g>\n")
	}

	title := g.Label
	if title == "" {
		title = g.Name
	}
	x0, y0 := minX-margin, minY-margin-titleH
	w, h := maxX-minX+2*margin, maxY-minY+2*margin+titleH
	var out strings.Builder
	fmt.Fprintf(&out, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="%.1f %.1f %.1f %.1f" font-family="monospace" font-size="12">`+"\n",
		w, h, x0, y0, w, h)
	fmt.Fprintf(&out, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(&out, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fff"/>`+"\n", x0, y0, w, h)
	fmt.Fprintf(&out, `<text class="title" x="%.1f" y="%.1f" text-anchor="middle" font-family="sans-serif" font-size="15" font-weight="600">%s</text>`+"\n",
		(minX+maxX)/2, y0+margin, esc(title))
	out.WriteString(b.String())
	out.WriteString("</svg>\n")
	return out.String()
}
