package history

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ipfence/ipfence/verify/edn"
)

func ednError(err error) error {
	var se *edn.SyntaxError
	if errors.As(err, &se) {
		return &InputError{Line: se.Pos.Line, Col: se.Pos.Col, Msg: se.Msg}
	}
	return err
}

// readEDN reads Jepsen/Knossos EDN: event maps one per top-level form, or all
// inside one top-level vector or list. Tagged maps (#jepsen.history.Op{...})
// are read as maps. Forms are read one at a time, so that only the events
// stay in memory, not the parse tree of the whole file; a single vector
// is parsed whole, and is refused beforehand when it would take more than
// m allows.
func readEDN(data []byte, m *meter) ([]Event, error) {
	if s := skipSpaceAndEDNComments(data); len(s) > 0 && (s[0] == '[' || s[0] == '(') && m != nil && m.max > 0 &&
		int64(len(data))*ednVectorFactor > m.max {
		return nil, &LimitError{Line: 1, Limit: m.max, Parsed: true}
	}
	p := edn.NewParser(data)
	var events []Event
	first := true
	for {
		form, ok, err := p.Next()
		if err != nil {
			return nil, ednError(err)
		}
		if !ok {
			return events, nil
		}
		if first && (form.Kind == edn.Vector || form.Kind == edn.List) {
			if _, more, err := p.Next(); err != nil {
				return nil, ednError(err)
			} else if !more {
				// The one vector of every event.
				events = make([]Event, 0, len(form.Items))
				for i := range form.Items {
					e, err := ednEvent(&form.Items[i], int64(i))
					if err != nil {
						return nil, err
					}
					if err := m.add(&e, form.Items[i].Pos.Line); err != nil {
						return nil, err
					}
					events = append(events, e)
				}
				return events, nil
			}
		}
		first = false
		e, err := ednEvent(&form, int64(len(events)))
		if err != nil {
			return nil, err
		}
		if err := m.add(&e, form.Pos.Line); err != nil {
			return nil, err
		}
		events = append(events, e)
	}
}

// ednVectorFactor is about how many times its size an EDN history held in
// one vector takes while it is parsed whole (measured: 30 times for
// Elle's huge-scc.edn written so, 65 for deeply nested values).
const ednVectorFactor = 70

func ednEvent(n *edn.Node, index int64) (Event, error) {
	m := untag(n)
	if m.Kind != edn.Map {
		return Event{}, &InputError{Line: n.Pos.Line, Col: n.Pos.Col, Msg: fmt.Sprintf("expected an event map, found a %s", m.Kind)}
	}
	fields := make([]field, 0, len(m.Items)/2)
	for i := 0; i < len(m.Items); i += 2 {
		k, v := &m.Items[i], &m.Items[i+1]
		kv := untag(k)
		if kv.Kind != edn.Keyword && kv.Kind != edn.String && kv.Kind != edn.Symbol {
			return Event{}, &InputError{Line: k.Pos.Line, Col: k.Pos.Col, Msg: fmt.Sprintf("expected an event key such as :type, found a %s", kv.Kind)}
		}
		val, err := ednValue(v)
		if err != nil {
			return Event{}, err
		}
		fields = append(fields, field{key: kv.Str, val: val, line: v.Pos.Line, col: v.Pos.Col})
	}
	return buildEvent(fields, n.Pos.Line, n.Pos.Col, index)
}

// untag strips tags: a tagged element reads as the form it tags.
func untag(n *edn.Node) *edn.Node {
	for n.Kind == edn.Tagged {
		n = &n.Items[0]
	}
	return n
}

