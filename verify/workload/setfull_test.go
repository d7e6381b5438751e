package workload

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// Stable, lost and never-read elements, and the evidence for the lost one.
func TestSetFullOutcomes(t *testing.T) {
	r := check(t, SetFull, Options{},
		"0 :invoke :add 1", "0 :ok :add 1", // 0-1
		"0 :invoke :add 2", "0 :ok :add 2", // 2-3
		"2 :invoke :add 3",                       // 4: never completes
		"1 :invoke :read nil", "1 :ok :read [1]", // 5-6
	)
	wantVerdict(t, r, linear.False)
	wantField(t, r, "attempt_count", 3)
	wantField(t, r, "stable_count", 1)
	wantField(t, r, "lost", vals(2))
	wantField(t, r, "never_read", vals(3))
	d := r.Fields["lost_detail"].([]LostElement)
	if len(d) != 1 || d[0].Known.Index != 3 || d[0].Known.F != "add" || d[0].Missing.InvokeIndex != 5 || d[0].LastSeen != nil {
		t.Fatalf("lost detail %+v", d)
	}
	if s := r.Summary(); !strings.Contains(s, "1 element lost (2)") || !strings.Contains(s, "2 was known at index 3 and missing from the read invoked at index 5") {
		t.Fatalf("summary %q", s)
	}
}

// An element seen, then missing from every later read, is lost; the
// evidence names the last read that saw it.
func TestSetFullLostAfterSeen(t *testing.T) {
	r := check(t, SetFull, Options{},
		"0 :invoke :add 1", "0 :ok :add 1",
		"1 :invoke :read nil", "1 :ok :read [1]",
		"1 :invoke :read nil", "1 :ok :read []",
	)
	wantVerdict(t, r, linear.False)
	wantField(t, r, "lost", vals(1))
	d := r.Fields["lost_detail"].([]LostElement)
	if d[0].LastSeen == nil || d[0].LastSeen.Index != 3 || d[0].Missing.Index != 5 {
		t.Fatalf("lost detail %+v", d[0])
	}
}

// An element that comes back is stable, but stale: a read that began after
// it was known missed it. Stale is invalid only for a linearizable set.
func TestSetFullStale(t *testing.T) {
	lines := []string{
		"0 :invoke :add 1", "0 :ok :add 1",
		"1 :invoke :read nil", "1 :ok :read []",
		"1 :invoke :read nil", "1 :ok :read [1]",
	}
	r := check(t, SetFull, Options{}, lines...)
	wantVerdict(t, r, linear.True)
	wantField(t, r, "stale", vals(1))
	wantField(t, r, "stable_count", 1)
	wantField(t, r, "lost", vals())
	w := r.Fields["worst_stale"].([]StaleElement)
	if len(w) != 1 || w[0].Missing.InvokeIndex != 2 || w[0].Known.Index != 1 {
		t.Fatalf("worst stale %+v", w)
	}

	r = check(t, SetFull, Options{SetFullLinearizable: true}, lines...)
	wantVerdict(t, r, linear.False)
	if s := r.Summary(); !strings.Contains(s, "1 element stale (1): the read invoked at index 2 missed 1, known since index 1") {
		t.Fatalf("summary %q", s)
	}
}

// A read that began before the element was known may miss it: that is not
// a loss (the read may have taken effect before the add).
func TestSetFullConcurrentMiss(t *testing.T) {
	r := check(t, SetFull, Options{},
		"1 :invoke :read nil",
		"0 :invoke :add 1", "0 :ok :add 1",
		"1 :ok :read []",
	)
	wantVerdict(t, r, linear.Unknown)
	wantField(t, r, "lost", vals())
	wantField(t, r, "never_read", vals(1))
	if !strings.Contains(r.Reason, "no element is stable") {
		t.Fatalf("reason %q", r.Reason)
	}
}

// A crashed add is known once a read returns its element; missing later, it
// is lost like any other.
func TestSetFullKnownByRead(t *testing.T) {
	r := check(t, SetFull, Options{},
		"0 :invoke :add 5", "0 :info :add 5",
		"1 :invoke :read nil", "1 :ok :read [5]",
		"1 :invoke :read nil", "1 :ok :read []",
	)
	wantVerdict(t, r, linear.False)
	wantField(t, r, "lost", vals(5))
	d := r.Fields["lost_detail"].([]LostElement)
	if d[0].Known.F != "read" || d[0].Known.Index != 3 {
		t.Fatalf("known by %+v", d[0].Known)
	}
}

// A read that completed before the element's add was invoked could not have
// seen it, so it does not count against the element: here the element is
// stable.
func TestSetFullReadBeforeAdd(t *testing.T) {
	r := check(t, SetFull, Options{},
		"1 :invoke :read nil",                   // 0
		"2 :invoke :read nil", "2 :ok :read []", // 1-2: before the add began
		"0 :invoke :add 1", "0 :ok :add 1", // 3-4
		"1 :ok :read [1]", // 5
	)
	wantVerdict(t, r, linear.True)
	wantField(t, r, "stable_count", 1)
	wantField(t, r, "stale", vals())
}

