package isolation

import (
	"bytes"
	"context"
	"errors"
	"strconv"

	"github.com/ipfence/ipfence/verify/history"
)

// CheckJSONL checks a JSON Lines history given as bytes (see
// CheckReader).
func CheckJSONL(ctx context.Context, name string, data []byte, o Options) (*Result, error) {
	return CheckReader(ctx, name, bytes.NewReader(data), history.JSONL, history.Limits{}, o)
}

// reservedVal says an integer falls where interned values live, so the
// general reader must intern it.
func reservedVal(v int64) bool { return v == nilVal || (v >= otherBase && v < otherBase+1<<40) }

// errSlow sends a history to the general reader.
var errSlow = errors.New("not for the fast reader")

// scanner reads one line of JSON. What it reads itself it reads as
// strictly as JSON is defined (no control characters in strings, no
// leading zeros), so that only a line in which it skipped a value
// (skipped) needs checking with json.Valid: that took a seventh of the
// time of a million-transaction check.
type scanner struct {
	b       []byte
	i       int
	skipped bool
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
	for _, c := range out {
		if c == '\\' || c < 0x20 {
			return nil, errSlow
		}
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
	digits := s.b[s.i:j]
	neg := len(digits) > 0 && digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' {
		return 0, errSlow
	}
	var n int64
	if len(digits) <= 18 {
		for _, c := range digits {
			n = 10*n + int64(c-'0')
		}
		if neg {
			n = -n
		}
	} else {
		var err error
		if n, err = strconv.ParseInt(string(s.b[s.i:j]), 10, 64); err != nil {
			return 0, errSlow
		}
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

// skip passes over any JSON value, without checking it.
func (s *scanner) skip() error {
	s.skipped = true
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
	f       bool // the event names f (txn: the fast reader takes no other)
	mops    []rawMop
}

// fastEvent reads one event object.
func (p *parsed) fastEvent(sc *scanner, ev *fastEvent) error {
	if !sc.byte('{') {
		return errSlow
	}
	sawType, sawValue := false, false
	// The keys seen, in the line: no string is made of them.
	var seenBuf [8][]byte
	seenKeys := seenBuf[:0]
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
		for _, k := range seenKeys {
			if bytes.Equal(k, key) {
				return errSlow
			}
		}
		seenKeys = append(seenKeys, key)
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
			ev.f = true
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
