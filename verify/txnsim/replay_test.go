package txnsim

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
)

// The tests here replay the ground truth of a run (which transactions
// committed, in what order, and which commits each read could see) with a
// model of their own, a map of keys to the states each commit left, and
// hold every read in the history against it. The model shares nothing with
// the simulator's store.

// committed is a committed transaction in the replay.
type committed struct {
	op  history.Op
	tr  *opTrace
	mop []micro // from the invoke, so committed info transactions count
}

// ver is the state of a key after a commit.
type ver struct {
	order  int
	list   []int64 // list-append
	reg    int64   // rw-register
	writer int     // commit order of the writer
}

type replay struct {
	o       *outcome
	txns    []committed     // by commit order - 1
	vers    map[int64][]ver // ascending order
	posByOr []int64         // commitPos by commit order - 1
}

func newReplay(t *testing.T, o *outcome) *replay {
	t.Helper()
	r := &replay{o: o, vers: map[int64][]ver{}}
	for _, op := range o.ops {
		tr := o.tr.ops[op.Index]
		if tr == nil {
			t.Fatalf("index %d has no trace", op.Index)
		}
		if !tr.committed {
			continue
		}
		if op.Type == history.Fail {
			t.Fatalf("index %d failed yet committed", op.Index)
		}
		r.txns = append(r.txns, committed{op, tr, micros(t, op.Input)})
	}
	sort.Slice(r.txns, func(i, j int) bool { return r.txns[i].tr.order < r.txns[j].tr.order })
	for i, c := range r.txns {
		if c.tr.order != i+1 {
			t.Fatalf("commit orders are not 1..n: position %d has %d", i, c.tr.order)
		}
		if i > 0 && c.tr.commitPos < r.posByOr[i-1] {
			t.Fatalf("commit %d happened before commit %d", c.tr.order, c.tr.order-1)
		}
		r.posByOr = append(r.posByOr, c.tr.commitPos)
		// A commit happens after its invoke and no later than its completion.
		if c.tr.commitPos <= int64(c.op.Call) || c.tr.commitPos > int64(c.op.Return) {
			t.Fatalf("index %d commits at position %d, outside its span %d..%d", c.op.Index, c.tr.commitPos, c.op.Call, c.op.Return)
		}
		for _, m := range c.mop {
			if m.f == "r" {
				continue
			}
			vs := r.vers[m.k]
			nv := ver{order: c.tr.order, writer: c.tr.order}
			if n := len(vs); n > 0 {
				nv.list, nv.reg = slices.Clone(vs[n-1].list), vs[n-1].reg
			}
			if n := len(vs); n > 0 && vs[n-1].order == c.tr.order {
				vs = vs[:n-1] // several writes by one transaction: one version
			}
			if m.f == "append" {
				nv.list = append(nv.list, m.v.(int64))
			} else {
				nv.reg = m.v.(int64)
			}
			r.vers[m.k] = append(vs, nv)
		}
	}
	return r
}

// commitsBefore is the number of commits made before event position pos.
func (r *replay) commitsBefore(pos int) int {
	return sort.Search(len(r.posByOr), func(i int) bool { return r.posByOr[i] > int64(pos) })
}

// at returns the position in vers[k] of the version visible to commits
// 1..snap, or -1.
func (r *replay) at(k int64, snap int) int {
	vs := r.vers[k]
	return sort.Search(len(vs), func(i int) bool { return vs[i].order > snap }) - 1
}

// visible is how many commits micro-op i of c could see.
func (r *replay) visible(c *committed, i int) int {
	switch lvl, _ := parseDB(r.o.c.DB); lvl {
	case serializable:
		return c.tr.order - 1
	case readCommitted:
		return c.tr.readAt[i]
	}
	return c.tr.snap
}

// expect is what micro-op i of c must read: the visible state and the
// transaction's own earlier writes.
func (r *replay) expect(c *committed, i int) history.Value {
	k := c.mop[i].k
	j := r.at(k, r.visible(c, i))
	appendWL := r.o.c.Workload == "list-append"
	if appendWL {
		out := []history.Value{}
		if j >= 0 {
			for _, e := range r.vers[k][j].list {
				out = append(out, e)
			}
		}
		for _, m := range c.mop[:i] {
			if m.f == "append" && m.k == k {
				out = append(out, m.v)
			}
		}
		return out
	}
	var out history.Value
	if j >= 0 {
		out = r.vers[k][j].reg
	}
	for _, m := range c.mop[:i] {
		if m.f == "w" && m.k == k {
			out = m.v
		}
	}
	return out
}

// ownWriteBefore reports whether c wrote key k before micro-op i.
func (c *committed) ownWriteBefore(i int, k int64) bool {
	for _, m := range c.mop[:i] {
		if m.f != "r" && m.k == k {
			return true
		}
	}
	return false
}

