// Package edn reads Extensible Data Notation, the format Jepsen and Knossos
// write histories in. It parses to a position-carrying tree so that callers can
// report the line and column of a value they reject, not only of a syntax error.
//
// Supported: nil, booleans, integers (with an optional N suffix when the value
// fits in 64 bits), floats (optional M suffix), strings, characters, keywords,
// symbols, lists, vectors, maps, sets, tagged elements (#tag form), the discard
// form #_ and ; comments. Commas are whitespace. Anything else is a SyntaxError.
package edn

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind says what a Node holds.
type Kind uint8

// The kinds of EDN element.
const (
	Nil Kind = iota
	Bool
	Int
	Float
	String
	Char
	Keyword
	Symbol
	List
	Vector
	Map
	Set
	Tagged
)

var kindNames = [...]string{"nil", "boolean", "integer", "float", "string", "character", "keyword", "symbol", "list", "vector", "map", "set", "tagged element"}

// String names the kind as an error message would.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Pos is a 1-based line and column (in runes) in the input.
type Pos struct {
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Node is one parsed element.
type Node struct {
	Kind Kind
	Pos  Pos
	// Bool holds a Bool node's value.
	Bool bool
	// Int holds an Int node's value.
	Int int64
	// Float holds a Float node's value.
	Float float64
	// Str holds the text of a String or Char, and the name of a Keyword,
	// Symbol or Tagged element's tag, without the leading ':' or '#'.
	Str string
	// Items holds the elements of a List, Vector or Set; a Map's keys and
	// values alternately (k0, v0, k1, v1, ...); a Tagged element's one form.
	Items []Node
}

// SyntaxError reports malformed input at a position.
type SyntaxError struct {
	Pos Pos
	Msg string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Pos.Line, e.Pos.Col, e.Msg) }

// maxDepth bounds nesting so that hostile input cannot exhaust the stack.
const maxDepth = 512

// Parser reads top-level forms from an input one at a time.
type Parser struct {
	src  []byte
	off  int
	line int
	col  int
	// r, when set, supplies src as the parser needs it: a parser made by
	// NewReader holds the form it is reading, not the whole input.
	r   io.Reader
	err error // the reader's first error (io.EOF at its end)
	// keywords holds the names of keywords read, so that each is made
	// once (a bounded number of them).
	keywords map[string]string
}

// NewReader returns a parser that reads its input from r as it goes,
// keeping only the form it is reading (and a buffer) in memory.
func NewReader(r io.Reader) *Parser {
	return &Parser{r: r, line: 1, col: 1, src: make([]byte, 0, 64<<10)}
}

// Err is the error the reader of a parser made by NewReader returned,
// other than io.EOF: a form cut short by it reads as ending there, so a
// caller that got a syntax error about the end of input asks here first.
func (p *Parser) Err() error {
	if p.err == io.EOF {
		return nil
	}
	return p.err
}

// Buffered is the size of the buffer a parser made by NewReader holds:
// about the largest form it read, not the input.
func (p *Parser) Buffered() int { return cap(p.src) }

// avail says whether n bytes are there to read at p.off, reading more
// from the reader as needed.
func (p *Parser) avail(n int) bool {
	for len(p.src)-p.off < n {
		if p.r == nil || p.err != nil {
			return false
		}
		if len(p.src) == cap(p.src) {
			grown := make([]byte, len(p.src), 2*cap(p.src))
			copy(grown, p.src)
			p.src = grown
		}
		m, err := p.r.Read(p.src[len(p.src):cap(p.src)])
		p.src = p.src[:len(p.src)+m]
		if err != nil {
			p.err = err
		}
	}
	return true
}

// compact drops what was read, between top-level forms (inside one, a
// token still points into src), once it is more than half the buffer.
func (p *Parser) compact() {
	if p.r != nil && p.off > cap(p.src)/2 {
		n := copy(p.src, p.src[p.off:])
		p.src, p.off = p.src[:n], 0
	}
}

