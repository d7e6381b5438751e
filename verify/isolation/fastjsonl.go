package isolation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/ipfence/ipfence/verify/history"
)

// CheckJSONL checks a JSON Lines history given as bytes. Histories of a
// million transactions are common; decoding them into generic values
// first costs more than checking them, so this reads the events straight
// into the compact form. Whatever it does not expect (a value that is not
// an integer or a string key, an escaped string, a line it cannot read) makes
// it hand the whole history to the general reader, which reads every
// history or says exactly where and why it cannot.
func CheckJSONL(ctx context.Context, name string, data []byte, o Options) (*Result, error) {
	start := time.Now()
	if err := o.defaults(); err != nil {
		return nil, err
	}
	p, ok := fastParse(o.Workload, data)
	if !ok {
		h, err := history.Parse(name, data, history.JSONL)
		if err != nil {
			return nil, err
		}
		return Check(ctx, h, o)
	}
	return p.check(ctx, o, start), nil
}

// reservedVal says an integer falls where interned values live, so the
// general reader must intern it.
func reservedVal(v int64) bool { return v == nilVal || (v >= otherBase && v < otherBase+1<<40) }

// errSlow sends a history to the general reader.
var errSlow = errors.New("not for the fast reader")

// scanner reads one line of JSON.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scanner) byte(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string without escapes.
func (s *scanner) str() ([]byte, error) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, errSlow
	}
	j := bytes.IndexByte(s.b[s.i+1:], '"')
	if j < 0 {
		return nil, errSlow
	}
	out := s.b[s.i+1 : s.i+1+j]
	if bytes.IndexByte(out, '\\') >= 0 {
		return nil, errSlow
	}
	s.i += j + 2
	return out, nil
}

// int reads an integer.
func (s *scanner) int() (int64, error) {
	s.ws()
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
		j++
	}
	if j < len(s.b) && (s.b[j] == '.' || s.b[j] == 'e' || s.b[j] == 'E') {
		return 0, errSlow
	}
	n, err := strconv.ParseInt(string(s.b[s.i:j]), 10, 64)
	if err != nil {
		return 0, errSlow
	}
	s.i = j
	return n, nil
}

func (s *scanner) null() bool {
	s.ws()
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// skip passes over any JSON value.
func (s *scanner) skip() error {
	s.ws()
	if s.i >= len(s.b) {
		return errSlow
	}
	switch c := s.b[s.i]; {
	case c == '"':
		s.i++
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '\\':
				s.i += 2
				continue
			case '"':
				s.i++
				return nil
			}
			s.i++
		}
		return errSlow
	case c == '{' || c == '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if err := s.skip(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return nil
				}
			}
			s.i++
		}
		return errSlow
	default:
		for s.i < len(s.b) && s.b[s.i] != ',' && s.b[s.i] != '}' && s.b[s.i] != ']' {
			s.i++
		}
		return nil
	}
}

// rawMop is a micro-operation as read, before its transaction is known to
// have completed.
type rawMop struct {
	f     mopKind
	key   int32
	val   int64
	null  bool  // a read's value is null
	start int32 // a list read's elements in the reads arena
	n     int32
}

// fastEvent is one event as the fast reader keeps it.
type fastEvent struct {
	index   int64
	typ     history.Type
	process history.Process
	nemesis bool
	mops    []rawMop
	line    int32 // where the line starts, for reports
}