// checkReads holds every ok read against the replay, and the trace's
// visibility against what the level promises.
func (r *replay) checkReads(t *testing.T) {
	t.Helper()
	lvl, _ := parseDB(r.o.c.DB)
	for ci := range r.txns {
		c := &r.txns[ci]
		before := r.commitsBefore(c.op.Call)
		switch lvl {
		case si, ssi:
			if c.tr.snap != before {
				t.Fatalf("index %d: snapshot holds %d commits, but %d were made before its invoke", c.op.Index, c.tr.snap, before)
			}
		case prefix:
			if c.tr.snap > before || c.tr.snap < before-r.o.c.Concurrency {
				t.Fatalf("index %d: snapshot holds %d commits, %d were made before its invoke", c.op.Index, c.tr.snap, before)
			}
		case readCommitted:
			last := before
			for i, m := range c.mop {
				if m.f != "r" {
					continue
				}
				at := c.tr.readAt[i]
				if at < last || at > c.tr.order-1 {
					t.Fatalf("index %d: read %d sees %d commits, outside %d..%d", c.op.Index, i, at, last, c.tr.order-1)
				}
				last = at
			}
		}
		if c.op.Type != history.OK {
			continue
		}
		out := micros(t, c.op.Output)
		for i, m := range out {
			if m.f != "r" {
				continue
			}
			if want := r.expect(c, i); !history.Equal(m.v, want) {
				t.Fatalf("%s index %d micro-op %d reads key %d as %s; replay of commits 1..%d gives %s",
					r.o.c.DB, c.op.Index, i, m.k, history.Show(m.v), r.visible(c, i), history.Show(want))
			}
		}
	}
}

// checkFirstCommitterWins: no committed transaction wrote a key that
// another transaction wrote between its snapshot and its commit.
func (r *replay) checkFirstCommitterWins(t *testing.T) {
	t.Helper()
	for _, c := range r.txns {
		for _, m := range c.mop {
			if m.f == "r" {
				continue
			}
			for _, v := range r.vers[m.k] {
				if v.order > c.tr.snap && v.order < c.tr.order {
					t.Fatalf("index %d (snapshot %d, commit %d) writes key %d, which commit %d wrote in between",
						c.op.Index, c.tr.snap, c.tr.order, m.k, v.order)
				}
			}
		}
	}
}

// graph is Adya's direct serialization graph of the committed
// transactions, nodes numbered by commit order - 1.
type graph struct {
	ww, wr, rw [][]int
}

func (r *replay) graph() *graph { return r.keyGraph(nil) }

// keyGraph is the graph of the edges on one key, or on all when k is nil.
func (r *replay) keyGraph(key *int64) *graph {
	n := len(r.txns)
	g := &graph{make([][]int, n), make([][]int, n), make([][]int, n)}
	for k, vs := range r.vers {
		if key != nil && k != *key {
			continue
		}
		for j := 1; j < len(vs); j++ {
			g.ww[vs[j-1].writer-1] = append(g.ww[vs[j-1].writer-1], vs[j].writer-1)
		}
	}
	for ci := range r.txns {
		c := &r.txns[ci]
		for i, m := range c.mop {
			if m.f != "r" || c.ownWriteBefore(i, m.k) || key != nil && m.k != *key {
				continue
			}
			// The transaction may have read the key as it stood, or an
			// older state for the levels that read from a snapshot.
			vs := r.vers[m.k]
			j := r.at(m.k, r.visible(c, i))
			if j >= 0 && vs[j].writer != c.tr.order {
				g.wr[vs[j].writer-1] = append(g.wr[vs[j].writer-1], ci)
			}
			if j+1 < len(vs) && vs[j+1].writer != c.tr.order {
				g.rw[ci] = append(g.rw[ci], vs[j+1].writer-1)
			}
		}
	}
	return g
}

// cycle returns a node on a cycle of adj, or -1 when adj is acyclic.
func cycle(adj [][]int) int {
	in := make([]int, len(adj))
	for _, out := range adj {
		for _, v := range out {
			in[v]++
		}
	}
	var queue []int
	for v, d := range in {
		if d == 0 {
			queue = append(queue, v)
		}
	}
	seen := 0
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		seen++
		for _, w := range adj[v] {
			if in[w]--; in[w] == 0 {
				queue = append(queue, w)
			}
		}
	}
	if seen == len(adj) {
		return -1
	}
	for v, d := range in {
		if d > 0 {
			return v
		}
	}
	return -1
}

func union(parts ...[][]int) [][]int {
	out := make([][]int, len(parts[0]))
	for _, p := range parts {
		for v, ws := range p {
			out[v] = append(out[v], ws...)
		}
	}
	return out
}

// siGraph is (WW ∪ WR) ∪ (WW ∪ WR);RW: Cerone and Gotsman showed that a
// history is snapshot isolation exactly when it is acyclic, that is, when
// every cycle has two adjacent rw edges. It proscribes G-single and
// G-nonadjacent and allows write skew.
func (g *graph) siGraph() [][]int {
	d := union(g.ww, g.wr)
	out := union(d)
	for a, bs := range d {
		for _, b := range bs {
			out[a] = append(out[a], g.rw[b]...)
		}
	}
	return out
}

