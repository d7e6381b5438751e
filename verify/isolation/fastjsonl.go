package isolation

import (
	"bytes"
	"context"
	"encoding/json"

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

// preMop is a micro-operation as the fast reader reads it, on a worker:
// its key not yet interned, a list read's elements in the batch's.
type preMop struct {
	f      mopKind
	strKey bool // the key is the string keyStr, not the integer key
	key    int64
	keyStr []byte
	val    int64
	null   bool  // a read's value is null
	start  int32 // a list read's elements in preBatch.elems
	n      int32
}

// preEvent is one event as the fast reader reads it.
type preEvent struct {
	index    int64
	hasIndex bool
	typ      history.Type
	process  history.Process
	nemesis  bool
	f        bool // the event names f (txn: the fast reader takes no other)
	mops     []preMop
}

// preBatch is what the fast reader read of a batch of lines: their
// events, and the micro-operations and read elements they point into.
type preBatch struct {
	evs   []preEvent
	mops  []preMop
	elems []int64
}

// fastReader is the fast reader as a history.LineReader: Prepare reads
// lines on the Decoder's workers, touching nothing but its workload;
// Take builds their transactions, in order.
type fastReader struct{ b *builder }

// Prepare implements history.LineReader.
func (r fastReader) Prepare(lines [][]byte, taken []bool) any {
	pb := &preBatch{evs: make([]preEvent, len(lines)), mops: make([]preMop, 0, 4*len(lines))}
	for k, line := range lines {
		taken[k] = pb.read(r.b.p.workload, line, &pb.evs[k])
	}
	return pb
}

// Take implements history.LineReader.
func (r fastReader) Take(prep any, k int, _ []byte, _ int) bool {
	pb := prep.(*preBatch)
	return r.b.take(pb, &pb.evs[k])
}

// read reads one line into ev, its micro-operations and elements
// appended to the batch's; false, with the batch as it was, when the
// line is for the general reader.
func (pb *preBatch) read(workload string, line []byte, ev *preEvent) bool {
	nmops, nelems := len(pb.mops), len(pb.elems)
	*ev = preEvent{process: history.NoProcess}
	sc := jsonscan.Scanner{B: line}
	// A value skipped unchecked must be valid JSON, or the fast reader
	// would accept what the general one refuses.
	if err := pb.event(workload, &sc, ev); err != nil || (ev.process == history.NoProcess && !ev.nemesis) || sc.Skipped && !json.Valid(line) {
		pb.mops, pb.elems = pb.mops[:nmops], pb.elems[:nelems]
		*ev = preEvent{}
		return false
	}
	ev.mops = pb.mops[nmops:len(pb.mops):len(pb.mops)]
	return true
}

// event reads one event object.
func (pb *preBatch) event(workload string, sc *jsonscan.Scanner, ev *preEvent) error {
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
			ev.hasIndex = true
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
			if err := pb.micro(workload, sc); err != nil {
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

// micro reads a transaction's list of [f key value] micro-operations
// into the batch's.
func (pb *preBatch) micro(workload string, sc *jsonscan.Scanner) error {
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
		var r preMop
		switch {
		case string(f) == "r":
			r.f = mRead
		case string(f) == "append" && workload == ListAppend:
			r.f = mAppend
		case string(f) == "w" && workload == RWRegister:
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
			r.strKey, r.keyStr = true, k
		} else {
			k, err := sc.Int()
			if err != nil {
				return err
			}
			r.key = k
		}
		if !sc.Byte(',') {
			return jsonscan.ErrSlow
		}
		switch {
		case sc.Null():
			r.null = true
		case r.f == mRead && workload == ListAppend:
			if !sc.Byte('[') {
				return jsonscan.ErrSlow
			}
			r.start = int32(len(pb.elems))
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
				pb.elems = append(pb.elems, v)
			}
			r.n = int32(len(pb.elems)) - r.start
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
		pb.mops = append(pb.mops, r)
	}
}
