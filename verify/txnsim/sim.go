package txnsim

import (
	"fmt"
	"sort"

	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/history"
)

// Spans of virtual time, in nanoseconds, each drawn uniformly in [lo, hi):
// a process's pause between a completion and its next invoke, the time one
// micro-op takes, and the time from the commit instant to the completion.
// Their values only shape the time field and how much transactions
// overlap; nothing depends on them being realistic.
const (
	thinkLo, thinkHi = 1, 100_000
	opLo, opHi       = 20_000, 500_000
	replyLo, replyHi = 10_000, 200_000
)

// errTimeout is the error of info completions: the client gave up waiting.
const errTimeout = "timeout"

// lockWaits is how many times a read-committed write retries a locked key
// before its transaction aborts.
const lockWaits = 4

// phase is what a thread's next scheduled action does.
type phase uint8

const (
	phaseInvoke phase = iota
	phaseStep         // read-committed: run the next micro-op
	phaseCommit
	phaseComplete
)

// mop is one micro-op as the simulator sees it.
type mop struct {
	write bool // append or w; otherwise r
	key   int64
	val   int64 // the value written or appended
}

// txn is a thread's running transaction.
type txn struct {
	id    uint64
	mops  []mop
	inv   []history.Value // the invoke's value, shared by fail and info completions
	reads []history.Value // per micro-op: what a read returned
	snap  int             // snapshot: commits 1..snap are visible
	step  int             // read-committed: the next micro-op to run
	waits int             // read-committed: lock waits so far
	// invokeIdx is the invoke event's index.
	invokeIdx int64
	result    history.Type
	err       history.Value
}

// thread is one logical process slot: Concurrency of them run at once.
type thread struct {
	proc history.Process
	next phase
	busy bool
	tx   txn
}

// action is a thread's next step on the virtual clock; seq breaks ties in
// the order actions were scheduled, so the run is one fixed sequence.
type action struct {
	t   int64
	seq uint64
	th  int32
}

// ssiRec is what SSI remembers of a committed transaction while a running
// transaction may still be concurrent with it.
type ssiRec struct {
	cn            int
	reads, writes []int64
	// in and out: the transaction has an rw-antidependency from (in) or to
	// (out) a concurrent committed transaction.
	in, out bool
}

// running is an SSI transaction in invoke order, to find the oldest
// snapshot still in use.
type running struct {
	th   int
	id   uint64
	snap int
}

// sim is one run: a single-threaded discrete-event simulation. Every
// choice comes from rng in the order actions are processed, and that order
// is fixed by (time, seq), so a Config gives one history.
type sim struct {
	c        Config
	lvl      level
	appendWL bool
	writeF   string
	rng      gen.Rand
	emit     func(history.Event) error
	tr       *trace

	now     int64
	seq     uint64
	events  int64 // events emitted, so the next event's index
	invoked int
	commits int // committed transactions; commit n has number n
	txnIDs  uint64

	queue   []action // a binary heap on (t, seq); at most one per thread
	threads []thread

	keys    map[int64]*keyState
	pool    []int64 // active keys
	nextKey int64

	running []running // ssi only
	recs    []ssiRec  // ssi only, ascending cn
}

// trace is the ground truth of a run, which a history alone does not
// show: which transactions committed, in what order, and which state each
// read saw. Tests replay it independently of the simulator's own store.
type trace struct {
	ops map[int64]*opTrace // by invoke index
}

type opTrace struct {
	committed bool
	order     int   // commit number
	commitPos int64 // events emitted before the commit instant
	snap      int   // commits visible to the reads (not read-committed)
	readAt    []int // read-committed: commits visible to each read, -1 for writes
}

