package edn

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// show renders a parse tree compactly so tests can compare whole shapes.
func show(n Node) string {
	var b strings.Builder
	var walk func(n Node)
	walk = func(n Node) {
		switch n.Kind {
		case Nil:
			b.WriteString("nil")
		case Bool:
			if n.Bool {
				b.WriteString("true")
			} else {
				b.WriteString("false")
			}
		case Int:
			b.WriteString("i" + strconv.FormatInt(n.Int, 10))
		case Float:
			b.WriteString("f")
		case String:
			b.WriteString("s:" + n.Str)
		case Char:
			b.WriteString("c:" + n.Str)
		case Keyword:
			b.WriteString(":" + n.Str)
		case Symbol:
			b.WriteString("y:" + n.Str)
		case List, Vector, Set, Map, Tagged:
			open := map[Kind]string{List: "(", Vector: "[", Set: "#{", Map: "{", Tagged: "#" + n.Str + "<"}[n.Kind]
			close := map[Kind]string{List: ")", Vector: "]", Set: "}", Map: "}", Tagged: ">"}[n.Kind]
			b.WriteString(open)
			for i, it := range n.Items {
				if i > 0 {
					b.WriteByte(' ')
				}
				walk(it)
			}
			b.WriteString(close)
		}
	}
	walk(n)
	return b.String()
}

func TestParse(t *testing.T) {
	cases := []struct{ in, want string }{
		{`nil true false`, "nil|true|false"},
		{`42 -7 +3 12N`, "i42|i-7|i3|i12"},
		{`1.5 2e3 3M`, "f|f|f"},
		{`"a\"b\n" "\u00e9"`, "s:a\"b\n|s:é"},
		{`\a \newline \space \u0041`, "c:a|c:\n|c: |c:A"},
		{`:read :jepsen/op sym foo.bar/baz`, ":read|:jepsen/op|y:sym|y:foo.bar/baz"},
		{`[1 (2 3) #{4} {:a 1, :b [nil]}]`, "[i1 (i2 i3) #{i4} {:a i1 :b [nil]}]"},
		{"; comment\n[1 ; inner\n 2]", "[i1 i2]"},
		{`[1 #_ 2 3] #_ {:x 1}`, "[i1 i3]"},
		{`#inst "2020" #jepsen.history.Op{:type :ok}`, "#inst<s:2020>|#jepsen.history.Op<{:type :ok}>"},
		{`{:process 22  :type :invoke}`, "{:process i22 :type :invoke}"},
		{``, ""},
	}
	for _, c := range cases {
		nodes, err := ParseAll([]byte(c.in))
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		var parts []string
		for _, n := range nodes {
			parts = append(parts, show(n))
		}
		if got := strings.Join(parts, "|"); got != c.want {
			t.Errorf("%q parsed to %q, want %q", c.in, got, c.want)
		}
	}
}

func TestValues(t *testing.T) {
	nodes, err := ParseAll([]byte(`-9223372036854775808 1.25 "x"`))
	if err != nil {
		t.Fatal(err)
	}
	if nodes[0].Int != -9223372036854775808 || nodes[1].Float != 1.25 || nodes[2].Str != "x" {
		t.Fatalf("got %+v", nodes)
	}
}

func TestPositions(t *testing.T) {
	nodes, err := ParseAll([]byte("[{:a 1}\n {:b\n   2}]"))
	if err != nil {
		t.Fatal(err)
	}
	m := nodes[0].Items[1]
	if m.Pos != (Pos{2, 2}) {
		t.Errorf("second map at %v, want 2:2", m.Pos)
	}
	if v := m.Items[1]; v.Pos != (Pos{3, 4}) {
		t.Errorf("value 2 at %v, want 3:4", v.Pos)
	}
	// Columns count runes, not bytes.
	nodes, err = ParseAll([]byte(`["é" x]`))
	if err != nil {
		t.Fatal(err)
	}
	if p := nodes[0].Items[1].Pos; p != (Pos{1, 6}) {
		t.Errorf("symbol after a two-byte rune at %v, want 1:6", p)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		in   string
		pos  Pos
		text string
	}{
		{"[1 2", Pos{1, 5}, "end of input inside the collection opened at 1:1"},
		{"{:a 1 :b}", Pos{1, 7}, "map has a key with no value"},
		{"[1 2)", Pos{1, 5}, "unexpected ')'"},
		{"\"abc", Pos{1, 1}, "string not terminated"},
		{`"\q"`, Pos{1, 2}, `unknown escape \q`},
		{"99999999999999999999", Pos{1, 1}, "does not fit in 64 bits"},
		{"1/2", Pos{1, 1}, "ratio"},
		{"12abc", Pos{1, 1}, "malformed number"},
		{"\n  :", Pos{2, 3}, "malformed keyword"},
		{"#", Pos{1, 1}, "end of input after '#'"},
		{"#_", Pos{1, 3}, "expected a form after #_"},
		{`\bogus`, Pos{1, 1}, `unknown character \bogus`},
		{strings.Repeat("[", 600), Pos{1, 514}, "nesting deeper than 512"},
		{"\"\xff\"", Pos{1, 2}, "invalid UTF-8"},
	}
	for _, c := range cases {
		_, err := ParseAll([]byte(c.in))
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: got %v, want a SyntaxError", c.in, err)
			continue
		}
		if se.Pos != c.pos || !strings.Contains(se.Msg, c.text) {
			t.Errorf("%q: got %v: %s; want %v: ...%s...", c.in, se.Pos, se.Msg, c.pos, c.text)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`[{:process 0, :type :invoke, :f :read, :value nil}]`,
		`{:type :ok :f :txn :value [[:append 1 2] [:r 1 [2]]]} ; c`,
		`#{1 2} #_ x "s\n" \a :k/w 1.5e3 12N #tag {:a (1)}`,
		"(\n{:a \"\\u00e9\"})",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, err := ParseAll(data)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if se.Pos.Line < 1 || se.Pos.Col < 1 {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		var check func(n Node)
		check = func(n Node) {
			if n.Pos.Line < 1 || n.Pos.Col < 1 {
				t.Fatalf("node without a position: %+v", n)
			}
			if n.Kind == Map && len(n.Items)%2 != 0 {
				t.Fatalf("map with odd items")
			}
			if n.Kind == Tagged && len(n.Items) != 1 {
				t.Fatalf("tagged element with %d forms", len(n.Items))
			}
			for _, it := range n.Items {
				check(it)
			}
		}
		for _, n := range nodes {
			check(n)
		}
	})
}
