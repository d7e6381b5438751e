package isolation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/ipfence/ipfence/verify/history"
)

// CheckReader checks a history as it reads it from r, in format (detected
// when empty), within lim: each event goes into the compact form of the
// transactions as it arrives, so that neither the input nor its parsed
// events are held, only the transactions. See CheckDecoder.
func CheckReader(ctx context.Context, name string, r io.Reader, format history.Format, lim history.Limits, o Options) (*Result, error) {
	d := history.NewDecoder(ctx, name, r, format, lim)
	defer d.Close()
	return CheckDecoder(ctx, d, o)
}

// CheckDecoder checks the history d reads, as CheckReader does. JSON
// Lines lines of the usual shape (integer or plain string keys, integer
// values) are read by a reader made for them (it sets d.Lines); any
// other line, and every other format, by the general one, which says
// exactly where and why it cannot read a line. A torn last JSON Lines
// line is left out; d.TornLine names it afterwards.
func CheckDecoder(ctx context.Context, d *history.Decoder, o Options) (*Result, error) {
	start := time.Now()
	if err := o.defaults(); err != nil {
		return nil, err
	}
	p, err := read(d, o.Workload)
	if err != nil {
		return nil, err
	}
	return p.check(ctx, o, start), nil
}

// read reads the history d decodes into its transactions.
func read(d *history.Decoder, workload string) (*parsed, error) {
	b := newBuilder(workload)
	b.expect = d.ExpectedEvents
	d.Lines = func(line []byte, _ int) bool { return b.fastLine(line) }
	if readInParallel {
		d.ParallelLines(fastReader{b})
	}
	for {
		e, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := b.event(&e); err != nil {
			return nil, err
		}
	}
	return b.finish(), nil
}

// readInParallel lets JSON Lines be read on the Decoder's workers (the
// benchmarks turn it off to measure the serial reader beside it).
var readInParallel = true

// builder turns events, one at a time, into a history's transactions: it
// numbers the events that name no process, pairs invokes with
// completions, and reads micro-operations, as Check's numberProcesses,
// history.Pair and parse do for a history held whole, with the same
// errors.
type builder struct {
	p *parsed
	// open holds each process's open transaction; free the buffers of
	// completed ones, for the next invokes.
	open procs
	free [][]rawMop
	pos  int32 // the next event's position
	mops []mop
	// Processes for events that name none: the next number, and the
	// open invokes' numbers, oldest first.
	anonNext history.Process
	anonOpen []history.Process
	// scratch is the serial fast reader's, done an ok completion's
	// micro-operations as read.
	scratch preBatch
	done    []rawMop
	// expect estimates the input's events (Decoder.ExpectedEvents).
	expect func() int64
}

// presizeAfter is how many transactions the builder reads before it
// sizes its transactions for the whole input.
const presizeAfter = 10_000

// openTxn is a process's open transaction: its number, and what its
// invoke said.
type openTxn struct {
	t    int32
	f    string
	mops []rawMop
}

// procs holds the processes' open transactions: those of the small
// process numbers a test uses in a slice, looked up on every event; any
// others in a map.
type procs struct {
	small []openTxn // by process number; t < 0 for none
	big   map[history.Process]*openTxn
}

// smallProcs bounds the process numbers procs keeps in its slice.
const smallProcs = 1 << 16

// get returns pr's open transaction, or nil.
func (ps *procs) get(pr history.Process) *openTxn {
	if pr >= 0 && pr < smallProcs {
		if int(pr) < len(ps.small) && ps.small[pr].t >= 0 {
			return &ps.small[pr]
		}
		return nil
	}
	return ps.big[pr]
}

// put opens o for pr.
func (ps *procs) put(pr history.Process, o openTxn) {
	if pr >= 0 && pr < smallProcs {
		for int(pr) >= len(ps.small) {
			ps.small = append(ps.small, openTxn{t: -1})
		}
		ps.small[pr] = o
		return
	}
	if ps.big == nil {
		ps.big = map[history.Process]*openTxn{}
	}
	ps.big[pr] = &o
}

// remove closes pr's open transaction.
func (ps *procs) remove(pr history.Process) {
	if pr >= 0 && pr < smallProcs {
		ps.small[pr] = openTxn{t: -1}
		return
	}
	delete(ps.big, pr)
}

