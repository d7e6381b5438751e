package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
)

// Format names a history file format.
type Format string

// The formats ipfence reads.
const (
	// JSONL is ipfence's canonical format: one JSON object per line.
	JSONL Format = "jsonl"
	// EDN is Jepsen/Knossos history.edn: maps one per line, or inside one
	// vector or list.
	EDN Format = "edn"
	// JSON is a JSON array of event objects, as elle-cli writes.
	JSON Format = "json"
	// JepsenLog is the Jepsen log lines in Porcupine's test data:
	// "INFO  jepsen.util - <process> :<type> :<f> <value>".
	JepsenLog Format = "jepsen-log"
)

// Formats lists every format name, for messages and flag help.
var Formats = []Format{JSONL, EDN, JSON, JepsenLog}

// ParseFormat checks a format name given by a user.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown format %q; valid formats: %s", s, formatList())
}

func formatList() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// InputError reports bad input at a place in a file.
type InputError struct {
	File      string
	Line, Col int // 1-based; 0 when the error has no single place
	Msg       string
}

func (e *InputError) Error() string {
	name := e.File
	if name == "" {
		name = "<input>"
	}
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", name, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", name, e.Line, e.Col, e.Msg)
}

// ReadFile reads and parses a history file. An empty format means detect it
// from the content.
func ReadFile(name string, format Format) (*History, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return Parse(name, data, format)
}

// Parse parses a history held in memory; name is used in error messages. An
// empty format means detect it from the content.
func Parse(name string, data []byte, format Format) (*History, error) {
	h, _, err := ParseLimited(name, data, format, 0)
	return h, err
}

// ParseLimited is Parse with a bound on the memory the parsed events take
// (an estimate, in bytes; 0 means none): a history beyond it is refused
// with a *LimitError naming the line reached, as soon as the reader gets
// there. It also returns the estimate. An EDN history written as one
// vector is parsed whole before its events are read, which takes about
// ednVectorFactor times its size: such a history larger than the bound
// allows is refused before it is parsed.
func ParseLimited(name string, data []byte, format Format, maxParsed int64) (*History, int64, error) {
	m := &meter{max: maxParsed}
	h, err := parse(name, data, format, m)
	return h, m.used, err
}

func parse(name string, data []byte, format Format, m *meter) (*History, error) {
	if format == "" {
		f, err := Detect(data)
		if err != nil {
			return nil, &InputError{File: name, Msg: err.Error()}
		}
		format = f
	}
	var events []Event
	var err error
	torn := 0
	switch format {
	case JSONL:
		events, torn, err = readJSONL(data, m)
	case JSON:
		err = readJSONArray(data, m, func(e Event) bool { events = append(events, e); return true })
		if err != nil {
			events = nil
		}
	case EDN:
		events, err = readEDN(data, m)
	case JepsenLog:
		events, err = readJepsenLog(data, m)
	default:
		return nil, &InputError{File: name, Msg: fmt.Sprintf("unknown format %q; valid formats: %s", format, formatList())}
	}
	if err == nil && len(events) == 0 {
		// An empty history proves nothing; a run that recorded nothing is
		// more likely broken than correct.
		err = &InputError{Msg: "the history holds no events; nothing to check"}
	}
	if err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			le.File = name
			return nil, le
		}
		var ie *InputError
		if errors.As(err, &ie) {
			ie.File = name
			return nil, ie
		}
		return nil, &InputError{File: name, Msg: err.Error()}
	}
	return &History{Format: format, Events: events, TornLine: torn}, nil
}

// Detect guesses a history's format from its first meaningful characters:
// a Jepsen log line, a JSON object or array, or EDN. It never guesses past
// ambiguity: content that fits none of them is an error.
func Detect(data []byte) (Format, error) {
	if !utf8.Valid(data) {
		return "", errors.New("file is not UTF-8 text")
	}
	s := skipSpaceAndEDNComments(data)
	if len(s) == 0 {
		return "", errors.New("file holds no events (it is empty or only comments); nothing to check")
	}
	if jepsenLogLine(firstLine(s)) {
		return JepsenLog, nil
	}
	switch s[0] {
	case '{':
		if next := nextNonSpace(s[1:]); next == '"' || next == '}' {
			return JSONL, nil
		}
		return EDN, nil
	case '[':
		rest := skipSpaceAndEDNComments(s[1:])
		if len(rest) > 0 && rest[0] == '{' {
			if next := nextNonSpace(rest[1:]); next == '"' || next == '}' {
				return JSON, nil
			}
		}
		if len(rest) > 0 && rest[0] == ']' {
			return JSON, nil
		}
		return EDN, nil
	case '(', '#':
		return EDN, nil
	}
	// Jepsen logs hold other lines too; look further for an event line.
	for _, line := range bytes.Split(data, []byte("\n")) {
		if jepsenLogLine(string(line)) {
			return JepsenLog, nil
		}
	}
	line := firstLine(s)
	if len(line) > 40 {
		line = line[:40] + "..."
	}
	return "", fmt.Errorf("cannot tell the format from %q; expected JSON Lines, a JSON array, EDN or Jepsen log lines (force one with --format)", line)
}

func firstLine(s []byte) string {
	if i := bytes.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return string(bytes.TrimRight(s, "\r"))
}

func nextNonSpace(s []byte) byte {
	for _, c := range s {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// skipSpaceAndEDNComments drops leading whitespace, commas and ; comments.
func skipSpaceAndEDNComments(s []byte) []byte {
	for len(s) > 0 {
		switch s[0] {
		case ' ', '\t', '\r', '\n', ',':
			s = s[1:]
		case ';':
			i := bytes.IndexByte(s, '\n')
			if i < 0 {
				return nil
			}
			s = s[i+1:]
		default:
			return s
		}
	}
	return s
}

// lineIndex maps byte offsets to 1-based lines and rune columns.
type lineIndex struct {
	data   []byte
	starts []int
}

func newLineIndex(data []byte) *lineIndex {
	starts := []int{0}
	for i, c := range data {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return &lineIndex{data, starts}
}

func (l *lineIndex) pos(off int) (line, col int) {
	off = max(0, min(off, len(l.data)))
	lo, hi := 0, len(l.starts)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if l.starts[mid] <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo + 1, utf8.RuneCount(l.data[l.starts[lo]:off]) + 1
}

// jepsenLogLine reports whether a line looks like a Jepsen op log line.
func jepsenLogLine(line string) bool {
	i := strings.Index(line, "jepsen.util - ")
	if i < 0 {
		return false
	}
	rest := line[i+len("jepsen.util - "):]
	return len(rest) > 0 && (rest[0] >= '0' && rest[0] <= '9' || strings.HasPrefix(rest, ":nemesis"))
}