// run simulates c and hands each event to emit in order.
func run(c Config, emit func(history.Event) error, tr *trace) error {
	if err := c.Validate(); err != nil {
		return err
	}
	c = c.withDefaults()
	lvl, _ := parseDB(c.DB)
	appendWL, _ := parseWorkload(c.Workload)
	s := &sim{
		c:        c,
		lvl:      lvl,
		appendWL: appendWL,
		writeF:   "w",
		rng:      gen.NewRand(c.Seed),
		emit:     emit,
		tr:       tr,
		threads:  make([]thread, c.Concurrency),
		keys:     make(map[int64]*keyState),
		pool:     make([]int64, c.Keys),
	}
	if appendWL {
		s.writeF = "append"
	}
	for i := range s.pool {
		s.pool[i] = s.freshKey()
	}
	for th := range s.threads {
		s.threads[th].proc = history.Process(th)
		s.schedule(th, phaseInvoke, s.span(thinkLo, thinkHi))
	}
	for len(s.queue) > 0 {
		a := s.pop()
		// Every action gets its own nanosecond, so event times strictly
		// increase and no two actions share an instant.
		s.now = max(a.t, s.now+1)
		th := int(a.th)
		var err error
		switch s.threads[th].next {
		case phaseInvoke:
			err = s.invoke(th)
		case phaseStep:
			s.step(th)
		case phaseCommit:
			s.commit(th)
		case phaseComplete:
			err = s.complete(th)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *sim) span(lo, hi int64) int64 { return lo + int64(s.rng.Uint64N(uint64(hi-lo))) }

func (s *sim) freshKey() int64 {
	k := s.nextKey
	s.nextKey++
	s.keys[k] = &keyState{name: k}
	return k
}

func (s *sim) emitEvent(e history.Event) error {
	e.Index = s.events
	e.Time = s.now
	e.F = "txn"
	s.events++
	return s.emit(e)
}

// invoke starts the thread's next transaction, if any are left.
func (s *sim) invoke(th int) error {
	if s.invoked == s.c.Ops {
		return nil
	}
	s.invoked++
	t := &s.threads[th]
	t.busy = true
	tx := &t.tx
	s.txnIDs++
	tx.id = s.txnIDs
	tx.invokeIdx = s.events
	tx.result, tx.err, tx.snap = history.OK, nil, 0
	s.newTxn(tx)
	switch s.lvl {
	case si, ssi:
		tx.snap = s.commits
	case prefix:
		tx.snap = max(0, s.commits-s.rng.IntN(s.c.Concurrency+1))
	}
	if s.lvl == ssi {
		s.running = append(s.running, running{th, tx.id, tx.snap})
	}
	if s.tr != nil {
		ot := &opTrace{readAt: make([]int, len(tx.mops))}
		for i := range ot.readAt {
			ot.readAt[i] = -1
		}
		s.tr.ops[tx.invokeIdx] = ot
	}
	if err := s.emitEvent(history.Event{Process: t.proc, Type: history.Invoke, Value: tx.inv}); err != nil {
		return err
	}
	if s.lvl == readCommitted {
		tx.step, tx.waits = 0, 0
		s.schedule(th, phaseStep, s.span(opLo, opHi))
		return nil
	}
	// The other levels evaluate every micro-op at the commit instant, as
	// if the client sent the whole transaction at once; the span is the
	// time the client would have spent on its micro-ops.
	var d int64
	for range tx.mops {
		d += s.span(opLo, opHi)
	}
	s.schedule(th, phaseCommit, d)
	return nil
}

// newTxn draws a transaction of the workload into tx.
func (s *sim) newTxn(tx *txn) {
	n := 1 + s.rng.IntN(s.c.MaxTxnLen)
	tx.mops = tx.mops[:0]
	tx.reads = append(tx.reads[:0], make([]history.Value, n)...)
	// One backing array for all the micro-op triples: fewer allocations.
	cells := make([]history.Value, 3*n)
	tx.inv = make([]history.Value, n)
	for i := range n {
		slot := s.rng.IntN(len(s.pool))
		k := s.pool[slot]
		ks := s.keys[k]
		ks.refs++
		m := mop{key: k}
		cell := cells[3*i : 3*i+3 : 3*i+3]
		cell[1] = ks.name
		if s.rng.Uint64()&1 == 0 {
			cell[0] = "r"
		} else {
			m.write = true
			ks.issued++
			m.val = ks.issued
			cell[0], cell[2] = s.writeF, m.val
			if ks.issued == int64(s.c.MaxWritesPerKey) {
				ks.retired = true
				s.pool[slot] = s.freshKey()
			}
		}
		tx.mops = append(tx.mops, m)
		tx.inv[i] = cell
	}
}

// read returns what micro-op i of tx reads from the commits 1..snap and
// the transaction's own earlier writes.
func (s *sim) read(tx *txn, i, snap int) history.Value {
	k := tx.mops[i].key
	ks := s.keys[k]
	v, ok := ks.at(snap)
	if !s.appendWL {
		var cur history.Value
		if ok {
			cur = v
		}
		for _, m := range tx.mops[:i] {
			if m.write && m.key == k {
				cur = m.val
			}
		}
		return cur
	}
	n := 0
	if ok {
		n = int(v)
	}
	out := make([]history.Value, n, n+i)
	for j, e := range ks.elems[:n] {
		out[j] = e
	}
	for _, m := range tx.mops[:i] {
		if m.write && m.key == k {
			out = append(out, m.val)
		}
	}
	return out
}

// step runs one read-committed micro-op at its own instant.
func (s *sim) step(th int) {
	tx := &s.threads[th].tx
	i := tx.step
	m := tx.mops[i]
	if m.write {
		// A write holds the key's lock to the end of the transaction, so
		// no other commit changes the key between this write and the
		// commit that installs it: the transaction's later reads of its
		// own appends stay prefixes of the key's list. A writer that finds
		// the key locked waits, retrying a few times, then aborts: that
		// also breaks deadlocks.
		ks := s.keys[m.key]
		owner := int32(th + 1)
		if ks.lock != 0 && ks.lock != owner {
			if tx.waits == lockWaits {
				s.finish(th, fmt.Sprintf("lock wait timeout on key %d", m.key))
				return
			}
			tx.waits++
			s.schedule(th, phaseStep, s.span(opLo, opHi))
			return
		}
		ks.lock = owner
	} else {
		tx.reads[i] = s.read(tx, i, s.commits)
		if s.tr != nil {
			s.tr.ops[tx.invokeIdx].readAt[i] = s.commits
		}
	}
	tx.step++
	if tx.step < len(tx.mops) {
		s.schedule(th, phaseStep, s.span(opLo, opHi))
	} else {
		s.schedule(th, phaseCommit, s.span(opLo, opHi))
	}
}

// commit decides the transaction at its commit instant.
func (s *sim) commit(th int) {
	tx := &s.threads[th].tx
	conflict := ""
	switch s.lvl {
	case serializable:
		tx.snap = s.commits
		s.readAll(tx)
	case si, ssi, prefix:
		s.readAll(tx)
		conflict = s.firstCommitterWins(tx)
		if conflict == "" && s.lvl == ssi {
			conflict = s.ssiConflict(tx)
		}
	}
	s.finish(th, conflict)
}

func (s *sim) readAll(tx *txn) {
	for i, m := range tx.mops {
		if !m.write {
			tx.reads[i] = s.read(tx, i, tx.snap)
		}
	}
}

// firstCommitterWins returns why tx must abort when a transaction that
// committed after its snapshot wrote a key it writes, else "".
func (s *sim) firstCommitterWins(tx *txn) string {
	for _, m := range tx.mops {
		if m.write && s.keys[m.key].lastCommit() > tx.snap {
			return fmt.Sprintf("write-write conflict on key %d", m.key)
		}
	}
	return ""
}

// ssiConflict applies SSI's rule, conservatively: no committed transaction
// may have both an incoming and an outgoing rw-antidependency with
// concurrent committed transactions. It returns why tx must abort, or "".
//
// Every rw edge between two concurrent committed transactions is found at
// the later one's commit, by concurrent. Fekete et al. showed that every
// cycle of a snapshot-isolation history passes through a transaction with
// such edges on both sides, so forbidding one leaves only serializable
// histories.
func (s *sim) ssiConflict(tx *txn) string {
	s.pruneRecs()
	in, out, pivot := false, false, false
	s.concurrent(tx, func(r *ssiRec, txToR, rToTx bool) {
		out = out || txToR
		in = in || rToTx
		// r would gain an incoming edge while it has an outgoing one, or
		// the reverse.
		pivot = pivot || txToR && r.out || rToTx && r.in
	})
	if pivot || in && out {
		return "dangerous structure: consecutive rw-antidependencies between concurrent transactions"
	}
	return ""
}

// ssiRecord remembers a committing tx and its edges.
func (s *sim) ssiRecord(tx *txn) {
	rec := ssiRec{cn: s.commits}
	s.concurrent(tx, func(r *ssiRec, txToR, rToTx bool) {
		rec.out = rec.out || txToR
		rec.in = rec.in || rToTx
		r.in = r.in || txToR
		r.out = r.out || rToTx
	})
	for _, m := range tx.mops {
		if m.write {
			rec.writes = append(rec.writes, m.key)
		} else {
			rec.reads = append(rec.reads, m.key)
		}
	}
	s.recs = append(s.recs, rec)
}

// concurrent calls f for each remembered committed transaction r that is
// concurrent with tx, with the rw edges between them. Committed r and tx
// are concurrent when r committed after tx's snapshot. Then tx did not see
// r, so tx -rw-> r when tx read a key r wrote; and r -rw-> tx when r read
// a key tx writes, since r's snapshot precedes tx's commit.
func (s *sim) concurrent(tx *txn, f func(r *ssiRec, txToR, rToTx bool)) {
	first := sort.Search(len(s.recs), func(i int) bool { return s.recs[i].cn > tx.snap })
	for i := first; i < len(s.recs); i++ {
		r := &s.recs[i]
		txToR, rToTx := tx.touches(r.writes, false), tx.touches(r.reads, true)
		if txToR || rToTx {
			f(r, txToR, rToTx)
		}
	}
}

// touches reports whether tx writes (or, with !write, reads) a key of keys.
func (tx *txn) touches(keys []int64, write bool) bool {
	for _, m := range tx.mops {
		if m.write == write {
			for _, k := range keys {
				if k == m.key {
					return true
				}
			}
		}
	}
	return false
}

// pruneRecs forgets the committed transactions that no running or future
// transaction can be concurrent with: those at or before the oldest
// snapshot still in use. SSI snapshots grow in invoke order, so the oldest
// running transaction holds the oldest snapshot.
func (s *sim) pruneRecs() {
	for len(s.running) > 0 {
		r := s.running[0]
		if t := &s.threads[r.th]; t.busy && t.tx.id == r.id {
			break
		}
		s.running = s.running[1:]
	}
	oldest := s.commits
	if len(s.running) > 0 {
		oldest = s.running[0].snap
	}
	drop := 0
	for drop < len(s.recs) && s.recs[drop].cn <= oldest {
		drop++
	}
	s.recs = s.recs[drop:]
}

// finish ends the transaction at this instant: conflict is why the
// database aborts it, or "" when it can commit. A completion is info with
// probability InfoRate; an info transaction that could commit commits or
// not by a coin flip, and if it does, later transactions see it.
func (s *sim) finish(th int, conflict string) {
	tx := &s.threads[th].tx
	info := s.c.InfoRate > 0 && s.rng.Float64() < s.c.InfoRate
	commit := conflict == "" && !(info && s.rng.Uint64()&1 == 0)
	if commit {
		s.commits++
		for _, m := range tx.mops {
			if m.write {
				s.keys[m.key].install(s.commits, s.appendWL, m.val)
			}
		}
		if s.lvl == ssi {
			s.ssiRecord(tx)
		}
		if s.tr != nil {
			ot := s.tr.ops[tx.invokeIdx]
			ot.committed, ot.order, ot.commitPos, ot.snap = true, s.commits, s.events, tx.snap
		}
	}
	if s.lvl == readCommitted {
		owner := int32(th + 1)
		for _, m := range tx.mops {
			if ks := s.keys[m.key]; m.write && ks.lock == owner {
				ks.lock = 0
			}
		}
	}
	switch {
	case info:
		tx.result, tx.err = history.Info, errTimeout
	case conflict != "":
		tx.result, tx.err = history.Fail, conflict
	}
	s.schedule(th, phaseComplete, s.span(replyLo, replyHi))
}

// complete emits the completion and lets the thread invoke again.
func (s *sim) complete(th int) error {
	t := &s.threads[th]
	tx := &t.tx
	v := history.Value(tx.inv)
	if tx.result == history.OK {
		out := make([]history.Value, len(tx.mops))
		var cells []history.Value // the read triples, in one allocation
		for i, m := range tx.mops {
			if m.write {
				out[i] = tx.inv[i]
				continue
			}
			if cells == nil {
				cells = make([]history.Value, 0, 3*(len(tx.mops)-i))
			}
			start := len(cells)
			cells = append(cells, "r", tx.inv[i].([]history.Value)[1], tx.reads[i])
			out[i] = cells[start:len(cells):len(cells)]
			tx.reads[i] = nil
		}
		v = out
	}
	if err := s.emitEvent(history.Event{Process: t.proc, Type: tx.result, Value: v, Error: tx.err}); err != nil {
		return err
	}
	for _, m := range tx.mops {
		ks := s.keys[m.key]
		ks.refs--
		if ks.refs == 0 && ks.retired {
			delete(s.keys, m.key)
		}
	}
	if tx.result == history.Info {
		// The process may still be inside its transaction as far as anyone
		// knows, so it is never reused (Jepsen's convention).
		t.proc += history.Process(s.c.Concurrency)
	}
	t.busy = false
	s.schedule(th, phaseInvoke, s.span(thinkLo, thinkHi))
	return nil
}

func (s *sim) schedule(th int, p phase, d int64) {
	s.threads[th].next = p
	s.seq++
	s.queue = append(s.queue, action{s.now + d, s.seq, int32(th)})
	for i := len(s.queue) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s.queue[i].before(s.queue[parent]) {
			break
		}
		s.queue[i], s.queue[parent] = s.queue[parent], s.queue[i]
		i = parent
	}
}

func (s *sim) pop() action {
	q := s.queue
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q) && q[l].before(q[m]) {
			m = l
		}
		if r < len(q) && q[r].before(q[m]) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	s.queue = q
	return top
}

func (a action) before(b action) bool {
	return a.t < b.t || a.t == b.t && a.seq < b.seq
}
