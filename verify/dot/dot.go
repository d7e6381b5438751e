// Package dot reads the small Graphviz digraphs the checkers write (a
// cycle of transactions: boxes with labels, edges with labels and colours)
// and draws them as SVG, without Graphviz: the nodes on a circle in the
// order they first appear, each edge a curve bent to the right of its
// direction so that the two edges of a pair never overlap, its label at
// its middle.
//
// The reader knows the subset of the DOT language those files use: one
// digraph of node statements, edge statements (chains too), attribute
// lists, default attributes (node, edge, graph) and graph attributes
// (label=…). Anything else — subgraphs, undirected graphs, HTML labels —
// is refused with the line it is on.
package dot

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits bound what Parse accepts: the files are the checkers' output,
// but a store can hold anything.
const (
	MaxBytes = 1 << 20
	MaxNodes = 200
	MaxEdges = 1000
)

// Graph is a parsed digraph.
type Graph struct {
	// Name is the digraph's ID; Label its label attribute.
	Name, Label string
	// Nodes in the order they first appear, in a statement or an edge.
	Nodes []Node
	Edges []Edge
}

// Node is a node and its attributes (label, color, …).
type Node struct {
	ID    string
	Attrs map[string]string
}

// Edge is an edge between two nodes, by index in Graph.Nodes.
type Edge struct {
	From, To int
	Attrs    map[string]string
}

// Parse reads a digraph.
func Parse(src []byte) (*Graph, error) {
	if len(src) > MaxBytes {
		return nil, fmt.Errorf("dot: %d bytes, more than the %d this reader accepts", len(src), MaxBytes)
	}
	if !utf8.Valid(src) {
		return nil, fmt.Errorf("dot: not UTF-8 text")
	}
	p := &parser{lx: lexer{src: string(src), line: 1}, index: map[string]int{}}
	g, err := p.graph()
	if err != nil {
		return nil, fmt.Errorf("dot: line %d: %w", p.tok.line, err)
	}
	return g, nil
}

type kind int

const (
	eof kind = iota
	ident
	punct // { } [ ] ; , =
	arrow // ->
)

type token struct {
	kind kind
	text string
	line int
}

type lexer struct {
	src  string
	pos  int
	line int
}

// next returns the next token, skipping blanks and comments.
func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			l.line++
			l.pos++
		case c == ' ' || c == '\t' || c == '\r':
			l.pos++
		case strings.HasPrefix(l.src[l.pos:], "//") || c == '#':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case strings.HasPrefix(l.src[l.pos:], "/*"):
			end := strings.Index(l.src[l.pos+2:], "*/")
			if end < 0 {
				return token{}, fmt.Errorf("comment never closed")
			}
			l.line += strings.Count(l.src[l.pos:l.pos+2+end], "\n")
			l.pos += end + 4
		default:
			return l.token()
		}
	}
	return token{kind: eof, line: l.line}, nil
}