// fastParse reads a transactional JSON Lines history; ok is false when it
// met something only the general reader handles.
func fastParse(workload string, data []byte) (*parsed, bool) {
	p := &parsed{workload: workload, in: newInterner()}
	var lineStarts []int32
	open := map[history.Process]int32{} // process → its open invoke's txn
	var invokeMops [][]rawMop           // per txn, the invoke's micro-ops
	var mops []mop
	pos := int32(0) // event position
	var sc scanner
	var ev fastEvent
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += off
		}
		line := data[off:end]
		lineStart := int32(off)
		off = end + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// The scanner below assumes valid JSON; checking it first keeps
		// the fast reader from accepting anything the general one refuses.
		if !json.Valid(line) {
			return nil, false
		}
		sc = scanner{b: line}
		ev = fastEvent{index: int64(pos), process: history.NoProcess, line: lineStart, mops: ev.mops[:0]}
		if err := p.fastEvent(&sc, &ev); err != nil {
			return nil, false
		}
		if ev.process == history.NoProcess && !ev.nemesis {
			return nil, false
		}
		if ev.nemesis {
			pos++
			continue
		}
		if ev.typ == history.Invoke {
			if _, busy := open[ev.process]; busy {
				return nil, false
			}
			t := int32(len(p.txns))
			open[ev.process] = t
			p.txns = append(p.txns, txn{index: ev.index, invoke: ev.index, process: ev.process, typ: history.Info, call: pos, ret: -1})
			invokeMops = append(invokeMops, append([]rawMop(nil), ev.mops...))
			lineStarts = append(lineStarts, lineStart, -1)
			pos++
			continue
		}
		t, ok := open[ev.process]
		if !ok {
			return nil, false
		}
		delete(open, ev.process)
		tx := &p.txns[t]
		tx.typ, tx.ret, tx.index = ev.typ, pos, ev.index
		lineStarts[2*t+1] = lineStart
		src := invokeMops[t]
		if ev.typ == history.OK {
			if len(ev.mops) != len(src) {
				return nil, false
			}
			src = ev.mops
		}
		start := len(mops)
		for j, r := range src {
			m := mop{kind: r.f, key: r.key, val: r.val}
			if r.f != mRead && ev.typ == history.OK && invokeMops[t][j] != r {
				return nil, false
			}
			if r.f == mRead && ev.typ == history.OK {
				if invokeMops[t][j].f != mRead || invokeMops[t][j].key != r.key {
					return nil, false
				}
				m.known = true
				if workload == RWRegister && r.null {
					m.val = nilVal
				}
				m.start, m.n = r.start, r.n
			}
			mops = append(mops, m)
		}
		tx.mops = mops[start:len(mops):len(mops)]
		invokeMops[t] = nil
		pos++
	}
	// Transactions never completed are indeterminate, with the invoke's
	// micro-operations.
	for _, t := range open {
		start := len(mops)
		for _, r := range invokeMops[t] {
			mops = append(mops, mop{kind: r.f, key: r.key, val: r.val})
		}
		p.txns[t].mops = mops[start:len(mops):len(mops)]
	}
	p.value = func(t int32) history.Value {
		// Only reports come here: read the one line again, generally.
		at := lineStarts[2*t+1]
		if p.txns[t].typ != history.OK || at < 0 {
			at = lineStarts[2*t]
		}
		end := bytes.IndexByte(data[at:], '\n')
		if end < 0 {
			end = len(data) - int(at)
		}
		h, err := history.Parse("line", data[at:int(at)+end], history.JSONL)
		if err != nil || len(h.Events) != 1 {
			return nil
		}
		return h.Events[0].Value
	}
	return p, true
}

