package model

import (
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// StateValue gives each built-in model's states as values, so that a page
// that shows operations in JSON (lincheck's linear.html) shows the states
// in JSON too, rather than in the models' own notation (nil, #{1 2},
// {k v}) that their descriptions use for text.

// valuesOf is the values a vector of ids names.
func (v *values) valuesOf(ids []uint32) []history.Value {
	out := make([]history.Value, len(ids))
	for i, id := range ids {
		out[i] = v.vals[id]
	}
	return out
}

// keyName is a key as a JSON object's member name: a string as itself,
// any other value in its JSON form.
func keyName(k history.Value) string {
	if s, ok := k.(string); ok {
		return s
	}
	b, err := history.AppendJSON(nil, k)
	if err != nil {
		return history.Show(k)
	}
	return string(b)
}

// StateValue is the register's value.
func (s *registerSpec) StateValue(st linear.State) (history.Value, bool) {
	return s.vals.vals[uint32(st)], true
}

// StateValue is the set's elements.
func (s *setSpec) StateValue(st linear.State) (history.Value, bool) {
	return s.vals.valuesOf(s.vecs.get(st)), true
}

// StateValue is the queue's elements, oldest first.
func (s *queueSpec) StateValue(st linear.State) (history.Value, bool) {
	return s.vals.valuesOf(s.vecs.get(st)), true
}

// StateValue is "held" or "free".
func (s *mutexSpec) StateValue(st linear.State) (history.Value, bool) {
	return s.DescribeState(st), true
}

// StateValue is the key's string.
func (s *kvSpec) StateValue(st linear.State) (history.Value, bool) { return s.strs[st], true }

// StateValue maps each key to its string.
func (s *kvWholeSpec) StateValue(st linear.State) (history.Value, bool) {
	out := map[string]history.Value{}
	for k, id := range s.vecs.get(st) {
		out[keyName(s.keys[k].key)] = s.keys[k].strs[id]
	}
	return out, true
}

// StateValue maps each register to its value.
func (s *multiSpec) StateValue(st linear.State) (history.Value, bool) {
	out := map[string]history.Value{}
	for i, id := range s.vecs.get(st) {
		out[keyName(s.keys[i])] = s.vals.vals[id]
	}
	return out, true
}

// StateValue is the state as a value, unless the model describes its
// states itself (Describe) or the state is not one a history can hold.
func (s *funcsSpec[S]) StateValue(st linear.State) (history.Value, bool) {
	if s.f.Describe != nil || int(st) >= len(s.states) || !canShow(any(s.states[st])) {
		return nil, false
	}
	v, err := history.Normalize(any(s.states[st]))
	return v, err == nil
}