func (l *lexer) token() (token, error) {
	c, line := l.src[l.pos], l.line
	switch {
	case strings.HasPrefix(l.src[l.pos:], "->"):
		l.pos += 2
		return token{arrow, "->", line}, nil
	case strings.HasPrefix(l.src[l.pos:], "--"):
		return token{}, fmt.Errorf("undirected edges (--) are not read: only digraphs")
	case strings.ContainsRune("{}[];,=", rune(c)):
		l.pos++
		return token{punct, string(c), line}, nil
	case c == '"':
		i := l.pos + 1
		for i < len(l.src) && l.src[i] != '"' {
			if l.src[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(l.src) {
			return token{}, fmt.Errorf("string never closed")
		}
		raw := l.src[l.pos : i+1]
		l.line += strings.Count(raw, "\n")
		l.pos = i + 1
		return token{ident, unquote(raw), line}, nil
	case c == '<':
		return token{}, fmt.Errorf("HTML labels are not read")
	}
	start := l.pos
	for l.pos < len(l.src) {
		r, n := utf8.DecodeRuneInString(l.src[l.pos:])
		if !(r == '_' || r == '.' || r == '-' && l.pos == start || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			break
		}
		l.pos += n
	}
	if l.pos == start {
		return token{}, fmt.Errorf("unexpected %q", l.src[start:start+1])
	}
	return token{ident, l.src[start:l.pos], line}, nil
}

// unquote reads a quoted ID: DOT only escapes quotes, but the checkers
// write Go's quoting (%q), whose \n and \t mean line breaks and tabs; a
// string Go cannot read has its quotes escapes undone and nothing more.
func unquote(raw string) string {
	if s, err := strconv.Unquote(raw); err == nil {
		return s
	}
	s := raw[1 : len(raw)-1]
	s = strings.ReplaceAll(s, `\"`, `"`)
	return strings.ReplaceAll(s, `\n`, "\n")
}

type parser struct {
	lx    lexer
	tok   token
	index map[string]int
	g     Graph
	// Defaults set by node [...] and edge [...] statements.
	nodeDef, edgeDef map[string]string
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		p.tok.line = p.lx.line
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) expect(text string) error {
	if p.tok.text != text || p.tok.kind == eof {
		return fmt.Errorf("want %q, found %s", text, p.describe())
	}
	return p.advance()
}

func (p *parser) describe() string {
	if p.tok.kind == eof {
		return "the end of the file"
	}
	return strconv.Quote(p.tok.text)
}

func (p *parser) graph() (*Graph, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	if strings.EqualFold(p.tok.text, "strict") {
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if !strings.EqualFold(p.tok.text, "digraph") {
		return nil, fmt.Errorf("want digraph, found %s", p.describe())
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == ident {
		p.g.Name = p.tok.text
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	for p.tok.text != "}" || p.tok.kind != punct {
		if p.tok.kind == eof {
			return nil, fmt.Errorf("the digraph is never closed")
		}
		if err := p.statement(); err != nil {
			return nil, err
		}
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != eof {
		return nil, fmt.Errorf("%s after the digraph", p.describe())
	}
	return &p.g, nil
}

func (p *parser) statement() error {
	if p.tok.text == ";" && p.tok.kind == punct {
		return p.advance()
	}
	if p.tok.kind != ident {
		return fmt.Errorf("want a statement, found %s", p.describe())
	}
	id := p.tok.text
	if err := p.advance(); err != nil {
		return err
	}
	switch strings.ToLower(id) {
	case "subgraph":
		return fmt.Errorf("subgraphs are not read")
	case "node", "edge", "graph":
		if p.tok.text != "[" {
			break
		}
		attrs, err := p.attrs()
		if err != nil {
			return err
		}
		switch strings.ToLower(id) {
		case "node":
			p.nodeDef = merge(p.nodeDef, attrs)
		case "edge":
			p.edgeDef = merge(p.edgeDef, attrs)
		default:
			if l, ok := attrs["label"]; ok {
				p.g.Label = l
			}
		}
		return nil
	}
	if p.tok.kind == punct && p.tok.text == "=" {
		if err := p.advance(); err != nil {
			return err
		}
		if p.tok.kind != ident {
			return fmt.Errorf("want a value for %s, found %s", id, p.describe())
		}
		if id == "label" {
			p.g.Label = p.tok.text
		}
		return p.advance()
	}
	chain := []string{id}
	for p.tok.kind == arrow {
		if err := p.advance(); err != nil {
			return err
		}
		if p.tok.kind != ident {
			return fmt.Errorf("want a node after ->, found %s", p.describe())
		}
		chain = append(chain, p.tok.text)
		if err := p.advance(); err != nil {
			return err
		}
	}
	var attrs map[string]string
	if p.tok.kind == punct && p.tok.text == "[" {
		var err error
		if attrs, err = p.attrs(); err != nil {
			return err
		}
	}
	if len(chain) == 1 {
		i, err := p.node(id)
		if err != nil {
			return err
		}
		p.g.Nodes[i].Attrs = merge(p.g.Nodes[i].Attrs, attrs)
		return nil
	}
	for k := 1; k < len(chain); k++ {
		a, err := p.node(chain[k-1])
		if err != nil {
			return err
		}
		b, err := p.node(chain[k])
		if err != nil {
			return err
		}
		if len(p.g.Edges) == MaxEdges {
			return fmt.Errorf("more than %d edges", MaxEdges)
		}
		p.g.Edges = append(p.g.Edges, Edge{From: a, To: b, Attrs: merge(merge(nil, p.edgeDef), attrs)})
	}
	return nil
}

// node returns the index of the node id, adding it with the default
// attributes when it is new.
func (p *parser) node(id string) (int, error) {
	if i, ok := p.index[id]; ok {
		return i, nil
	}
	if len(p.g.Nodes) == MaxNodes {
		return 0, fmt.Errorf("more than %d nodes", MaxNodes)
	}
	p.index[id] = len(p.g.Nodes)
	p.g.Nodes = append(p.g.Nodes, Node{ID: id, Attrs: merge(nil, p.nodeDef)})
	return len(p.g.Nodes) - 1, nil
}

// attrs reads one or more attribute lists: [a=b, c=d; e=f][g=h].
func (p *parser) attrs() (map[string]string, error) {
	out := map[string]string{}
	for p.tok.kind == punct && p.tok.text == "[" {
		if err := p.advance(); err != nil {
			return nil, err
		}
		for p.tok.kind != punct || p.tok.text != "]" {
			if p.tok.kind != ident {
				return nil, fmt.Errorf("want an attribute, found %s", p.describe())
			}
			key := p.tok.text
			if err := p.advance(); err != nil {
				return nil, err
			}
			if err := p.expect("="); err != nil {
				return nil, err
			}
			if p.tok.kind != ident {
				return nil, fmt.Errorf("want a value for %s, found %s", key, p.describe())
			}
			out[key] = p.tok.text
			if err := p.advance(); err != nil {
				return nil, err
			}
			if p.tok.kind == punct && (p.tok.text == "," || p.tok.text == ";") {
				if err := p.advance(); err != nil {
					return nil, err
				}
			}
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func merge(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}