// Enter reads the opening delimiter of a vector or a list that starts
// the rest of the input, so that its items can be read one at a time
// with Item instead of all at once. ok is false, with nothing read, when
// the next form is not a vector or a list.
func (p *Parser) Enter() (open Pos, kind Kind, ok bool, err error) {
	if err := p.skip(); err != nil {
		return Pos{}, 0, false, err
	}
	if !p.avail(1) || (p.src[p.off] != '[' && p.src[p.off] != '(') {
		return Pos{}, 0, false, nil
	}
	open, kind = p.Pos(), Vector
	if p.src[p.off] == '(' {
		kind = List
	}
	p.advance()
	return open, kind, true, nil
}

// Item reads the next item of the collection Enter opened (of kind, at
// open); ok is false once its closing delimiter is read.
func (p *Parser) Item(kind Kind, open Pos) (Node, bool, error) {
	close := byte(']')
	if kind == List {
		close = ')'
	}
	p.compact()
	if err := p.skip(); err != nil {
		return Node{}, false, err
	}
	if !p.avail(1) {
		return Node{}, false, p.errorf(p.Pos(), "end of input inside the collection opened at %s; expected %q", open, close)
	}
	if p.src[p.off] == close {
		p.advance()
		return Node{}, false, nil
	}
	n, err := p.form(1)
	return n, err == nil, err
}

// NewParser returns a parser over src.
func NewParser(src []byte) *Parser {
	return &Parser{src: src, line: 1, col: 1}
}

// NewParserAt returns a parser over src that numbers positions from start,
// for input cut out of a larger text.
func NewParserAt(src []byte, start Pos) *Parser {
	return &Parser{src: src, line: start.Line, col: start.Col}
}

// ParseAll parses every top-level form in src.
func ParseAll(src []byte) ([]Node, error) {
	p := NewParser(src)
	var out []Node
	for {
		n, ok, err := p.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, n)
	}
}

// Next parses the next top-level form. It returns ok=false at the end of input.
func (p *Parser) Next() (Node, bool, error) {
	p.compact()
	if err := p.skip(); err != nil {
		return Node{}, false, err
	}
	if !p.avail(1) {
		return Node{}, false, nil
	}
	n, err := p.form(0)
	if err != nil {
		return Node{}, false, err
	}
	return n, true, nil
}

// Pos is the position of the next unread character.
func (p *Parser) Pos() Pos { return Pos{p.line, p.col} }

func (p *Parser) errorf(pos Pos, format string, args ...any) error {
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// advance moves past one rune, keeping line and column.
func (p *Parser) advance() {
	if p.off < len(p.src) && p.src[p.off] < utf8.RuneSelf {
		// ASCII, nearly all of a history.
		if p.src[p.off] == '\n' {
			p.line++
			p.col = 1
		} else {
			p.col++
		}
		p.off++
		return
	}
	p.avail(utf8.UTFMax)
	r, size := utf8.DecodeRune(p.src[p.off:])
	p.off += size
	if r == '\n' {
		p.line++
		p.col = 1
	} else {
		p.col++
	}
}

// skip passes whitespace, commas, comments and #_ discards.
func (p *Parser) skip() error {
	for p.avail(1) {
		c := p.src[p.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '\f':
			p.advance()
		case c == ';':
			for p.avail(1) && p.src[p.off] != '\n' {
				p.advance()
			}
		case c == '#' && p.avail(2) && p.src[p.off+1] == '_':
			p.advance()
			p.advance()
			if err := p.skip(); err != nil {
				return err
			}
			if !p.avail(1) {
				return p.errorf(p.Pos(), "expected a form after #_, found end of input")
			}
			if _, err := p.form(0); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return nil
}

func isDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', '\f', '(', ')', '[', ']', '{', '}', '"', ';':
		return true
	}
	return false
}

func (p *Parser) form(depth int) (Node, error) {
	if depth > maxDepth {
		return Node{}, p.errorf(p.Pos(), "nesting deeper than %d", maxDepth)
	}
	pos := p.Pos()
	c := p.src[p.off]
	switch c {
	case '(':
		p.advance()
		items, err := p.seq(')', depth, pos)
		return Node{Kind: List, Pos: pos, Items: items}, err
	case '[':
		p.advance()
		items, err := p.seq(']', depth, pos)
		return Node{Kind: Vector, Pos: pos, Items: items}, err
	case '{':
		p.advance()
		items, err := p.seq('}', depth, pos)
		if err != nil {
			return Node{}, err
		}
		if len(items)%2 != 0 {
			return Node{}, p.errorf(items[len(items)-1].Pos, "map has a key with no value")
		}
		return Node{Kind: Map, Pos: pos, Items: items}, nil
	case ')', ']', '}':
		return Node{}, p.errorf(pos, "unexpected %q", c)
	case '"':
		return p.str(pos)
	case '\\':
		return p.char(pos)
	case '#':
		return p.dispatch(pos, depth)
	}
	tok := p.tokenBytes()
	if !utf8.Valid(tok) {
		return Node{}, p.errorf(pos, "invalid UTF-8 in %q", tok)
	}
	if n, ok := smallInt(tok); ok {
		// Most atoms of a history are integers: no string is made.
		return Node{Kind: Int, Pos: pos, Int: n}, nil
	}
	if len(tok) > 1 && tok[0] == ':' {
		// Keywords repeat (:type, :ok, :f, :txn): each is made once.
		if name, ok := p.keywords[string(tok[1:])]; ok {
			return Node{Kind: Keyword, Pos: pos, Str: name}, nil
		}
	}
	n, err := p.atom(string(tok), pos)
	if err == nil && n.Kind == Keyword && len(p.keywords) < 1024 {
		if p.keywords == nil {
			p.keywords = map[string]string{}
		}
		p.keywords[n.Str] = n.Str
	}
	return n, err
}

// seq reads forms up to the closing delimiter.
func (p *Parser) seq(close byte, depth int, open Pos) ([]Node, error) {
	var items []Node
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		if !p.avail(1) {
			return nil, p.errorf(p.Pos(), "end of input inside the collection opened at %s; expected %q", open, close)
		}
		if p.src[p.off] == close {
			p.advance()
			return items, nil
		}
		n, err := p.form(depth + 1)
		if err != nil {
			return nil, err
		}
		items = append(items, n)
	}
}

