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

// lines splits a label into the lines drawn, each cut to maxCols.
func lines(label string, cols int) []string {
	label = strings.ReplaceAll(strings.ReplaceAll(label, `\l`, "\n"), `\r`, "\n")
	ls := strings.Split(strings.TrimRight(label, "\n"), "\n")
	if len(ls) > maxLines {
		ls = append(ls[:maxLines-1], "…")
	}
	for i, l := range ls {
		if r := []rune(l); len(r) > cols {
			ls[i] = string(r[:cols-1]) + "…"
		}
	}
	return ls
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
	// A circle on which neighbours' boxes do not overlap.
	r := 0.0
	if n > 1 {
		r = math.Max(110, (math.Max(maxW, maxH)+60)*float64(n)/(2*math.Pi))
		if n == 2 {
			r = math.Max(r, maxH+60)
		}
	}
	loop := 0.0
	for _, e := range g.Edges {
		if e.From == e.To {
			loop = 40
		}
	}
	cx, cy := r+maxW/2+margin+loop+120, r+maxH/2+margin+titleH+loop+30
	for i := range boxes {
		a := -math.Pi/2 + 2*math.Pi*float64(i)/float64(max(n, 1))
		boxes[i].c = point{cx + r*math.Cos(a), cy + r*math.Sin(a)}
	}
	width, height := 2*cx, 2*cy-titleH

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="monospace" font-size="12">`+"\n", width, height, width, height)
	title := g.Label
	if title == "" {
		title = g.Name
	}
	fmt.Fprintf(&b, `<title>%s</title>`+"\n", esc(title))
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	fmt.Fprintf(&b, `<text class="title" x="%.1f" y="%.1f" text-anchor="middle" font-family="sans-serif" font-size="15" font-weight="600">%s</text>`+"\n",
		cx, margin, esc(title))

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
		var tip, dir, mid point
		if e.From == e.To {
			bx := boxes[e.From]
			out := point{bx.c.x - cx, bx.c.y - cy}
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
			mid = point{(p0.x+3*c0.x+3*c1.x+p1.x)/8 + u.x*6, (p0.y+3*c0.y+3*c1.y+p1.y)/8 + u.y*6}
		} else {
			a, z := boxes[e.From], boxes[e.To]
			dx, dy := z.c.x-a.c.x, z.c.y-a.c.y
			d := math.Hypot(dx, dy)
			// Bend to the right of the direction of travel.
			bend := d * (0.12 + 0.1*float64(k))
			ctrl := point{(a.c.x+z.c.x)/2 - dy/d*bend, (a.c.y+z.c.y)/2 + dx/d*bend}
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
			ls := lines(label, 40)
			y := mid.y - float64(len(ls)-1)*lineH/2
			for i, line := range ls {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" dominant-baseline="middle" fill="%s" stroke="#fff" stroke-width="4" paint-order="stroke">%s</text>`,
					mid.x, y+float64(i)*lineH, fc, esc(line))
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
	b.WriteString("</svg>\n")
	return b.String()
}
