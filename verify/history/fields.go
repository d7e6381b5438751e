package history

import (
	"fmt"
)

// field is one key of an event map, from any reader, with where it was found.
type field struct {
	key       string
	val       Value
	line, col int
}

// buildEvent turns the fields of one event map into an Event. Every reader
// shares it, so the formats agree on what a valid event is. index is used
// when the map has no index of its own.
func buildEvent(fields []field, line, col int, index int64) (Event, error) {
	e := Event{Index: index, Process: NoProcess}
	var haveType bool
	var key *field
	var hasValue bool
	seen := make(map[string]bool, len(fields))
	for i := range fields {
		f := &fields[i]
		if seen[f.key] {
			return Event{}, &InputError{Line: f.line, Col: f.col, Msg: fmt.Sprintf("duplicate key %q in event", f.key)}
		}
		seen[f.key] = true
		bad := func(want string) error {
			return &InputError{Line: f.line, Col: f.col, Msg: fmt.Sprintf("expected %s to be %s, found %s", f.key, want, Show(f.val))}
		}
		switch f.key {
		case "type":
			s, ok := f.val.(string)
			if !ok {
				return Event{}, bad("one of invoke, ok, fail, info")
			}
			t, ok := ParseType(s)
			if !ok {
				return Event{}, bad("one of invoke, ok, fail, info")
			}
			e.Type, haveType = t, true
		case "process":
			switch p := f.val.(type) {
			case int64:
				if p < 0 {
					return Event{}, bad("a non-negative integer or nemesis")
				}
				e.Process = Process(p)
			case string:
				if p != "nemesis" {
					return Event{}, bad("a non-negative integer or nemesis")
				}
				e.Process = Nemesis
			default:
				return Event{}, bad("a non-negative integer or nemesis")
			}
		case "f":
			s, ok := f.val.(string)
			if !ok {
				return Event{}, bad("a keyword or string")
			}
			e.F = s
		case "value":
			e.Value, hasValue = f.val, true
		case "index":
			n, ok := f.val.(int64)
			if !ok {
				return Event{}, bad("an integer")
			}
			e.Index = n
		case "time":
			n, ok := f.val.(int64)
			if !ok {
				return Event{}, bad("an integer (nanoseconds)")
			}
			e.Time = n
		case "error":
			e.Error = f.val
		case "node":
			s, ok := f.val.(string)
			if !ok {
				return Event{}, bad("a string")
			}
			e.Node = s
		case "key":
			key = f
		}
	}
	if !haveType {
		return Event{}, &InputError{Line: line, Col: col, Msg: "event has no type (expected invoke, ok, fail or info)"}
	}
	if key != nil {
		// Jepsen's independent workloads carry [key value] tuples; a separate
		// key field (as in Porcupine's kv data) is folded into that shape so
		// that models see one convention.
		if !hasValue {
			e.Value = nil
		}
		e.Value = []Value{key.val, e.Value}
	}
	return e, nil
}
