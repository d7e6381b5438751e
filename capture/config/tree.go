package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// parser walks a YAML node tree and collects every problem it meets rather
// than stopping at the first, so that one run shows an operator the whole
// list.
type parser struct {
	file string
	// dir is the folder relative paths in the file are relative to.
	dir  string
	errs []*Error
}

// fail records a problem at n's line.
func (p *parser) fail(n *yaml.Node, field, format string, args ...any) {
	p.failAt(n.Line, field, format, args...)
}

// failAt records a problem at a line.
func (p *parser) failAt(line int, field, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// child is the path of key inside the setting at field.
func child(field, key string) string {
	if !plainKey.MatchString(key) {
		key = strconv.Quote(key)
	}
	if field == "" {
		return key
	}
	return field + "." + key
}

// plainKey is a key that reads unambiguously in a field path unquoted.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// index is the path of a list's i-th element.
func index(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }

// describe names a node's kind for messages: what was found instead of
// what was expected.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		// Aliases are refused everywhere: following them could expand a
		// small file into a huge one, and a node's configuration is short
		// enough to write out.
		return "an alias (*" + n.Value + "); YAML aliases are not supported, write the value out"
	case yaml.DocumentNode:
		return "a document"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// null reports whether n is YAML's null: an empty value, ~ or null. Such a
// value counts as not set, so that "peers:" with nothing under it means no
// peers.
func null(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// section is a mapping of settings that has been checked for unknown and
// repeated keys.
type section struct {
	// field is the mapping's path, "" at the top.
	field string
	// line is where a missing key is reported: the line of the key that
	// holds the mapping, or of a list item's first key.
	line int
	// keys and vals are the key and value nodes of every known key whose
	// value is not null.
	keys, vals map[string]*yaml.Node
	// nulls are the key nodes of known keys set to null, which count as
	// not set but place a "required" at their own line.
	nulls map[string]*yaml.Node
}

// fields checks a mapping of settings, reporting unknown and repeated keys:
// a misspelt key silently ignored would leave a default in force that the
// operator believes is overridden. Line is where missing keys will be
// reported. It returns nil when n is not a mapping.
func (p *parser) fields(n *yaml.Node, field string, line int, known ...string) *section {
	if !p.isMapping(n, field) {
		return nil
	}
	s := &section{field: field, line: line, keys: make(map[string]*yaml.Node), vals: make(map[string]*yaml.Node), nulls: make(map[string]*yaml.Node)}
	first := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.fail(k, field, "a key must be a name, found %s", describe(k))
			continue
		}
		name := child(field, k.Value)
		if line, ok := first[k.Value]; ok {
			p.fail(k, name, "set twice: first at line %d", line)
			continue
		}
		first[k.Value] = k.Line
		if !slices.Contains(known, k.Value) {
			p.fail(k, name, "unknown key (known here: %s)", strings.Join(known, ", "))
			continue
		}
		if null(v) {
			s.nulls[k.Value] = k
		} else {
			s.keys[k.Value], s.vals[k.Value] = k, v
		}
	}
	return s
}

// sub checks the mapping under key, if it is set.
func (s *section) sub(p *parser, key string, known ...string) *section {
	v, ok := s.vals[key]
	if !ok {
		return nil
	}
	return p.fields(v, child(s.field, key), s.keys[key].Line, known...)
}

// absent is the line at which to report that key is not set: its own
// when it is set to null, else the section's.
func (s *section) absent(key string) int {
	if k, ok := s.nulls[key]; ok {
		return k.Line
	}
	return s.line
}

// missing reports that a required key is not set.
func (s *section) missing(p *parser, key string) {
	p.failAt(s.absent(key), child(s.field, key), "required")
}

// text returns the value of key as text and its node, or nil when the key
// is not set or not a single value; a required key that is not set is
// reported.
func (s *section) text(p *parser, key string, required bool) (string, *yaml.Node) {
	v, ok := s.vals[key]
	if !ok {
		if required {
			s.missing(p, key)
		}
		return "", nil
	}
	t, ok := p.str(v, child(s.field, key))
	if !ok {
		return "", nil
	}
	return t, v
}

// isMapping reports whether n is a mapping, reporting it when not.
func (p *parser) isMapping(n *yaml.Node, field string) bool {
	if n.Kind == yaml.MappingNode {
		return true
	}
	p.fail(n, field, "must be a mapping of keys to values, found %s", describe(n))
	return false
}

// list returns a sequence's elements, reporting any other kind.
func (p *parser) list(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	if n.Kind == yaml.SequenceNode {
		return n.Content, true
	}
	p.fail(n, field, "must be a list, found %s", describe(n))
	return nil, false
}

// str returns a scalar's text. Any scalar is text here: a node named 7 is
// the string "7".
func (p *parser) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind == yaml.ScalarNode {
		return n.Value, true
	}
	p.fail(n, field, "must be a single value, found %s", describe(n))
	return "", false
}

// item is a single value in a list, with its node and field path.
type item struct {
	text  string
	node  *yaml.Node
	field string
}

// strs returns the single values of a list, reporting any other element.
func (p *parser) strs(n *yaml.Node, field string) []item {
	elems, _ := p.list(n, field)
	var out []item
	for i, e := range elems {
		f := index(field, i)
		if s, ok := p.str(e, f); ok {
			out = append(out, item{s, e, f})
		}
	}
	return out
}

// integer returns a YAML integer. A quoted "1" or a 1.5 is refused: an
// operator who quoted a number may have meant something else.
func (p *parser) integer(n *yaml.Node, field string) (int, bool) {
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		p.fail(n, field, "must be a whole number, found %s", describe(n))
		return 0, false
	}
	return v, true
}

// boolean returns a YAML true or false.
func (p *parser) boolean(n *yaml.Node, field string) (bool, bool) {
	var v bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&v) != nil {
		p.fail(n, field, "must be true or false, found %s", describe(n))
		return false, false
	}
	return v, true
}

// duration returns a Go duration such as 200ms or 1m30s. A bare number is
// refused: 30 could mean seconds or nanoseconds.
func (p *parser) duration(n *yaml.Node, field string) (time.Duration, bool) {
	s, ok := p.str(n, field)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.fail(n, field, "must be a duration such as 200ms, 30s or 1m, found %q", s)
		return 0, false
	}
	if d < 0 {
		p.fail(n, field, "must not be negative, found %s", s)
		return 0, false
	}
	return d, true
}
