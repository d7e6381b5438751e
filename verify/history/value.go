package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/ipfence/ipfence/verify/edn"
)

// Value is an operation's argument or result. It is always one of: nil, bool,
// int64, float64, string, []Value or map[string]Value. Readers produce only
// these; EDN keywords and symbols become strings without the colon, lists and
// sets become []Value, and map keys become strings.
type Value = any

// Normalize converts Go values a client may build (int, []int, map[string]int,
// []byte, ...) into the Value forms, so that a written history reads back
// equal and values compare by meaning: every integer type becomes int64, a
// float64 that holds an integer (what encoding/json gives for 3) becomes
// int64 too, and a []byte of UTF-8 text becomes a string (encoding/json
// would make it base64, which no read of the same text equals).
func Normalize(v any) (Value, error) {
	switch x := v.(type) {
	case nil, bool, int64, string:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("value %v is not a finite number", x)
		}
		if n, ok := integral(x); ok {
			return n, nil
		}
		return x, nil
	case []byte:
		if utf8.Valid(x) {
			return string(x), nil
		}
	case float32:
		return Normalize(float64(x))
	case json.Number:
		return numberValue(string(x))
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return nil, fmt.Errorf("value %d does not fit in int64", x)
		}
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("value %d does not fit in int64", x)
		}
		return int64(x), nil
	case []Value:
		out := make([]Value, len(x))
		for i, e := range x {
			n, err := Normalize(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]Value:
		out := make(map[string]Value, len(x))
		for k, e := range x {
			n, err := Normalize(e)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	}
	// Other slices and maps go through JSON, which keeps their shape.
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("value of type %T: %w", v, err)
	}
	return decodeJSONValue(b)
}

// integral returns x as an int64 when it holds an integer that int64 holds.
func integral(x float64) (int64, bool) {
	if x != math.Trunc(x) || x < -(1<<63) || x >= 1<<63 {
		return 0, false
	}
	return int64(x), true
}

// canonical reports whether v is already in the Value forms, all the way
// down, with no float64 that holds an integer: what Normalize would return
// unchanged.
func canonical(v Value) bool {
	switch x := v.(type) {
	case nil, bool, int64, string:
		return true
	case float64:
		_, isInt := integral(x)
		return !isInt
	case []Value:
		for _, e := range x {
			if !canonical(e) {
				return false
			}
		}
		return true
	case map[string]Value:
		for _, e := range x {
			if !canonical(e) {
				return false
			}
		}
		return true
	}
	return false
}

// normal returns v normalized, or v itself when it cannot be.
func normal(v Value) Value {
	if canonical(v) {
		return v
	}
	if n, err := Normalize(v); err == nil {
		return n
	}
	return v
}

// Equal reports whether two values are the same by meaning: values a user
// builds in Go (an int 0, a []int) are normalized first, so an int 0 equals
// the int64 0 a read returns, and a float64 that holds an integer equals
// that integer. Other floats equal only floats.
func Equal(a, b Value) bool {
	a, b = normal(a), normal(b)
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool, int64, float64, string:
		return a == b
	case []Value:
		y, ok := b.([]Value)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]Value:
		y, ok := b.(map[string]Value)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !Equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// AppendJSON appends the canonical JSON encoding of v: map keys sorted, floats
// always written with a fraction or exponent so they read back as floats.
func AppendJSON(dst []byte, v Value) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("value %v is not a finite number", x)
		}
		start := len(dst)
		dst = strconv.AppendFloat(dst, x, 'g', -1, 64)
		if !bytes.ContainsAny(dst[start:], ".eE") {
			dst = append(dst, ".0"...)
		}
		return dst, nil
	case string:
		return appendJSONString(dst, x), nil
	case []Value:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = AppendJSON(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]Value:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = AppendJSON(dst, x[k]); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, fmt.Errorf("value of type %T is not a history value (normalize it first)", v)
}

const hexDigits = "0123456789abcdef"

func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// Key returns a canonical string for v: equal values (by Equal) have equal
// keys.
func Key(v Value) string {
	v = normal(v)
	switch x := v.(type) {
	case string:
		// The common case; distinct from every other encoding, which never
		// starts with 's'.
		return "s" + x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	b, err := AppendJSON(nil, v)
	if err != nil {
		return fmt.Sprintf("!%T", v)
	}
	return string(b)
}

// Show renders v compactly for messages and reports, in EDN-like syntax:
// nil, 3, "s", [1 2], {"k" 1}.
func Show(v Value) string {
	return string(appendFormat(nil, v))
}

func appendFormat(dst []byte, v Value) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "nil"...)
	case []Value:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ' ')
			}
			dst = appendFormat(dst, e)
		}
		return append(dst, ']')
	case map[string]Value:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = strconv.AppendQuote(dst, k)
			dst = append(dst, ' ')
			dst = appendFormat(dst, x[k])
		}
		return append(dst, '}')
	case string:
		return strconv.AppendQuote(dst, x)
	}
	b, err := AppendJSON(dst, v)
	if err != nil {
		return fmt.Appendf(dst, "%v", v)
	}
	return b
}

// decodeJSONValue parses one JSON value into a Value.
func decodeJSONValue(b []byte) (Value, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var raw any
	if err := d.Decode(&raw); err != nil {
		return nil, err
	}
	return Normalize(raw)
}

// numberValue reads a JSON number: int64 when it is an integer literal that
// fits, float64 when it has a fraction or exponent.
func numberValue(s string) (Value, error) {
	if !bytes.ContainsAny([]byte(s), ".eE") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("integer %s does not fit in 64 bits", s)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("number %s is out of range", s)
	}
	return f, nil
}

// ParseValue reads a value written as an EDN or JSON literal, as a user
// types it on a command line: 0, nil, null, "x", :k, [1 2].
func ParseValue(s string) (Value, error) {
	if s == "null" {
		return nil, nil
	}
	forms, err := edn.ParseAll([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("value %q: %w", s, err)
	}
	if len(forms) != 1 {
		return nil, fmt.Errorf("value %q: expected one value, found %d", s, len(forms))
	}
	v, err := ednValue(&forms[0])
	if err != nil {
		return nil, fmt.Errorf("value %q: %w", s, err)
	}
	return v, nil
}
