package vrrp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// State is a VRRP instance's state as keepalived reports it. Only Master
// grants capture authority; every other state, Unknown included, means
// release.
type State int

// The states. Unknown is the zero value: a Watcher starts there and returns
// there when keepalived goes away, so that a member that does not know its
// state never captures.
const (
	Unknown State = iota
	Master
	Backup
	Fault
	Stop
)

// String returns the state's name as keepalived writes it ("MASTER", ...),
// or "UNKNOWN".
func (s State) String() string {
	switch s {
	case Master:
		return "MASTER"
	case Backup:
		return "BACKUP"
	case Fault:
		return "FAULT"
	case Stop:
		return "STOP"
	case Unknown:
		return "UNKNOWN"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Event is one line of keepalived's notify FIFO, such as
//
//	INSTANCE "VI_1" MASTER 100
//	GROUP "G1" BACKUP 0
//
// It is also what a Watcher sends when the instance's state changes; the
// Watcher's own Unknown event, sent when keepalived closes the FIFO, has an
// empty Line.
type Event struct {
	// Group is set for a GROUP line, which reports a vrrp_sync_group;
	// Instance then holds the group's name.
	Group bool
	// Instance is the vrrp_instance's (or sync group's) name, without
	// the quotes.
	Instance string
	// State is the state the line implies. Besides the four transitions
	// keepalived writes MASTER_RX_LOWER_PRI and MASTER_PRIORITY (the
	// instance is and stays Master), BACKUP_PRIORITY (it is and stays
	// Backup) and DELETED (the instance was removed by a reload: no longer
	// running, so Stop).
	State State
	// Word is the state word exactly as written, so that a consumer can
	// tell MASTER_RX_LOWER_PRI (a lower-priority router was master too,
	// after a partition healed: time to announce the address again) from
	// a plain MASTER.
	Word string
	// Priority is the priority keepalived reported: the instance's
	// current priority, 0 for a group.
	Priority int
	// Line is the line as read, without its line ending.
	Line string
}

// words maps each state word keepalived writes to the state it implies.
var words = map[string]State{
	"MASTER":              Master,
	"BACKUP":              Backup,
	"FAULT":               Fault,
	"STOP":                Stop,
	"DELETED":             Stop,
	"MASTER_RX_LOWER_PRI": Master,
	"MASTER_PRIORITY":     Master,
	"BACKUP_PRIORITY":     Backup,
}

// ParseLine parses one notify FIFO line: INSTANCE or GROUP, the quoted
// name, the state word and the priority (0 to 255), separated by single
// spaces. A trailing "\n" or "\r\n" is allowed. Errors quote the line and
// say which part is wrong.
func ParseLine(line string) (Event, error) {
	raw := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	e := Event{Line: raw}
	fail := func(format string, args ...any) (Event, error) {
		return Event{}, fmt.Errorf("vrrp: notify line %q: %s", raw, fmt.Sprintf(format, args...))
	}
	kind, rest, ok := strings.Cut(raw, " ")
	if !ok {
		return fail("want INSTANCE or GROUP, a quoted name, a state and a priority")
	}
	switch kind {
	case "INSTANCE":
	case "GROUP":
		e.Group = true
	default:
		return fail("type %q: want INSTANCE or GROUP", kind)
	}
	// keepalived writes the name between double quotes without escaping;
	// configuration names cannot hold a quote, so the name ends at the
	// next one.
	if !strings.HasPrefix(rest, `"`) {
		return fail("name: want a double-quoted name after %s", kind)
	}
	name, rest, ok := strings.Cut(rest[1:], `"`)
	if !ok {
		return fail("name: no closing double quote")
	}
	if name == "" {
		return fail("name: empty")
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] > '~' {
			return fail("name %q: want printable ASCII without spaces, as in keepalived.conf", name)
		}
	}
	e.Instance = name
	rest, ok = strings.CutPrefix(rest, " ")
	if !ok {
		return fail("want a space after the name")
	}
	word, prio, ok := strings.Cut(rest, " ")
	if !ok {
		return fail("want a state and a priority after the name")
	}
	state, ok := words[word]
	if !ok {
		return fail("state %q: want MASTER, BACKUP, FAULT, STOP, DELETED, MASTER_RX_LOWER_PRI, MASTER_PRIORITY or BACKUP_PRIORITY", word)
	}
	e.State, e.Word = state, word
	p, err := parsePriority(prio)
	if err != nil {
		return fail("priority: %v", err)
	}
	e.Priority = p
	return e, nil
}

// parsePriority accepts the decimal numbers 0 to 255 as keepalived prints
// them: digits only, no sign, no leading zeros.
func parsePriority(s string) (int, error) {
	if s == "" {
		return 0, errors.New("missing")
	}
	if len(s) > 3 || strings.TrimLeft(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q: want a decimal number from 0 to 255", s)
	}
	p, err := strconv.Atoi(s)
	if err != nil || p > 255 {
		return 0, fmt.Errorf("%q: want a decimal number from 0 to 255", s)
	}
	return p, nil
}
