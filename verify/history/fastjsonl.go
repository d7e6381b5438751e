package history

import (
	"unicode/utf8"

	"github.com/ipfence/ipfence/internal/jsonscan"
)

// maxFastDepth bounds the nesting the fast reader follows; deeper values
// go to the general reader.
const maxFastDepth = 32

// fastJSONLEvent reads a JSON Lines event of the usual shape (integers,
// plain strings, null, booleans and arrays of them) without
// encoding/json, which spent nine tenths of the time of reading a
// million-operation history on its tokens and their garbage. The event is
// built by buildEvent, as every reader's is. Anything else — an object
// value, a fraction, an escape, a line buildEvent refuses — returns false,
// and the general reader reads the line and says what is wrong with it.
func fastJSONLEvent(line []byte, index int64) (Event, bool) {
	sc := jsonscan.Scanner{B: line}
	// encoding/json reads bytes that are not UTF-8 as U+FFFD.
	if !utf8.Valid(line) || !sc.Byte('{') {
		return Event{}, false
	}
	var buf [10]field
	fields := buf[:0]
	for first := true; ; first = false {
		if sc.Byte('}') {
			break
		}
		if !first && !sc.Byte(',') {
			return Event{}, false
		}
		key, err := sc.Str()
		if err != nil || !sc.Byte(':') {
			return Event{}, false
		}
		v, ok := fastValue(&sc, 0)
		if !ok {
			return Event{}, false
		}
		fields = append(fields, field{key: fieldName(key), val: v, line: 1, col: 1})
	}
	sc.WS()
	if sc.I != len(line) {
		return Event{}, false
	}
	e, err := buildEvent(fields, 1, 1, index)
	if err != nil {
		return Event{}, false
	}
	return e, true
}

// fieldName returns the event keys without allocating.
func fieldName(b []byte) string {
	switch string(b) {
	case "index":
		return "index"
	case "type":
		return "type"
	case "process":
		return "process"
	case "f":
		return "f"
	case "value":
		return "value"
	case "time":
		return "time"
	case "error":
		return "error"
	case "node":
		return "node"
	case "key":
		return "key"
	}
	return string(b)
}

// commonStrings are the strings most events repeat (types, functions,
// errors): shared, not allocated per event.
var commonStrings = map[string]string{}

func init() {
	for _, s := range []string{"invoke", "ok", "fail", "info", "read", "write", "cas", "txn", "r", "w", "append",
		"add", "get", "put", "acquire", "release", "enqueue", "dequeue", "timeout", "nemesis"} {
		commonStrings[s] = s
	}
}

// smallInts are the integers most histories hold (keys, small values),
// boxed once: an int64 in an interface is otherwise allocated apart, and
// ten million operations over a thousand keys allocated ten million.
var smallInts = func() (a [1 << 12]Value) {
	for i := range a {
		a[i] = int64(i)
	}
	return a
}()

// fastValue reads a value of the shapes fastJSONLEvent takes.
func fastValue(sc *jsonscan.Scanner, depth int) (Value, bool) {
	sc.WS()
	if sc.I >= len(sc.B) {
		return nil, false
	}
	switch c := sc.B[sc.I]; {
	case c == 'n':
		return nil, sc.Null()
	case c == 't' || c == 'f':
		for _, lit := range []string{"true", "false"} {
			if len(sc.B)-sc.I >= len(lit) && string(sc.B[sc.I:sc.I+len(lit)]) == lit {
				sc.I += len(lit)
				return lit == "true", true
			}
		}
		return nil, false
	case c == '"':
		s, err := sc.Str()
		if err != nil {
			return nil, false
		}
		if common, ok := commonStrings[string(s)]; ok {
			return common, true
		}
		return string(s), true
	case c == '-' || c >= '0' && c <= '9':
		n, err := sc.Int()
		if err == nil && n >= 0 && n < int64(len(smallInts)) {
			return smallInts[n], true
		}
		return n, err == nil
	case c == '[':
		if depth == maxFastDepth {
			return nil, false
		}
		sc.I++
		out := make([]Value, 0, 2)
		for first := true; ; first = false {
			if sc.Byte(']') {
				return out, true
			}
			if !first && !sc.Byte(',') {
				return nil, false
			}
			v, ok := fastValue(sc, depth+1)
			if !ok {
				return nil, false
			}
			out = append(out, v)
		}
	}
	return nil, false
}
