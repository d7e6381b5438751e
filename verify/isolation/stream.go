package isolation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ipfence/ipfence/internal/jsonscan"
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
	b := newBuilder(o.Workload)
	d.Lines = func(line []byte, _ int) bool { return b.fastLine(line) }
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
	return b.finish().check(ctx, o, start), nil
}

// builder turns events, one at a time, into a history's transactions: it
// numbers the events that name no process, pairs invokes with
// completions, and reads micro-operations, as Check's numberProcesses,
// history.Pair and parse do for a history held whole, with the same
// errors.
type builder struct {
	p    *parsed
	open map[history.Process]int32 // process → its open transaction
	// pending holds what an open transaction's invoke said; free the
	// buffers of completed ones, for the next invokes.
	pending map[int32]pendingTxn
	free    [][]rawMop
	pos     int32 // the next event's position
	mops    []mop
	// Processes for events that name none: the next number, and the
	// open invokes' numbers, oldest first.
	anonNext history.Process
	anonOpen []history.Process
	ev       fastEvent
}

// pendingTxn is an open transaction's invoke.
type pendingTxn struct {
	f    string
	mops []rawMop
}

func newBuilder(workload string) *builder {
	p := &parsed{workload: workload, in: newInterner()}
	p.value = p.render
	return &builder{p: p, open: map[history.Process]int32{}, pending: map[int32]pendingTxn{}, anonNext: anonymousBase}
}

// fastLine reads one JSON Lines line by the fast reader. It returns
// false, with nothing changed, when the line is for the general reader.
func (b *builder) fastLine(line []byte) bool {
	p := b.p
	nreads := len(p.reads)
	ev := &b.ev
	*ev = fastEvent{index: int64(b.pos), process: history.NoProcess, mops: ev.mops[:0]}
	sc := jsonscan.Scanner{B: line}
	// A value skipped unchecked must be valid JSON, or the fast reader
	// would accept what the general one refuses.
	if err := p.fastEvent(&sc, ev); err != nil || (ev.process == history.NoProcess && !ev.nemesis) || sc.Skipped && !json.Valid(line) {
		p.reads = p.reads[:nreads]
		return false
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
		if _, busy := b.open[ev.process]; busy {
			p.reads = p.reads[:nreads]
			return false
		}
		b.invoke(ev.process, f, ev.index, append(b.buffer(), ev.mops...))
		return true
	}
	t, open := b.open[ev.process]
	if !open || (f != "" && f != b.pending[t].f) {
		p.reads = p.reads[:nreads]
		return false
	}
	var done []rawMop
	if ev.typ == history.OK {
		src := b.pending[t].mops
		if len(ev.mops) != len(src) {
			p.reads = p.reads[:nreads]
			return false
		}
		for j, r := range ev.mops {
			if r.f != mRead && src[j] != r || r.f == mRead && (src[j].f != mRead || src[j].key != r.key) {
				p.reads = p.reads[:nreads]
				return false
			}
		}
		done = ev.mops
	}
	b.complete(t, ev.typ, ev.index, done)
	return true
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
	b.open[pr] = t
	b.pending[t] = pendingTxn{f: f, mops: mops}
	b.p.txns = append(b.p.txns, txn{index: index, invoke: index, process: pr, typ: history.Info, call: b.pos, ret: -1})
	b.pos++
}

// complete closes transaction t; done holds an ok completion's
// micro-operations, with what the reads returned.
func (b *builder) complete(t int32, typ history.Type, index int64, done []rawMop) {
	tx := &b.p.txns[t]
	delete(b.open, tx.process)
	src := b.pending[t].mops
	delete(b.pending, t)
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
	for t, pt := range b.pending {
		b.reserve(len(pt.mops))
		start := len(b.mops)
		for _, r := range pt.mops {
			b.mops = append(b.mops, mop{kind: r.f, key: r.key, val: r.val})
		}
		b.p.txns[t].mops = b.mops[start:len(b.mops):len(b.mops)]
	}
	b.pending = nil
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
		if prev, busy := b.open[pr]; busy {
			return &history.PairError{Index: e.Index, Msg: fmt.Sprintf("process %s invokes %q while its %q invoked at index %d has not completed",
				pr, e.F, b.pending[prev].f, b.p.txns[prev].invoke)}
		}
		mops, err := b.invokeMops(e)
		if err != nil {
			return err
		}
		b.invoke(pr, e.F, e.Index, mops)
		return nil
	}
	t, open := b.open[pr]
	if !open {
		return &history.PairError{Index: e.Index, Msg: fmt.Sprintf("%s completion from process %s has no open invoke", e.Type, pr)}
	}
	if pt := b.pending[t]; e.F != pt.f && e.F != "" {
		return &history.PairError{Index: e.Index, Msg: fmt.Sprintf("completion f %q does not match invoke f %q at index %d", e.F, pt.f, b.p.txns[t].invoke)}
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
	inv := b.pending[t].mops
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