// each calls f with every open transaction.
func (ps *procs) each(f func(*openTxn)) {
	for i := range ps.small {
		if ps.small[i].t >= 0 {
			f(&ps.small[i])
		}
	}
	for _, o := range ps.big {
		f(o)
	}
}

func newBuilder(workload string) *builder {
	p := &parsed{workload: workload, in: newInterner()}
	p.value = p.render
	return &builder{p: p, anonNext: anonymousBase}
}

// fastLine reads one JSON Lines line by the fast reader, on the
// Decoder's goroutine (the serial Decoder's Lines). It returns false, with
// nothing changed, when the line is for the general reader.
func (b *builder) fastLine(line []byte) bool {
	pb := &b.scratch
	pb.mops, pb.elems = pb.mops[:0], pb.elems[:0]
	var ev preEvent
	return pb.read(b.p.workload, line, &ev) && b.take(pb, &ev)
}

// take builds what the fast reader read of one event (ev, read into pb)
// into the transactions. It returns false, with nothing changed, when the
// event is for the general reader.
func (b *builder) take(pb *preBatch, ev *preEvent) bool {
	p := b.p
	if !ev.hasIndex {
		ev.index = int64(b.pos)
	}
	if ev.nemesis {
		b.pos++
		return true
	}
	f := ""
	if ev.f {
		f = "txn"
	}
	if ev.typ == history.Invoke {
		if b.open.get(ev.process) != nil {
			return false
		}
		b.invoke(ev.process, f, ev.index, b.intern(pb, ev.mops, b.buffer()))
		return true
	}
	o := b.open.get(ev.process)
	if o == nil || (f != "" && f != o.f) {
		return false
	}
	t := o.t
	var done []rawMop
	if ev.typ == history.OK {
		src := o.mops
		if len(ev.mops) != len(src) {
			return false
		}
		nreads := len(p.reads)
		b.done = b.intern(pb, ev.mops, b.done[:0])
		for j, r := range b.done {
			if r.f != mRead && src[j] != r || r.f == mRead && (src[j].f != mRead || src[j].key != r.key) {
				p.reads = p.reads[:nreads]
				return false
			}
		}
		done = b.done
	}
	b.complete(t, ev.typ, ev.index, done)
	return true
}

// intern appends the micro-operations ms (read into pb) to out, their keys
// interned and their list reads' elements kept in the reads arena.
func (b *builder) intern(pb *preBatch, ms []preMop, out []rawMop) []rawMop {
	p := b.p
	for i := range ms {
		m := &ms[i]
		r := rawMop{f: m.f, val: m.val, null: m.null}
		if m.strKey {
			r.key = p.in.key(string(m.keyStr))
		} else {
			r.key = p.in.intKey(m.key)
		}
		if m.f == mRead && !m.null && p.workload == ListAppend {
			r.start = int32(len(p.reads))
			p.reads = append(p.reads, pb.elems[m.start:m.start+m.n]...)
			r.n = m.n
			r.start = p.keepRead(r.key, r.start)
		}
		out = append(out, r)
	}
	return out
}

// buffer returns an empty buffer for an invoke's micro-operations.
func (b *builder) buffer() []rawMop {
	if n := len(b.free); n > 0 {
		buf := b.free[n-1]
		b.free = b.free[:n-1]
		return buf
	}
	return nil
}

// invoke opens a transaction.
func (b *builder) invoke(pr history.Process, f string, index int64, mops []rawMop) {
	t := int32(len(b.p.txns))
	if t == presizeAfter && b.expect != nil {
		// Sized for the whole input, estimated from what the first
		// transactions took: a slice grown by doubling is copied over
		// and over, and with a million transactions the copies took a
		// tenth of the reading.
		if n := b.expect() / 2; n > int64(cap(b.p.txns)) && n < math.MaxInt32 {
			b.p.txns = slices.Grow(b.p.txns, int(n)-len(b.p.txns))
		}
	}
	b.open.put(pr, openTxn{t: t, f: f, mops: mops})
	b.p.txns = append(b.p.txns, txn{index: index, invoke: index, process: pr, typ: history.Info, call: b.pos, ret: -1})
	b.pos++
}

