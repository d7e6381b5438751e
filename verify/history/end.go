package history

import "bytes"

// EndMarker is the line a history writer appends to a JSON Lines history
// when the test that wrote it has completed: a reader following the file
// as it grows (Follow) knows from it that no event will come, rather than
// waiting for the file to stop growing. Readers of a finished file skip
// it.
const EndMarker = `{"end":true}`

// IsEndMarker says whether a JSON Lines line (without its newline) is the
// end marker, spaces around it and inside it aside.
func IsEndMarker(line []byte) bool {
	line = bytes.TrimSpace(line)
	if len(line) < len(EndMarker) || line[0] != '{' {
		return false
	}
	// Compare with the spaces JSON allows removed: the marker has no
	// strings holding spaces.
	var b [len(EndMarker)]byte
	n := 0
	for _, c := range line {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		if n == len(b) {
			return false
		}
		b[n] = c
		n++
	}
	return n == len(b) && string(b[:]) == EndMarker
}