// One read returning an element twice is a duplicate; an element nobody
// added (or whose add failed) is unexpected. Both are invalid.
func TestSetFullDuplicatedAndUnexpected(t *testing.T) {
	r := check(t, SetFull, Options{},
		"0 :invoke :add 1", "0 :ok :add 1",
		"0 :invoke :add 2", "0 :fail :add 2",
		"1 :invoke :read nil", "1 :ok :read [1 1 7 2]",
		"1 :invoke :read nil", "1 :ok :read [1 1 1]",
	)
	wantVerdict(t, r, linear.False)
	d := r.Fields["duplicated"].([]Duplicate)
	if len(d) != 1 || d[0].Element != int64(1) || d[0].Copies != 3 || d[0].Read.Index != 7 {
		t.Fatalf("duplicated %+v", d)
	}
	wantField(t, r, "unexpected", vals(2, 7))
	wantField(t, r, "lost", vals())
	s := r.Summary()
	if !strings.Contains(s, "1 element duplicated: the read completed at index 7 returned 1 3 times") || !strings.Contains(s, "2 elements unexpected (2, 7)") {
		t.Fatalf("summary %q", s)
	}
}

func TestSetFullNoReads(t *testing.T) {
	r := check(t, SetFull, Options{}, "0 :invoke :add 1", "0 :ok :add 1")
	wantVerdict(t, r, linear.Unknown)
	wantField(t, r, "never_read", vals(1))
}

// naiveSetFull classifies every added element by testing it against every
// read, straight from the definitions, for comparison with the checker.
func naiveSetFull(h *history.History) (lost, stale, never []history.Value) {
	ops, _ := pair(h.Events)
	type rd struct {
		call, ret int
		has       map[int64]bool
	}
	var reads []rd
	added, attempted, known := map[int64]bool{}, map[int64]int{}, map[int64]int{}
	for _, op := range ops {
		switch {
		case op.F == "add":
			v := op.Input.(int64)
			added[v] = true
			if a, ok := attempted[v]; op.Type != history.Fail && (!ok || op.Call < a) {
				attempted[v] = op.Call
			}
			if k, ok := known[v]; op.Type == history.OK && (!ok || op.Return < k) {
				known[v] = op.Return
			}
		case op.Type == history.OK:
			has := map[int64]bool{}
			for _, x := range op.Output.([]history.Value) {
				has[x.(int64)] = true
			}
			reads = append(reads, rd{op.Call, op.Return, has})
		}
	}
	for v := range added {
		a, ok := attempted[v]
		if !ok { // only failed adds: never known
			never = append(never, v)
			continue
		}
		k, isKnown := known[v]
		lp, la := -1, -1
		for _, r := range reads {
			if r.ret < a {
				continue
			}
			if r.has[v] {
				lp = max(lp, r.call)
				if !isKnown || r.ret < k {
					k, isKnown = r.ret, true
				}
			} else {
				la = max(la, r.call)
			}
		}
		switch {
		case lp >= 0 && la < lp:
			if la >= 0 && k < la {
				stale = append(stale, v)
			}
		case isKnown && la >= 0 && lp < la && k < la:
			lost = append(lost, v)
		default:
			never = append(never, v)
		}
	}
	for _, l := range [][]history.Value{lost, stale, never} {
		slices.SortFunc(l, func(a, b history.Value) int { return cmp.Compare(a.(int64), b.(int64)) })
	}
	return nonNil(lost), nonNil(stale), nonNil(never)
}

// randomSetFull writes a random concurrent set-full history whose reads
// sometimes miss elements, as Jepsen log lines.
func randomSetFull(rng *rand.Rand, nops int) []string {
	const procs = 4
	var lines []string
	open := map[int]string{} // process → f of its open op
	present := map[int64]bool{}
	next := int64(0)
	for len(lines) < nops {
		p := rng.IntN(procs)
		f, busy := open[p]
		switch {
		case !busy && rng.IntN(3) == 0:
			open[p] = "read"
			lines = append(lines, fmt.Sprintf("%d :invoke :read nil", p))
		case !busy:
			open[p] = fmt.Sprintf("add %d", next)
			lines = append(lines, fmt.Sprintf("%d :invoke :add %d", p, next))
			next++
		case f == "read":
			var got []string
			for v := range present {
				if rng.IntN(8) != 0 { // reads miss an element now and then
					got = append(got, fmt.Sprint(v))
				}
			}
			slices.Sort(got)
			lines = append(lines, fmt.Sprintf("%d :ok :read [%s]", p, strings.Join(got, " ")))
			delete(open, p)
		default:
			var v int64
			fmt.Sscanf(f, "add %d", &v)
			typ := [...]string{"ok", "ok", "ok", "info", "fail"}[rng.IntN(5)]
			if typ != "fail" && rng.IntN(4) != 0 {
				present[v] = true
			}
			lines = append(lines, fmt.Sprintf("%d :%s :add %d", p, typ, v))
			delete(open, p)
		}
	}
	return lines
}

// The checker's outcomes, found by walking only the reads' own elements,
// agree with testing every element against every read.
func TestSetFullAgreesWithNaive(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		lines := randomSetFull(rng, 10+rng.IntN(80))
		h := hist(t, lines...)
		r, err := Check(SetFull, h, Options{})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		lost, stale, never := naiveSetFull(h)
		for _, c := range []struct {
			field string
			want  []history.Value
		}{{"lost", lost}, {"stale", stale}, {"never_read", never}} {
			if got := r.Fields[c.field]; !reflect.DeepEqual(got, c.want) {
				t.Fatalf("seed %d: %s = %v, want %v\n%s", seed, c.field, got, c.want, strings.Join(lines, "\n"))
			}
		}
	}
}
