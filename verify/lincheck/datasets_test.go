package lincheck

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

// dataset is one history ready for both checkers, with its expected verdict.
type dataset struct {
	name  string
	file  string
	want  linear.Verdict
	hist  *history.History
	ops   []history.Op
	model model.Model
	sem   model.Options

	// Porcupine's view of the same history, with a model of the same
	// semantics written for it.
	pOps   []porcupine.Operation
	pModel porcupine.Model
}

// ipfence checks the dataset with ipfence: compile and search.
func (d *dataset) ipfence(tb testing.TB) linear.Verdict {
	parts, err := d.model.Compile(d.ops, d.sem)
	if err != nil {
		tb.Fatalf("%s: %v", d.name, err)
	}
	r, err := linear.Check(context.Background(), parts, linear.Options{})
	if err != nil {
		tb.Fatalf("%s: %v", d.name, err)
	}
	return r.Valid
}

// porcupine checks the dataset with Porcupine.
func (d *dataset) porcupine() linear.Verdict {
	if porcupine.CheckOperations(d.pModel, d.pOps) {
		return linear.True
	}
	return linear.False
}

func load(tb testing.TB, name, file string, format history.Format) (*history.History, []history.Op) {
	tb.Helper()
	h, err := history.ReadFile(file, format)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	ops, _, err := history.Pair(h.Events)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return h, ops
}

// porcupineOps converts paired operations; pending ones return after every
// event, and the operations a model drops (fails) are left out.
func porcupineOps(h *history.History, ops []history.Op, keep func(*history.Op) bool, in func(*history.Op) any, out func(*history.Op) any) []porcupine.Operation {
	end := int64(len(h.Events) + 1)
	var res []porcupine.Operation
	for i := range ops {
		o := &ops[i]
		if !keep(o) {
			continue
		}
		ret := int64(o.Return)
		if o.Pending() {
			ret = end
		}
		res = append(res, porcupine.Operation{ClientId: int(o.Process), Input: in(o), Call: int64(o.Call), Output: out(o), Return: ret})
	}
	return res
}

// The register semantics shared by Porcupine's etcd data and Knossos's
// cas-register files, as inputs and outputs for a Porcupine model.
type regIn struct {
	kind uint8 // 0 read, 1 write, 2 cas
	a, b int64
}

type regOut struct {
	val     int64 // a read's value; absent for nil
	casOK   bool
	unknown bool // pending, or a read that matches anything
}

const absent = math.MinInt64

func intOrAbsent(v history.Value) int64 {
	if v == nil {
		return absent
	}
	return v.(int64)
}

func registerPorcupineModel(init int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			st := state.(int64)
			in := input.(regIn)
			out := output.(regOut)
			switch in.kind {
			case 0:
				return out.unknown || out.val == st, st
			case 1:
				return true, in.a
			}
			if in.a == st {
				return out.unknown || out.casOK, in.b
			}
			return out.unknown || !out.casOK, st
		},
		Equal: func(a, b any) bool { return a.(int64) == b.(int64) },
	}
}

func regPorcupine(h *history.History, ops []history.Op, failedCAS, nilAny bool) []porcupine.Operation {
	keep := func(o *history.Op) bool {
		return o.Type != history.Fail || (failedCAS && o.F == "cas")
	}
	in := func(o *history.Op) any {
		switch o.F {
		case "read":
			return regIn{kind: 0}
		case "write":
			return regIn{kind: 1, a: o.Input.(int64)}
		}
		l := o.Input.([]history.Value)
		return regIn{kind: 2, a: l[0].(int64), b: l[1].(int64)}
	}
	out := func(o *history.Op) any {
		if o.Pending() {
			return regOut{unknown: true}
		}
		if o.F == "read" {
			if o.Output == nil && nilAny {
				return regOut{unknown: true}
			}
			return regOut{val: intOrAbsent(o.Output)}
		}
		return regOut{casOK: o.Type == history.OK}
	}
	return porcupineOps(h, ops, keep, in, out)
}

// porcupineDir is where Porcupine v1.3.1's module (and its test data) is.
func porcupineDir(tb testing.TB) string {
	return testenv.ModuleDir(tb, "github.com/anishathalye/porcupine")
}

// etcdValid lists the etcd histories the issue expects linearizable.
var etcdValid = []int{2, 5, 7, 18, 25, 31, 38, 45, 48, 49, 51, 53, 56, 67, 75, 76, 80, 87, 92, 98, 100, 101, 102}

