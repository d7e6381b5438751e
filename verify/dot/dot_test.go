package dot

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"
)

// g2 is a cycle in the shape verify/isolation writes (Anomaly.DOT).
const g2 = `digraph "G2-item" {
  label="G2-item";
  node [shape=box, fontname="monospace"];
  T3 [label="T3 (process 1, ok)\n[[\"append\" 1 2] [\"r\" 2 nil]]"];
  T5 [label="T5 (process 2, ok)\n[[\"append\" 2 1] [\"r\" 1 nil]]"];
  T3 -> T5 [label="rw: T3 read key 2 before T5 appended 1", color="red", fontcolor="red"];
  T5 -> T3 [label="rw: T5 read key 1 before T3 appended 2", color="red", fontcolor="red"];
}
`

func TestParse(t *testing.T) {
	g, err := Parse([]byte(g2))
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "G2-item" || g.Label != "G2-item" || len(g.Nodes) != 2 || len(g.Edges) != 2 {
		t.Fatalf("graph %q label %q, %d nodes, %d edges", g.Name, g.Label, len(g.Nodes), len(g.Edges))
	}
	if got := g.Nodes[0].Attrs["label"]; got != "T3 (process 1, ok)\n[[\"append\" 1 2] [\"r\" 2 nil]]" {
		t.Errorf("T3's label = %q", got)
	}
	if g.Nodes[1].Attrs["shape"] != "box" {
		t.Errorf("node defaults not applied: %v", g.Nodes[1].Attrs)
	}
	e := g.Edges[1]
	if e.From != 1 || e.To != 0 || e.Attrs["color"] != "red" || !strings.HasPrefix(e.Attrs["label"], "rw: T5") {
		t.Errorf("edge 1 = %+v", e)
	}
	// Chains, comments, unquoted IDs, edge defaults, a graph [] statement.
	g, err = Parse([]byte("/* c */ digraph { graph [label=x]; edge [color=blue]\n a -> b -> c // d\n c -> a [color=\"#0a0\"] }"))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Nodes) != 3 || len(g.Edges) != 3 || g.Label != "x" || g.Edges[0].Attrs["color"] != "blue" || g.Edges[2].Attrs["color"] != "#0a0" {
		t.Errorf("chain graph = %+v", g)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"graph { a -- b }", "line 1: want digraph"},
		{"digraph { a -- b }", "undirected"},
		{"digraph {\n a -> \n}", "line 3: want a node after ->"},
		{"digraph { subgraph x { a } }", "subgraphs"},
		{"digraph { a [label=<b>x</b>] }", "HTML labels"},
		{"digraph {\n\n a [label=\"x]\n", "line 3: string never closed"},
		{"digraph { a }}", `"}" after the digraph`},
		{"digraph { a ", "never closed"},
		{"\xff", "not UTF-8"},
		{"digraph { /* a }", "comment never closed"},
		{strings.Repeat(" ", MaxBytes+1), "more than"},
	} {
		_, err := Parse([]byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%.40q) = %v, want an error containing %q", c.src, err, c.want)
		}
	}
	var b strings.Builder
	b.WriteString("digraph {")
	for i := range MaxNodes + 1 {
		fmt.Fprintf(&b, " n%d;", i)
	}
	b.WriteString("}")
	if _, err := Parse([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "more than 200 nodes") {
		t.Errorf("too many nodes: %v", err)
	}
}

// texts returns the SVG's text elements, checking that it is well-formed
// XML.
func texts(t *testing.T, svg string) []string {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	var out []string
	in := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v\n%s", err, svg)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			in = x.Name.Local == "text"
		case xml.CharData:
			if in {
				out = append(out, string(x))
			}
		case xml.EndElement:
			in = false
		}
	}
}

func TestSVG(t *testing.T) {
	g, err := Parse([]byte(g2))
	if err != nil {
		t.Fatal(err)
	}
	svg := g.SVG()
	got := strings.Join(texts(t, svg), "|")
	want := `G2-item|rw: T3 read key 2 before T5 appended 1|rw: T5 read key 1 before T3 appended 2|T3 (process 1, ok)|[["append" 1 2] ["r" 2 nil]]|T5 (process 2, ok)|[["append" 2 1] ["r" 1 nil]]`
	if got != want {
		t.Errorf("texts = %s\nwant    %s", got, want)
	}
	if n := strings.Count(svg, `stroke="red"`); n != 2 {
		t.Errorf("%d red edges, want 2", n)
	}
	// Hostile labels and colours stay text.
	g, err = Parse([]byte(`digraph { a [label="</text><script>x</script>", color="red\" onload=\"x"]; a -> a [label="self"] }`))
	if err != nil {
		t.Fatal(err)
	}
	svg = g.SVG()
	if strings.Contains(svg, "<script") || strings.Contains(svg, "onload") {
		t.Errorf("a label or colour escaped into the markup:\n%s", svg)
	}
	if got := strings.Join(texts(t, svg), "|"); got != "self|</text><script>x</script>" {
		t.Errorf("texts = %q", got)
	}
	// An edge's explanation wraps at spaces.
	if got := lines("rw: T3731 read key 77 as [], which does not contain T3710's append of 1", 44); strings.Join(got, "|") !=
		"rw: T3731 read key 77 as [], which does not|contain T3710's append of 1" {
		t.Errorf("texts = %q", got)
	}
	// Long labels wrap; labels of many lines are cut.
	g, err = Parse([]byte(`digraph { a [label="` + strings.Repeat("x", 100) + `"]; b [label="1
2
3
4
5
6
7
8
9"] }`))
	if err != nil {
		t.Fatal(err)
	}
	got = strings.Join(texts(t, g.SVG()), "|")
	if want := strings.Repeat("x", maxCols) + "|" + strings.Repeat("x", 100-maxCols) + "|1|2|3|4|5|6|7|…"; got != want {
		t.Errorf("cut labels = %q, want %q", got, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(g2)
	f.Add("digraph { a -> b -> a [label=\"x\\ny\"] }")
	f.Add("digraph { a -> a }")
	f.Fuzz(func(t *testing.T, src string) {
		g, err := Parse([]byte(src))
		if err != nil {
			return
		}
		svg := g.SVG()
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("SVG of %q is not well-formed: %v", src, err)
			}
		}
	})
}

func ExampleParse() {
	g, err := Parse([]byte(`digraph "G0" { T1 -> T2 [label="ww", color=black]; T2 -> T1 [label="ww"] }`))
	if err != nil {
		fmt.Println(err)
		return
	}
	svg := g.SVG()
	fmt.Println(len(g.Nodes), len(g.Edges), strings.HasPrefix(svg, "<svg "), strings.Count(svg, `class="edge"`))
	// Output: 2 2 true 2
}