func (p *Parser) token() string { return string(p.tokenBytes()) }

// tokenBytes reads a token; the bytes are valid until the next read.
func (p *Parser) tokenBytes() []byte {
	start := p.off
	for p.avail(1) && !isDelim(p.src[p.off]) {
		p.advance()
	}
	return p.src[start:p.off]
}

// smallInt reads a decimal integer of at most 18 digits, optionally
// signed, as number would.
func smallInt(tok []byte) (int64, bool) {
	d := tok
	if len(d) > 1 && (d[0] == '-' || d[0] == '+') {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = 10*n + int64(c-'0')
	}
	if tok[0] == '-' {
		n = -n
	}
	return n, true
}

func (p *Parser) dispatch(pos Pos, depth int) (Node, error) {
	p.advance() // '#'
	if !p.avail(1) {
		return Node{}, p.errorf(pos, "end of input after '#'")
	}
	if p.src[p.off] == '{' {
		open := p.Pos()
		p.advance()
		items, err := p.seq('}', depth, open)
		return Node{Kind: Set, Pos: pos, Items: items}, err
	}
	if isDelim(p.src[p.off]) || p.src[p.off] == '#' {
		return Node{}, p.errorf(pos, "expected a tag, set or discard after '#', found %q", p.src[p.off])
	}
	tag := p.token()
	if err := p.skip(); err != nil {
		return Node{}, err
	}
	if !p.avail(1) {
		return Node{}, p.errorf(p.Pos(), "expected a form after tag #%s, found end of input", tag)
	}
	inner, err := p.form(depth + 1)
	if err != nil {
		return Node{}, err
	}
	return Node{Kind: Tagged, Pos: pos, Str: tag, Items: []Node{inner}}, nil
}

