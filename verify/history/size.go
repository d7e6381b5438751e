package history

import "fmt"

// meter sums the memory the parsed events hold and stops a reader at a
// bound, so that a history whose values blow up when parsed (deep
// nesting, tiny elements) is refused as it is read, not after.
type meter struct {
	max, used int64 // bytes; max <= 0 means no bound
}

// add charges one event; line is where it starts, for the error.
func (m *meter) add(e *Event, line int) error {
	if m == nil {
		return nil
	}
	m.used += eventBytes(e)
	if m.max > 0 && m.used > m.max {
		return &LimitError{Line: line, Limit: m.max, Parsed: true}
	}
	return nil
}

// eventBytes estimates the memory of a parsed event: the struct, its
// strings and its values.
func eventBytes(e *Event) int64 {
	return 112 + int64(len(e.F)+len(e.Node)) + valueBytes(e.Value) + valueBytes(e.Error)
}

// valueBytes estimates the memory a Value holds beyond its interface
// word pair: boxed numbers, string bytes, slices and maps with their
// elements (maps at about twice their entries, for their slack).
func valueBytes(v Value) int64 {
	switch x := v.(type) {
	case nil, bool:
		return 0
	case int64, float64:
		return 8
	case string:
		return 16 + int64(len(x))
	case []Value:
		n := int64(24 + 16*len(x))
		for _, y := range x {
			n += valueBytes(y)
		}
		return n
	case map[string]Value:
		n := int64(48)
		for k, y := range x {
			n += 2*(16+16) + int64(len(k)) + valueBytes(y)
		}
		return n
	}
	return 64 + int64(len(fmt.Sprint(v)))
}
