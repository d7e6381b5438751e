// Package history is the operation history that every checker in ipfence
// reads: the event type, its canonical JSON Lines codec, readers for the
// formats other tools write (Jepsen/Knossos EDN, elle-cli JSON, Jepsen log
// lines), and the pairing of invocations with their completions.
//
// An operation is two events from one logical process: an invoke and a
// completion. A completion is ok (the operation took effect), fail (it
// certainly did not) or info (unknown: it may take effect at any point after
// its invoke, or never). Events are kept in the order they happened; that
// order, not the time field, is what real-time precedence is taken from.
package history

import (
	"fmt"
	"slices"
	"strconv"
	"unsafe"
)

// Type is an event's type.
type Type uint8

// Event types.
const (
	Invoke Type = iota
	OK
	Fail
	Info
)

var typeNames = [...]string{"invoke", "ok", "fail", "info"}

// String returns the type's name as histories spell it.
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// ParseType reads a type name ("invoke", "ok", "fail", "info").
func ParseType(s string) (Type, bool) {
	for i, n := range typeNames {
		if n == s {
			return Type(i), true
		}
	}
	return 0, false
}

// Process identifies the logical process that issued an event. Client
// processes are non-negative; the fault injector is Nemesis.
type Process int64

const (
	// Nemesis is the process of fault-injection events, which checkers ignore.
	Nemesis Process = -1
	// NoProcess marks an event whose source named no process.
	NoProcess Process = -2
)

// String returns the process number, "nemesis" or "none".
func (p Process) String() string {
	switch p {
	case Nemesis:
		return "nemesis"
	case NoProcess:
		return "none"
	}
	return strconv.FormatInt(int64(p), 10)
}

// Event is one line of a history.
type Event struct {
	// Index is the event's position as its source numbered it; readers number
	// events from 0 in file order when the source does not.
	Index   int64
	Process Process
	Type    Type
	// F is the operation's function, such as "read" or "cas".
	F string
	// Value is the operation's argument on an invoke and its result on an ok.
	Value Value
	// Time is nanoseconds since the start of the test on a monotonic clock;
	// 0 when the source recorded none.
	Time int64
	// Error is what the client reported with a fail or info; nil when none.
	Error Value
	// Node names the node the operation was sent to; empty when unknown.
	Node string
}

// String renders the event briefly, for messages.
func (e Event) String() string {
	return fmt.Sprintf("index %d process %s %s %s %s", e.Index, e.Process, e.Type, e.F, Show(e.Value))
}

// History is a parsed history and the format it was read from.
type History struct {
	Format Format
	Events []Event
	// TornLine, when not 0, is the line of a JSON Lines history's last
	// line, which had no newline and did not parse: a writer that died
	// mid-write (the kernel may stop a write to a file between two pages
	// when the writer is killed). The events before it are kept, and
	// tools warn.
	TornLine int
}

// Op is an invocation paired with its completion.
type Op struct {
	// Index is the invoke event's Index.
	Index   int64
	Process Process
	F       string
	// Type is the completion's type: OK, Fail or Info. An invocation that
	// never completed is Info.
	Type Type
	// Input is the invoke's value; Output the completion's (nil when none).
	Input, Output Value
	// Error is the completion's error, if any.
	Error Value
	// Call and Return are the positions of the invoke and the completion in
	// the event slice; Return is -1 when the history ends before completion.
	Call, Return int
	// Node is the node named by the invoke, if any.
	Node string
}

// Pending reports whether the operation's effect is unknown (info, or never
// completed): it may take effect at any point after its invoke, or never.
func (o Op) Pending() bool { return o.Type == Info }

// PairError reports events that cannot be paired into operations.
type PairError struct {
	Index int64
	Msg   string
}

func (e *PairError) Error() string { return fmt.Sprintf("event index %d: %s", e.Index, e.Msg) }

// Pair matches each client invoke with the next completion from the same
// process. Nemesis events are returned apart, in order. An invoke without a
// completion becomes an Info op that is pending to the end. A process that
// crashed (info) and is then used again keeps its crashed op pending forever:
// nothing after the crash is ordered after it.
func Pair(events []Event) (ops []Op, nemesis []Event, err error) {
	// At most one op per two events but for pending invokes; sized once,
	// as readJSONL sizes the events.
	p := Pairer{Ops: make([]Op, 0, len(events)/2+1)}
	for pos, e := range events {
		if e.Process == Nemesis {
			nemesis = append(nemesis, e)
			continue
		}
		if err := p.Add(pos, e); err != nil {
			return nil, nil, err
		}
	}
	return p.Ops, nemesis, nil
}

// Pairer pairs events into operations as they arrive, as Pair does for a
// whole slice, so that a checker reading a history a line at a time
// keeps its operations and never its events.
type Pairer struct {
	// Ops are the operations so far, in invoke order; an op whose
	// completion has not come yet is Info with Return -1.
	Ops []Op
	// ReturnIndex, when Track is set, holds each op's completion event's
	// Index (-1 while none came): with no events kept, it is how a report
	// names where an op completed.
	ReturnIndex []int64
	Track       bool
	// Bytes estimates the memory Ops hold (the structs, their strings and
	// values), as ParseLimited's bound counts events.
	Bytes int64
	open  map[Process]int // process → index into Ops
}

// Grow makes room for n operations in all (see Decoder.ExpectedEvents):
// appending ten million operations one at a time copied each of them
// about twice more.
func (p *Pairer) Grow(n int) {
	if n > cap(p.Ops) {
		p.Ops = slices.Grow(p.Ops, n-len(p.Ops))
		if p.Track {
			p.ReturnIndex = slices.Grow(p.ReturnIndex, n-len(p.ReturnIndex))
		}
	}
}

// Add pairs the client event e, at position pos of the history (its
// place among every event, nemesis events included, which Add is not
// given).
func (p *Pairer) Add(pos int, e Event) error {
	if p.open == nil {
		p.open = make(map[Process]int)
	}
	if e.Process == NoProcess {
		return &PairError{e.Index, "event has no process, so it cannot be paired with its invoke or completion"}
	}
	if e.Type == Invoke {
		if prev, ok := p.open[e.Process]; ok {
			return &PairError{e.Index, fmt.Sprintf("process %s invokes %q while its %q invoked at index %d has not completed",
				e.Process, e.F, p.Ops[prev].F, p.Ops[prev].Index)}
		}
		p.open[e.Process] = len(p.Ops)
		p.Ops = append(p.Ops, Op{Index: e.Index, Process: e.Process, F: e.F, Type: Info, Input: e.Value, Call: pos, Return: -1, Node: e.Node})
		p.Bytes += int64(unsafe.Sizeof(Op{})) + int64(len(e.F)+len(e.Node)) + valueBytes(e.Value)
		if p.Track {
			p.ReturnIndex = append(p.ReturnIndex, -1)
		}
		return nil
	}
	i, ok := p.open[e.Process]
	if !ok {
		return &PairError{e.Index, fmt.Sprintf("%s completion from process %s has no open invoke", e.Type, e.Process)}
	}
	delete(p.open, e.Process)
	op := &p.Ops[i]
	if e.F != op.F && e.F != "" {
		return &PairError{e.Index, fmt.Sprintf("completion f %q does not match invoke f %q at index %d", e.F, op.F, op.Index)}
	}
	op.Type = e.Type
	op.Output = e.Value
	op.Error = e.Error
	op.Return = pos
	p.Bytes += valueBytes(e.Value) + valueBytes(e.Error)
	if p.Track {
		p.ReturnIndex[i] = e.Index
	}
	return nil
}