// etcdDatasets loads Porcupine's Jepsen etcd histories (095 is empty).
func etcdDatasets(tb testing.TB) []dataset {
	dir := filepath.Join(porcupineDir(tb), "test_data", "jepsen")
	m, _ := model.Lookup("cas-register")
	var out []dataset
	for i := 0; i <= 102; i++ {
		if i == 95 {
			continue
		}
		name := fmt.Sprintf("etcd_%03d", i)
		file := filepath.Join(dir, name+".log")
		h, ops := load(tb, name, file, "")
		want := linear.False
		if slices.Contains(etcdValid, i) {
			want = linear.True
		}
		out = append(out, dataset{
			name: name, file: file, want: want, hist: h, ops: ops, model: m,
			sem:    model.OptionsFor(h.Format),
			pOps:   regPorcupine(h, ops, true, false),
			pModel: registerPorcupineModel(absent),
		})
	}
	return out
}

// knossosDatasets loads the 120 cas-register files of the shared corpus.
func knossosDatasets(tb testing.TB) []dataset {
	dir := filepath.Join(testenv.Corpus(tb), "knossos", "cas-register")
	m, _ := model.Lookup("cas-register")
	var out []dataset
	for _, sub := range []string{"good", "bad"} {
		files, _ := filepath.Glob(filepath.Join(dir, sub, "*.edn"))
		for _, file := range files {
			name := sub + "/" + strings.TrimSuffix(filepath.Base(file), ".edn")
			h, ops := load(tb, name, file, "")
			sem := model.OptionsFor(h.Format)
			sem.Initial = int64(0)
			want := linear.True
			if sub == "bad" {
				want = linear.False
			}
			out = append(out, dataset{
				name: name, file: file, want: want, hist: h, ops: ops, model: m, sem: sem,
				pOps:   regPorcupine(h, ops, false, true),
				pModel: registerPorcupineModel(0),
			})
		}
	}
	return out
}

// The key-value semantics of Porcupine's kv data.
type kvIn struct {
	op         uint8 // 0 get, 1 put, 2 append
	key, value string
}

func kvPorcupineModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var keys []string
			for _, o := range history {
				k := o.Input.(kvIn).key
				if _, ok := byKey[k]; !ok {
					keys = append(keys, k)
				}
				byKey[k] = append(byKey[k], o)
			}
			out := make([][]porcupine.Operation, len(keys))
			for i, k := range keys {
				out[i] = byKey[k]
			}
			return out
		},
		Init: func() any { return "" },
		Step: func(state, input, output any) (bool, any) {
			st := state.(string)
			in := input.(kvIn)
			switch in.op {
			case 0:
				return output.(string) == st, st
			case 1:
				return true, in.value
			}
			return true, st + in.value
		},
		Equal: func(a, b any) bool { return a.(string) == b.(string) },
	}
}

// kvDatasets loads Porcupine's kv histories.
func kvDatasets(tb testing.TB) []dataset {
	dir := filepath.Join(porcupineDir(tb), "test_data", "kv")
	m, _ := model.Lookup("kv")
	var out []dataset
	for _, c := range []string{"c01", "c10", "c50"} {
		for _, verdict := range []string{"ok", "bad"} {
			name := c + "-" + verdict
			file := filepath.Join(dir, name+".txt")
			h, ops := load(tb, name, file, "")
			want := linear.True
			if verdict == "bad" {
				want = linear.False
			}
			keep := func(o *history.Op) bool { return o.Type != history.Fail }
			in := func(o *history.Op) any {
				l := o.Input.([]history.Value)
				k := kvIn{key: l[0].(string)}
				switch o.F {
				case "put":
					k.op, k.value = 1, l[1].(string)
				case "append":
					k.op, k.value = 2, l[1].(string)
				}
				return k
			}
			outF := func(o *history.Op) any {
				if o.F != "get" || o.Type != history.OK {
					return ""
				}
				return o.Output.([]history.Value)[1].(string)
			}
			out = append(out, dataset{
				name: name, file: file, want: want, hist: h, ops: ops, model: m,
				sem:    model.OptionsFor(h.Format),
				pOps:   porcupineOps(h, ops, keep, in, outF),
				pModel: kvPorcupineModel(),
			})
		}
	}
	return out
}
