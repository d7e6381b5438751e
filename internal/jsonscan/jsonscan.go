// Package jsonscan reads the common shapes of JSON history lines fast:
// the fast readers of the history and transactional packages read with
// it, and hand every line it cannot read (ErrSlow) to the general JSON
// reader, which says where and why a line is malformed. It is strict
// where it reads (JSON's grammar exactly), so the two readers never
// disagree on a line the fast one accepts.
package jsonscan

import (
	"bytes"
	"errors"
	"strconv"
)

// ErrSlow says a line is not for a fast reader: the general reader,
// which reports exactly where and why a line is malformed, must read it.
var ErrSlow = errors.New("not for the fast reader")

// Scanner reads one line of JSON. What it reads itself it reads as
// strictly as JSON is defined (no control characters in strings, no
// leading zeros), so that only a line in which it skipped a value
// (Skipped) needs checking with json.Valid: that took a seventh of the
// time of a million-transaction check.
type Scanner struct {
	// B is the line; I the position of the next byte to read.
	B []byte
	I int
	// Skipped says Skip passed over a value without checking it.
	Skipped bool
}

// WS passes over blanks.
func (s *Scanner) WS() {
	for s.I < len(s.B) && (s.B[s.I] == ' ' || s.B[s.I] == '\t' || s.B[s.I] == '\r') {
		s.I++
	}
}

// Byte reads c after blanks, if it is next.
func (s *Scanner) Byte(c byte) bool {
	s.WS()
	if s.I < len(s.B) && s.B[s.I] == c {
		s.I++
		return true
	}
	return false
}

// Str reads a string without escapes (ErrSlow for one with escapes).
func (s *Scanner) Str() ([]byte, error) {
	s.WS()
	if s.I >= len(s.B) || s.B[s.I] != '"' {
		return nil, ErrSlow
	}
	j := bytes.IndexByte(s.B[s.I+1:], '"')
	if j < 0 {
		return nil, ErrSlow
	}
	out := s.B[s.I+1 : s.I+1+j]
	for _, c := range out {
		if c == '\\' || c < 0x20 {
			return nil, ErrSlow
		}
	}
	s.I += j + 2
	return out, nil
}

// Int reads an integer (ErrSlow for a fraction, an exponent or one that
// does not fit in 64 bits).
func (s *Scanner) Int() (int64, error) {
	s.WS()
	j := s.I
	if j < len(s.B) && s.B[j] == '-' {
		j++
	}
	for j < len(s.B) && s.B[j] >= '0' && s.B[j] <= '9' {
		j++
	}
	if j < len(s.B) && (s.B[j] == '.' || s.B[j] == 'e' || s.B[j] == 'E') {
		return 0, ErrSlow
	}
	digits := s.B[s.I:j]
	neg := len(digits) > 0 && digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' {
		return 0, ErrSlow
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
		if n, err = strconv.ParseInt(string(s.B[s.I:j]), 10, 64); err != nil {
			return 0, ErrSlow
		}
	}
	s.I = j
	return n, nil
}

// Null reads null, if it is next.
func (s *Scanner) Null() bool {
	s.WS()
	if bytes.HasPrefix(s.B[s.I:], []byte("null")) {
		s.I += 4
		return true
	}
	return false
}

// Skip passes over any JSON value, without checking it.
func (s *Scanner) Skip() error {
	s.Skipped = true
	s.WS()
	if s.I >= len(s.B) {
		return ErrSlow
	}
	switch c := s.B[s.I]; {
	case c == '"':
		s.I++
		for s.I < len(s.B) {
			switch s.B[s.I] {
			case '\\':
				s.I += 2
				continue
			case '"':
				s.I++
				return nil
			}
			s.I++
		}
		return ErrSlow
	case c == '{' || c == '[':
		depth := 0
		for s.I < len(s.B) {
			switch s.B[s.I] {
			case '"':
				if err := s.Skip(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.I++
					return nil
				}
			}
			s.I++
		}
		return ErrSlow
	default:
		for s.I < len(s.B) && s.B[s.I] != ',' && s.B[s.I] != '}' && s.B[s.I] != ']' {
			s.I++
		}
		return nil
	}
}

// SkipUntilEnd gives up on the rest of the line.
func (s *Scanner) SkipUntilEnd() error { s.I = len(s.B); return nil }
