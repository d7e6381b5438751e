package history

import (
	"encoding/json"
	"testing"
)

// Values a user builds in Go and values a history or a client returns
// compare by meaning.
func TestValuesCompareByMeaning(t *testing.T) {
	var fromJSON any
	if err := json.Unmarshal([]byte(`{"n": 3, "l": [0, 1]}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		a, b Value
		want bool
	}{
		{"int and int64", 0, int64(0), true},
		{"int32 and int64", int32(7), int64(7), true},
		{"uint8 and int64", uint8(7), int64(7), true},
		{"JSON float64 of an integer and int64", 3.0, int64(3), true},
		{"encoding/json map and Value map", fromJSON, map[string]Value{"n": int64(3), "l": []Value{int64(0), int64(1)}}, true},
		{"[]int and []Value", []int{1, 2}, []Value{int64(1), int64(2)}, true},
		{"[]byte and string", []byte("v1"), "v1", true},
		{"different ints", 1, int64(2), false},
		{"fraction and int", 3.5, int64(3), false},
		{"string and int", "0", int64(0), false},
		{"nil and 0", nil, 0, false},
	}
	for _, c := range cases {
		if got := Equal(c.a, c.b); got != c.want {
			t.Errorf("%s: Equal(%#v, %#v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
		if got := Equal(c.b, c.a); got != c.want {
			t.Errorf("%s: Equal(%#v, %#v) = %v, want %v", c.name, c.b, c.a, got, c.want)
		}
		if got := Key(c.a) == Key(c.b); got != c.want {
			t.Errorf("%s: keys %q and %q: equal %v, want %v", c.name, Key(c.a), Key(c.b), got, c.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	cases := []struct {
		in   any
		want string // canonical JSON
	}{
		{0, "0"},
		{3.0, "3"},
		{3.25, "3.25"},
		{[]byte("abc"), `"abc"`},
		{[]float64{1, 1.5}, "[1,1.5]"},
		{map[string]int{"a": 1}, `{"a":1}`},
	}
	for _, c := range cases {
		n, err := Normalize(c.in)
		if err != nil {
			t.Fatalf("%#v: %v", c.in, err)
		}
		b, err := AppendJSON(nil, n)
		if err != nil || string(b) != c.want {
			t.Errorf("Normalize(%#v) = %s (%v), want %s", c.in, b, err, c.want)
		}
	}
	// A float that is written as one still reads back as one: only Go
	// values a client builds are normalized, never what a history says.
	h, err := Parse("h.jsonl", []byte(`{"index":0,"type":"invoke","process":0,"f":"write","value":3.0}`+"\n"), JSONL)
	if err != nil {
		t.Fatal(err)
	}
	if _, isFloat := h.Events[0].Value.(float64); !isFloat {
		t.Errorf("JSON Lines 3.0 read as %T, want float64", h.Events[0].Value)
	}
}