// levelConfigs are the runs every level is checked on: contention (few
// keys, long transactions), retirement (few writes per key), info
// completions, rw-registers, and the defaults.
func levelConfigs(db string) []Config {
	var cs []Config
	for _, wl := range Workloads {
		for seed := uint64(1); seed <= 4; seed++ {
			cs = append(cs,
				Config{DB: db, Workload: wl, Ops: 1500, Seed: seed},
				Config{DB: db, Workload: wl, Ops: 1500, Keys: 3, Concurrency: 6, MaxTxnLen: 6, MaxWritesPerKey: 8, InfoRate: 0.1, Seed: seed},
				Config{DB: db, Workload: wl, Ops: 1500, Keys: 20, Concurrency: 20, InfoRate: 0.02, Seed: seed},
			)
		}
	}
	return cs
}

func name(c Config) string {
	return fmt.Sprintf("%s/keys=%d/c=%d/info=%v/seed=%d", c.Workload, c.Keys, c.Concurrency, c.InfoRate, c.Seed)
}

func TestSerializableIsStrict(t *testing.T) {
	for _, c := range levelConfigs("serializable") {
		t.Run(name(c), func(t *testing.T) {
			o := simulate(t, c)
			r := newReplay(t, o)
			// Each transaction took effect at its commit instant, inside
			// its span, and read exactly the state all earlier commits
			// left: the commit order is a strict serialization.
			r.checkReads(t)
			for _, op := range o.ops {
				if op.Type == history.Fail {
					t.Fatalf("index %d failed; serializable never aborts", op.Index)
				}
			}
			if v := cycle(union(r.graph().ww, r.graph().wr, r.graph().rw)); v >= 0 {
				t.Fatalf("serialization graph has a cycle through commit %d", v+1)
			}
		})
	}
}

func TestSSIIsSerializable(t *testing.T) {
	for _, c := range levelConfigs("ssi") {
		t.Run(name(c), func(t *testing.T) {
			r := newReplay(t, simulate(t, c))
			r.checkReads(t)
			r.checkFirstCommitterWins(t)
			g := r.graph()
			if v := cycle(union(g.ww, g.wr, g.rw)); v >= 0 {
				t.Fatalf("serialization graph has a cycle through index %d", r.txns[v].op.Index)
			}
		})
	}
}

func TestSIIsSnapshotIsolation(t *testing.T) {
	cycles := 0
	for _, c := range levelConfigs("si") {
		t.Run(name(c), func(t *testing.T) {
			r := newReplay(t, simulate(t, c))
			r.checkReads(t)
			r.checkFirstCommitterWins(t)
			g := r.graph()
			if v := cycle(g.siGraph()); v >= 0 {
				t.Fatalf("a cycle without two adjacent rw edges passes through index %d", r.txns[v].op.Index)
			}
			if cycle(union(g.ww, g.wr, g.rw)) >= 0 {
				cycles++
			}
		})
	}
	// The checks above would pass for a serializable database too; si
	// must also show non-serializable runs.
	if cycles == 0 {
		t.Fatal("no si run has a serialization cycle")
	}
}

func TestPrefixIsStaleSnapshotIsolation(t *testing.T) {
	stale, cycles := 0, 0
	for _, c := range levelConfigs("prefix") {
		t.Run(name(c), func(t *testing.T) {
			r := newReplay(t, simulate(t, c))
			r.checkReads(t)
			r.checkFirstCommitterWins(t)
			g := r.graph()
			if v := cycle(g.siGraph()); v >= 0 {
				t.Fatalf("a cycle without two adjacent rw edges passes through index %d", r.txns[v].op.Index)
			}
			if cycle(union(g.ww, g.wr, g.rw)) >= 0 {
				cycles++
			}
			// Each key alone is serializable.
			for k := range r.vers {
				kg := r.keyGraph(&k)
				if v := cycle(union(kg.ww, kg.wr, kg.rw)); v >= 0 {
					t.Fatalf("key %d: serialization cycle through index %d", k, r.txns[v].op.Index)
				}
			}
			for _, c := range r.txns {
				if c.tr.snap < r.commitsBefore(c.op.Call) {
					stale++
				}
			}
		})
	}
	if stale == 0 || cycles == 0 {
		t.Fatalf("%d stale snapshots and %d runs with serialization cycles; want both", stale, cycles)
	}
}

func TestReadCommitted(t *testing.T) {
	cycles, siCycles := 0, 0
	for _, c := range levelConfigs("read-committed") {
		t.Run(name(c), func(t *testing.T) {
			r := newReplay(t, simulate(t, c))
			// Every read saw exactly the commits made before it (and its
			// own writes): nothing uncommitted, aborted or intermediate.
			r.checkReads(t)
			g := r.graph()
			if v := cycle(union(g.ww, g.wr)); v >= 0 {
				t.Fatalf("G1c: a ww/wr cycle passes through index %d", r.txns[v].op.Index)
			}
			if cycle(union(g.ww, g.wr, g.rw)) >= 0 {
				cycles++
			}
			// Read skew and lost updates: cycles that snapshot isolation
			// would forbid.
			if cycle(g.siGraph()) >= 0 {
				siCycles++
			}
		})
	}
	if cycles == 0 || siCycles == 0 {
		t.Fatalf("%d read-committed runs have serialization cycles, %d have cycles without adjacent rw edges; want both", cycles, siCycles)
	}
}