func (p *Parser) str(pos Pos) (Node, error) {
	p.advance() // opening quote
	var b strings.Builder
	for {
		if !p.avail(1) {
			return Node{}, p.errorf(pos, "string not terminated")
		}
		c := p.src[p.off]
		if c == '"' {
			p.advance()
			return Node{Kind: String, Pos: pos, Str: b.String()}, nil
		}
		if c != '\\' {
			p.avail(utf8.UTFMax)
			r, size := utf8.DecodeRune(p.src[p.off:])
			if r == utf8.RuneError && size == 1 {
				return Node{}, p.errorf(p.Pos(), "invalid UTF-8 in string")
			}
			b.WriteRune(r)
			p.advance()
			continue
		}
		esc := p.Pos()
		p.advance()
		if !p.avail(1) {
			return Node{}, p.errorf(pos, "string not terminated")
		}
		e := p.src[p.off]
		p.advance()
		switch e {
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'n':
			b.WriteByte('\n')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case '\\', '"':
			b.WriteByte(e)
		case 'u':
			if !p.avail(4) {
				return Node{}, p.errorf(esc, "\\u escape needs four hex digits")
			}
			v, err := strconv.ParseUint(string(p.src[p.off:p.off+4]), 16, 32)
			if err != nil {
				return Node{}, p.errorf(esc, "\\u escape needs four hex digits")
			}
			for range 4 {
				p.advance()
			}
			b.WriteRune(rune(v))
		default:
			return Node{}, p.errorf(esc, "unknown escape \\%c in string", e)
		}
	}
}

var namedChars = map[string]string{"newline": "\n", "space": " ", "tab": "\t", "return": "\r", "backspace": "\b", "formfeed": "\f"}

func (p *Parser) char(pos Pos) (Node, error) {
	p.advance() // backslash
	if !p.avail(1) {
		return Node{}, p.errorf(pos, "end of input after '\\'")
	}
	// A character is one rune, or a name; the rune itself may be a delimiter.
	p.avail(utf8.UTFMax)
	r, size := utf8.DecodeRune(p.src[p.off:])
	if r == utf8.RuneError && size == 1 {
		return Node{}, p.errorf(pos, "invalid UTF-8 in character")
	}
	p.advance()
	rest := p.token()
	if rest == "" {
		return Node{Kind: Char, Pos: pos, Str: string(r)}, nil
	}
	name := string(r) + rest
	if s, ok := namedChars[name]; ok {
		return Node{Kind: Char, Pos: pos, Str: s}, nil
	}
	if r == 'u' && len(rest) == 4 {
		if v, err := strconv.ParseUint(rest, 16, 32); err == nil {
			return Node{Kind: Char, Pos: pos, Str: string(rune(v))}, nil
		}
	}
	return Node{}, p.errorf(pos, "unknown character \\%s", name)
}

func (p *Parser) atom(tok string, pos Pos) (Node, error) {
	if tok == "" {
		return Node{}, p.errorf(pos, "unexpected character %q", p.src[p.off])
	}
	switch tok {
	case "nil":
		return Node{Kind: Nil, Pos: pos}, nil
	case "true":
		return Node{Kind: Bool, Pos: pos, Bool: true}, nil
	case "false":
		return Node{Kind: Bool, Pos: pos}, nil
	}
	c := tok[0]
	if c >= '0' && c <= '9' || (c == '+' || c == '-') && len(tok) > 1 && tok[1] >= '0' && tok[1] <= '9' {
		return p.number(tok, pos)
	}
	if c == ':' {
		name := tok[1:]
		if name == "" || name[0] == ':' || strings.HasSuffix(name, "/") {
			return Node{}, p.errorf(pos, "malformed keyword %q", tok)
		}
		return Node{Kind: Keyword, Pos: pos, Str: name}, nil
	}
	return Node{Kind: Symbol, Pos: pos, Str: tok}, nil
}

func (p *Parser) number(tok string, pos Pos) (Node, error) {
	if strings.ContainsAny(tok, ".eE") || strings.HasSuffix(tok, "M") {
		f, err := strconv.ParseFloat(strings.TrimSuffix(tok, "M"), 64)
		if err != nil || math.IsInf(f, 0) {
			return Node{}, p.errorf(pos, "malformed number %q", tok)
		}
		return Node{Kind: Float, Pos: pos, Float: f}, nil
	}
	digits := strings.TrimSuffix(tok, "N")
	if strings.Contains(digits, "/") {
		return Node{}, p.errorf(pos, "ratio %q is not supported", tok)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return Node{}, p.errorf(pos, "integer %q does not fit in 64 bits", tok)
		}
		return Node{}, p.errorf(pos, "malformed number %q", tok)
	}
	return Node{Kind: Int, Pos: pos, Int: n}, nil
}