// ednValue converts an EDN element to a Value.
func ednValue(n *edn.Node) (Value, error) {
	n = untag(n)
	switch n.Kind {
	case edn.Nil:
		return nil, nil
	case edn.Bool:
		return n.Bool, nil
	case edn.Int:
		return n.Int, nil
	case edn.Float:
		return n.Float, nil
	case edn.String, edn.Char, edn.Keyword, edn.Symbol:
		return n.Str, nil
	case edn.List, edn.Vector, edn.Set:
		out := make([]Value, len(n.Items))
		for i := range n.Items {
			v, err := ednValue(&n.Items[i])
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case edn.Map:
		out := make(map[string]Value, len(n.Items)/2)
		for i := 0; i < len(n.Items); i += 2 {
			k, err := mapKey(&n.Items[i])
			if err != nil {
				return nil, err
			}
			if _, dup := out[k]; dup {
				return nil, &InputError{Line: n.Items[i].Pos.Line, Col: n.Items[i].Pos.Col, Msg: fmt.Sprintf("duplicate map key %q", k)}
			}
			v, err := ednValue(&n.Items[i+1])
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	}
	return nil, &InputError{Line: n.Pos.Line, Col: n.Pos.Col, Msg: fmt.Sprintf("unsupported %s", n.Kind)}
}

// mapKey renders a map key as a string, as elle-cli's JSON does.
func mapKey(n *edn.Node) (string, error) {
	n = untag(n)
	switch n.Kind {
	case edn.String, edn.Keyword, edn.Symbol, edn.Char:
		return n.Str, nil
	case edn.Int:
		return strconv.FormatInt(n.Int, 10), nil
	case edn.Bool:
		return strconv.FormatBool(n.Bool), nil
	case edn.Nil:
		return "nil", nil
	}
	return "", &InputError{Line: n.Pos.Line, Col: n.Pos.Col, Msg: fmt.Sprintf("a %s cannot be a map key here (only keywords, strings, symbols and integers)", n.Kind)}
}

// readJepsenLog reads the Jepsen log lines of Porcupine's test data:
//
//	INFO  jepsen.util - 3	:ok	:cas	[1 2]
//
// Separators may be tabs or spaces. The value is one EDN form; a second form,
// if any, is the error. Lines that are not jepsen.util event lines are other
// log output and are skipped.
func readJepsenLog(data []byte, m *meter) ([]Event, error) {
	var events []Event
	lineNo := 0
	for raw := range strings.SplitSeq(string(data), "\n") {
		lineNo++
		e, ok, err := jepsenLogEvent(raw, lineNo, int64(len(events)))
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if err := m.add(&e, lineNo); err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	if len(events) == 0 {
		return nil, errNoLogEvents()
	}
	return events, nil
}

func errNoLogEvents() error {
	return &InputError{Msg: "no \"jepsen.util - \" event lines in file"}
}

// jepsenLogEvent reads one line of a Jepsen log as the event at index; ok
// is false for a line that is not a jepsen.util event line (other log
// output).
func jepsenLogEvent(raw string, lineNo int, index int64) (Event, bool, error) {
	line := strings.TrimRight(raw, "\r")
	i := strings.Index(line, "jepsen.util - ")
	if i < 0 {
		return Event{}, false, nil
	}
	off := i + len("jepsen.util - ")
	p := edn.NewParserAt([]byte(line[off:]), edn.Pos{Line: lineNo, Col: utf8Col(line, off)})
	errAt := func(pos edn.Pos, msg string) error {
		return &InputError{Line: pos.Line, Col: pos.Col, Msg: msg}
	}
	// process, type, f, value, and an optional error; a sixth form is
	// an error.
	var parts [6]edn.Node
	n := 0
	for n < len(parts) {
		form, ok, err := p.Next()
		if err != nil {
			var se *edn.SyntaxError
			if errors.As(err, &se) {
				return Event{}, false, errAt(se.Pos, se.Msg)
			}
			return Event{}, false, err
		}
		if !ok {
			break
		}
		parts[n] = form
		n++
	}
	if n == len(parts) {
		return Event{}, false, errAt(parts[5].Pos, "unexpected text after the event's value and error")
	}
	if n < 4 {
		return Event{}, false, errAt(p.Pos(), "expected <process> :<type> :<f> <value> after \"jepsen.util - \"")
	}
	e := Event{Index: index}
	switch proc := parts[0]; {
	case proc.Kind == edn.Int && proc.Int >= 0:
		e.Process = Process(proc.Int)
	case proc.Kind == edn.Keyword && proc.Str == "nemesis":
		e.Process = Nemesis
	default:
		return Event{}, false, errAt(proc.Pos, "expected a process number or :nemesis")
	}
	t, ok := ParseType(parts[1].Str)
	if parts[1].Kind != edn.Keyword || !ok {
		return Event{}, false, errAt(parts[1].Pos, "expected :invoke, :ok, :fail or :info")
	}
	e.Type = t
	if parts[2].Kind != edn.Keyword {
		return Event{}, false, errAt(parts[2].Pos, "expected the operation's function as a keyword, such as :read")
	}
	e.F = parts[2].Str
	v, err := ednValue(&parts[3])
	if err != nil {
		return Event{}, false, err
	}
	e.Value = v
	if n == 5 {
		ev, err := ednValue(&parts[4])
		if err != nil {
			return Event{}, false, err
		}
		e.Error = ev
	}
	// A crash reports its reason where the value would be; the value of
	// an info or fail completion is then the reason, not a result.
	if (t == Info || t == Fail) && parts[3].Kind == edn.Keyword && n == 4 {
		e.Error, e.Value = v, nil
	}
	return e, true, nil
}

func utf8Col(line string, off int) int { return len([]rune(line[:off])) + 1 }