// complete closes transaction t; done holds an ok completion's
// micro-operations, with what the reads returned.
func (b *builder) complete(t int32, typ history.Type, index int64, done []rawMop) {
	tx := &b.p.txns[t]
	src := b.open.get(tx.process).mops
	b.open.remove(tx.process)
	tx.typ, tx.ret, tx.index = typ, b.pos, index
	b.reserve(len(src))
	start := len(b.mops)
	for j, r := range src {
		m := mop{kind: r.f, key: r.key, val: r.val}
		if typ == history.OK && r.f == mRead {
			d := done[j]
			m.known, m.null, m.start, m.n = true, d.null, d.start, d.n
			if b.p.workload == RWRegister {
				m.val = d.val
				if d.null {
					m.val = nilVal
				}
			}
		}
		b.mops = append(b.mops, m)
	}
	tx.mops = b.mops[start:len(b.mops):len(b.mops)]
	b.free = append(b.free, src[:0])
	b.pos++
}

// reserve makes room for n more micro-operations. They are kept in
// blocks that are never copied, as one slice grown by append would be,
// over and over, and held twice while it grows.
func (b *builder) reserve(n int) {
	if cap(b.mops)-len(b.mops) < n {
		b.mops = make([]mop, 0, max(n, 1<<16))
	}
}

// finish closes the transactions never completed (indeterminate, with
// the invoke's micro-operations) and returns the history's transactions.
func (b *builder) finish() *parsed {
	b.open.each(func(o *openTxn) {
		b.reserve(len(o.mops))
		start := len(b.mops)
		for _, r := range o.mops {
			b.mops = append(b.mops, mop{kind: r.f, key: r.key, val: r.val})
		}
		b.p.txns[o.t].mops = b.mops[start:len(b.mops):len(b.mops)]
	})
	b.open = procs{}
	return b.p
}

// event takes one event of the general reader.
func (b *builder) event(e *history.Event) error {
	pr := e.Process
	if pr == history.NoProcess {
		// As numberProcesses: an invoke gets a new process, a completion
		// the oldest open invoke's.
		if e.Type == history.Invoke {
			pr = b.anonNext
			b.anonNext++
			b.anonOpen = append(b.anonOpen, pr)
		} else if len(b.anonOpen) > 0 {
			pr = b.anonOpen[0]
			b.anonOpen = b.anonOpen[1:]
		}
	}
	switch {
	case pr == history.Nemesis:
		b.pos++
		return nil
	case pr == history.NoProcess:
		return &history.PairError{Index: e.Index, Msg: "event has no process, so it cannot be paired with its invoke or completion"}
	}
	if e.Type == history.Invoke {
		if prev := b.open.get(pr); prev != nil {
			return &history.PairError{Index: e.Index, Msg: fmt.Sprintf("process %s invokes %q while its %q invoked at index %d has not completed",
				pr, e.F, prev.f, b.p.txns[prev.t].invoke)}
		}
		mops, err := b.invokeMops(e)
		if err != nil {
			return err
		}
		b.invoke(pr, e.F, e.Index, mops)
		return nil
	}
	o := b.open.get(pr)
	if o == nil {
		return &history.PairError{Index: e.Index, Msg: fmt.Sprintf("%s completion from process %s has no open invoke", e.Type, pr)}
	}
	t := o.t
	if e.F != o.f && e.F != "" {
		return &history.PairError{Index: e.Index, Msg: fmt.Sprintf("completion f %q does not match invoke f %q at index %d", e.F, o.f, b.p.txns[t].invoke)}
	}
	var done []rawMop
	if e.Type == history.OK {
		var err error
		if done, err = b.okMops(t, e); err != nil {
			return err
		}
	}
	b.complete(t, e.Type, e.Index, done)
	return nil
}

// invokeMops reads an invoke's micro-operations (parse and mop's checks).
func (b *builder) invokeMops(e *history.Event) ([]rawMop, error) {
	p := b.p
	if e.F != "txn" && e.F != "" {
		return nil, &InputError{e.Index, fmt.Sprintf("operation %q is not a transaction (f must be txn)", e.F)}
	}
	in, ok := e.Value.([]history.Value)
	if !ok {
		return nil, &InputError{e.Index, fmt.Sprintf("a transaction's value must be a list of micro-operations, found %s", history.Show(e.Value))}
	}
	out := b.buffer()
	for j, raw := range in {
		l, ok := raw.([]history.Value)
		if !ok || len(l) != 3 {
			return nil, &InputError{e.Index, fmt.Sprintf("micro-operation %d must be [f key value], found %s", j, history.Show(raw))}
		}
		f, _ := l[0].(string)
		r := rawMop{key: p.in.key(l[1])}
		switch {
		case f == "append" && p.workload == ListAppend:
			r.f, r.val = mAppend, p.in.val(l[2])
		case f == "w" && p.workload == RWRegister:
			r.f, r.val = mWrite, p.in.val(l[2])
		case f == "r":
			r.f, r.null = mRead, true
		default:
			valid := "append, r"
			if p.workload == RWRegister {
				valid = "w, r"
			}
			return nil, &InputError{e.Index, fmt.Sprintf("micro-operation %d has f %q; %s takes %s", j, history.Show(l[0]), p.workload, valid)}
		}
		out = append(out, r)
	}
	return out, nil
}