// fastEvent reads one event object.
func (p *parsed) fastEvent(sc *scanner, ev *fastEvent) error {
	if !sc.byte('{') {
		return errSlow
	}
	sawType, sawValue := false, false
	var seenKeys []string
	for first := true; ; first = false {
		if sc.byte('}') {
			break
		}
		if !first && !sc.byte(',') {
			return errSlow
		}
		key, err := sc.str()
		if err != nil || !sc.byte(':') {
			return errSlow
		}
		// What the general reader refuses or reshapes goes to it: a
		// repeated key, a "key" field (folded into the value), a time or
		// a node of the wrong kind.
		if len(seenKeys) > 0 && slices.Contains(seenKeys, string(key)) {
			return errSlow
		}
		seenKeys = append(seenKeys, string(key))
		switch string(key) {
		case "key":
			return errSlow
		case "time":
			if _, err := sc.int(); err != nil {
				return err
			}
			continue
		case "node":
			if _, err := sc.str(); err != nil {
				return err
			}
			continue
		}
		switch string(key) {
		case "index":
			if ev.index, err = sc.int(); err != nil {
				return err
			}
		case "type":
			t, err := sc.str()
			if err != nil {
				return err
			}
			typ, ok := history.ParseType(string(t))
			if !ok {
				return errSlow
			}
			ev.typ, sawType = typ, true
		case "process":
			if sc.null() {
				continue
			}
			sc.ws()
			if sc.i < len(sc.b) && sc.b[sc.i] == '"' {
				s, err := sc.str()
				if err != nil || string(s) != "nemesis" {
					return errSlow
				}
				ev.nemesis = true
				continue
			}
			n, err := sc.int()
			if err != nil || n < 0 {
				return errSlow
			}
			ev.process = history.Process(n)
		case "f":
			f, err := sc.str()
			if err != nil {
				return err
			}
			if string(f) != "txn" && !ev.nemesis {
				// Checked again once the process is known: a nemesis
				// event may name anything.
				ev.mops = ev.mops[:0]
				if err := sc.skipUntilEnd(); err != nil {
					return err
				}
				return errSlow
			}
		case "value":
			if ev.nemesis {
				if err := sc.skip(); err != nil {
					return err
				}
				continue
			}
			if err := p.fastMops(sc, ev); err != nil {
				return err
			}
			sawValue = true
		default:
			if err := sc.skip(); err != nil {
				return err
			}
		}
	}
	sc.ws()
	if !sawType || sc.i != len(sc.b) || (!sawValue && !ev.nemesis) {
		return errSlow
	}
	return nil
}

// skipUntilEnd gives up on the rest of the line.
func (s *scanner) skipUntilEnd() error { s.i = len(s.b); return nil }

// fastMops reads a transaction's list of [f key value] micro-operations.
func (p *parsed) fastMops(sc *scanner, ev *fastEvent) error {
	if sc.null() {
		return errSlow
	}
	if !sc.byte('[') {
		return errSlow
	}
	for first := true; ; first = false {
		if sc.byte(']') {
			return nil
		}
		if !first && !sc.byte(',') {
			return errSlow
		}
		if !sc.byte('[') {
			return errSlow
		}
		f, err := sc.str()
		if err != nil || !sc.byte(',') {
			return errSlow
		}
		var r rawMop
		switch {
		case string(f) == "r":
			r.f = mRead
		case string(f) == "append" && p.workload == ListAppend:
			r.f = mAppend
		case string(f) == "w" && p.workload == RWRegister:
			r.f = mWrite
		default:
			return errSlow
		}
		// The key: an integer or a string.
		sc.ws()
		if sc.i < len(sc.b) && sc.b[sc.i] == '"' {
			k, err := sc.str()
			if err != nil {
				return err
			}
			r.key = p.in.key(string(k))
		} else {
			k, err := sc.int()
			if err != nil {
				return err
			}
			r.key = p.in.key(k)
		}
		if !sc.byte(',') {
			return errSlow
		}
		switch {
		case sc.null():
			r.null = true
		case r.f == mRead && p.workload == ListAppend:
			if !sc.byte('[') {
				return errSlow
			}
			r.start = int32(len(p.reads))
			for firstElem := true; ; firstElem = false {
				if sc.byte(']') {
					break
				}
				if !firstElem && !sc.byte(',') {
					return errSlow
				}
				v, err := sc.int()
				if err != nil || reservedVal(v) {
					return errSlow
				}
				p.reads = append(p.reads, v)
			}
			r.n = int32(len(p.reads)) - r.start
			r.start = p.keepRead(r.key, r.start)
		default:
			v, err := sc.int()
			if err != nil || reservedVal(v) {
				return errSlow
			}
			r.val = v
		}
		if !sc.byte(']') {
			return errSlow
		}
		ev.mops = append(ev.mops, r)
	}
}
