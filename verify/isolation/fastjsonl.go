package isolation

import (
	"bytes"
	"context"

	"github.com/ipfence/ipfence/internal/jsonscan"
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
func (p *parsed) fastEvent(sc *jsonscan.Scanner, ev *fastEvent) error {
	if !sc.Byte('{') {
		return jsonscan.ErrSlow
	}
	sawType, sawValue := false, false
	// The keys seen, in the line: no string is made of them.
	var seenBuf [8][]byte
	seenKeys := seenBuf[:0]
	for first := true; ; first = false {
		if sc.Byte('}') {
			break
		}
		if !first && !sc.Byte(',') {
			return jsonscan.ErrSlow
		}
		key, err := sc.Str()
		if err != nil || !sc.Byte(':') {
			return jsonscan.ErrSlow
		}
		// What the general reader refuses or reshapes goes to it: a
		// repeated key, a "key" field (folded into the value), a time or
		// a node of the wrong kind.
		for _, k := range seenKeys {
			if bytes.Equal(k, key) {
				return jsonscan.ErrSlow
			}
		}
		seenKeys = append(seenKeys, key)
		switch string(key) {
		case "key":
			return jsonscan.ErrSlow
		case "time":
			if _, err := sc.Int(); err != nil {
				return err
			}
			continue
		case "node":
			if _, err := sc.Str(); err != nil {
				return err
			}
			continue
		}
		switch string(key) {
		case "index":
			if ev.index, err = sc.Int(); err != nil {
				return err
			}
		case "type":
			t, err := sc.Str()
			if err != nil {
				return err
			}
			typ, ok := history.ParseType(string(t))
			if !ok {
				return jsonscan.ErrSlow
			}
			ev.typ, sawType = typ, true
		case "process":
			if sc.Null() {
				continue
			}
			sc.WS()
			if sc.I < len(sc.B) && sc.B[sc.I] == '"' {
				s, err := sc.Str()
				if err != nil || string(s) != "nemesis" {
					return jsonscan.ErrSlow
				}
				ev.nemesis = true
				continue
			}
			n, err := sc.Int()
			if err != nil || n < 0 {
				return jsonscan.ErrSlow
			}
			ev.process = history.Process(n)
		case "f":
			f, err := sc.Str()
			if err != nil {
				return err
			}
			ev.f = true
			if string(f) != "txn" && !ev.nemesis {
				// Checked again once the process is known: a nemesis
				// event may name anything.
				ev.mops = ev.mops[:0]
				if err := sc.SkipUntilEnd(); err != nil {
					return err
				}
				return jsonscan.ErrSlow
			}
		case "value":
			if ev.nemesis {
				if err := sc.Skip(); err != nil {
					return err
				}
				continue
			}
			if err := p.fastMops(sc, ev); err != nil {
				return err
			}
			sawValue = true
		default:
			if err := sc.Skip(); err != nil {
				return err
			}
		}
	}
	sc.WS()
	if !sawType || sc.I != len(sc.B) || (!sawValue && !ev.nemesis) {
		return jsonscan.ErrSlow
	}
	return nil
}

// fastMops reads a transaction's list of [f key value] micro-operations.
func (p *parsed) fastMops(sc *jsonscan.Scanner, ev *fastEvent) error {
	if sc.Null() {
		return jsonscan.ErrSlow
	}
	if !sc.Byte('[') {
		return jsonscan.ErrSlow
	}
	for first := true; ; first = false {
		if sc.Byte(']') {
			return nil
		}
		if !first && !sc.Byte(',') {
			return jsonscan.ErrSlow
		}
		if !sc.Byte('[') {
			return jsonscan.ErrSlow
		}
		f, err := sc.Str()
		if err != nil || !sc.Byte(',') {
			return jsonscan.ErrSlow
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
			return jsonscan.ErrSlow
		}
		// The key: an integer or a string.
		sc.WS()
		if sc.I < len(sc.B) && sc.B[sc.I] == '"' {
			k, err := sc.Str()
			if err != nil {
				return err
			}
			r.key = p.in.key(string(k))
		} else {
			k, err := sc.Int()
			if err != nil {
				return err
			}
			r.key = p.in.key(k)
		}
		if !sc.Byte(',') {
			return jsonscan.ErrSlow
		}
		switch {
		case sc.Null():
			r.null = true
		case r.f == mRead && p.workload == ListAppend:
			if !sc.Byte('[') {
				return jsonscan.ErrSlow
			}
			r.start = int32(len(p.reads))
			for firstElem := true; ; firstElem = false {
				if sc.Byte(']') {
					break
				}
				if !firstElem && !sc.Byte(',') {
					return jsonscan.ErrSlow
				}
				v, err := sc.Int()
				if err != nil || reservedVal(v) {
					return jsonscan.ErrSlow
				}
				p.reads = append(p.reads, v)
			}
			r.n = int32(len(p.reads)) - r.start
			r.start = p.keepRead(r.key, r.start)
		default:
			v, err := sc.Int()
			if err != nil || reservedVal(v) {
				return jsonscan.ErrSlow
			}
			r.val = v
		}
		if !sc.Byte(']') {
			return jsonscan.ErrSlow
		}
		ev.mops = append(ev.mops, r)
	}
}