// okMops reads an ok completion's micro-operations against its invoke's.
func (b *builder) okMops(t int32, e *history.Event) ([]rawMop, error) {
	p := b.p
	inv := b.open.get(p.txns[t].process).mops
	index := p.txns[t].invoke
	out, ok := e.Value.([]history.Value)
	if !ok || len(out) != len(inv) {
		return nil, &InputError{index, fmt.Sprintf("the completion's value must list the same %d micro-operations, found %s", len(inv), history.Show(e.Value))}
	}
	done := make([]rawMop, len(inv))
	for j, r := range inv {
		if r.f != mRead {
			if raw := p.renderMop(r.f, r.key, r.val, false, nil); history.Key(out[j]) != history.Key(raw) {
				// A completion reports what ran; a write that changed on
				// the way is a malformed history, not something to pick
				// a side of.
				return nil, &InputError{index, fmt.Sprintf("completed micro-operation %d is %s, but %s was invoked", j, history.Show(out[j]), history.Show(raw))}
			}
			done[j] = r
			continue
		}
		key := p.in.keyNames[r.key]
		rl, ok := out[j].([]history.Value)
		if !ok || len(rl) != 3 {
			return nil, &InputError{index, fmt.Sprintf("completed micro-operation %d must be [f key value], found %s", j, history.Show(out[j]))}
		}
		if f2, _ := rl[0].(string); f2 != "r" || history.Key(rl[1]) != history.Key(key) {
			return nil, &InputError{index, fmt.Sprintf("completed micro-operation %d is %s, not the read of key %s that was invoked", j, history.Show(out[j]), history.Show(key))}
		}
		d := rawMop{f: mRead, key: r.key}
		switch v := rl[2].(type) {
		case nil:
			d.null = true
		case []history.Value:
			if p.workload == RWRegister {
				d.val = p.in.val(v)
				break
			}
			d.start = int32(len(p.reads))
			for _, x := range v {
				p.reads = append(p.reads, p.in.val(x))
			}
			d.n = int32(len(v))
			d.start = p.keepRead(r.key, d.start)
		default:
			if p.workload == ListAppend {
				return nil, &InputError{index, fmt.Sprintf("micro-operation %d reads key %s as %s; a list-append read returns a list", j, history.Show(key), history.Show(rl[2]))}
			}
			d.val = p.in.val(v)
		}
		done[j] = d
	}
	return done, nil
}

// render gives transaction t's value as the history had it (the
// completion's when it completed ok, else the invoke's), from the
// compact form: reports need it for the few transactions they name, and
// the input is no longer at hand.
func (p *parsed) render(t int32) history.Value {
	tx := &p.txns[t]
	out := make([]history.Value, len(tx.mops))
	for i := range tx.mops {
		m := &tx.mops[i]
		var list []int64
		if m.kind == mRead && m.known && !m.null && p.workload == ListAppend {
			list = p.list(m)
		}
		out[i] = p.renderMop(m.kind, m.key, m.val, m.known && !m.null, list)
	}
	return out
}

// renderMop gives one micro-operation as the history had it; a read's
// value is nil unless it is known.
func (p *parsed) renderMop(kind mopKind, key int32, val int64, known bool, list []int64) history.Value {
	k := p.in.keyNames[key]
	switch kind {
	case mAppend:
		return []history.Value{"append", k, p.in.value(val)}
	case mWrite:
		return []history.Value{"w", k, p.in.value(val)}
	}
	if !known {
		return []history.Value{"r", k, nil}
	}
	if p.workload == RWRegister {
		return []history.Value{"r", k, p.in.value(val)}
	}
	vs := make([]history.Value, len(list))
	for i, v := range list {
		vs[i] = p.in.value(v)
	}
	return []history.Value{"r", k, vs}
}
