package model_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/lincheck"
	"github.com/ipfence/ipfence/verify/model"
)

// A custom model in plain functions: a counter that adds and reads. An
// add whose outcome is unknown (info) may have happened or not; the
// checker tries both.
func ExampleFuncs() {
	counter := model.Funcs[int64]{
		Name: "counter",
		Init: func() int64 { return 0 },
		Step: func(n int64, op history.Op) (int64, bool) {
			if op.F == "add" {
				return n + op.Input.(int64), true
			}
			return n, model.Returned(op, n)
		},
		Describe: func(n int64) string { return fmt.Sprint("count ", n) },
	}
	for _, text := range []string{
		// p0 adds 2; p1's add of 1 times out; p0 reads 3: the lost add happened.
		`{"process":0,"type":"invoke","f":"add","value":2}
{"process":0,"type":"ok","f":"add","value":2}
{"process":1,"type":"invoke","f":"add","value":1}
{"process":1,"type":"info","f":"add","value":1}
{"process":0,"type":"invoke","f":"read"}
{"process":0,"type":"ok","f":"read","value":3}`,
		// A read of 1 after an add of 2 completed: impossible.
		`{"process":0,"type":"invoke","f":"add","value":2}
{"process":0,"type":"ok","f":"add","value":2}
{"process":1,"type":"invoke","f":"read"}
{"process":1,"type":"ok","f":"read","value":1}`,
	} {
		h, err := history.Parse("example.jsonl", []byte(text+"\n"), history.JSONL)
		if err != nil {
			fmt.Println(err)
			return
		}
		rep, err := lincheck.Check(context.Background(), "example", h, lincheck.Options{Model: counter.Model()})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(rep.Valid)
		if f := rep.Failure; f != nil {
			fmt.Println(" ", f.Op.Op, "—", strings.TrimPrefix(f.Reason, "no order of the operations gets past this one; "))
		}
	}
	// Output:
	// true
	// false
	//   read → 1 — the longest linearizable prefix (1 ops) ends in state count 2
}

// A program's own model, registered at its start, is found by name as the
// built-in ones are: from a command-line flag, say. A second model of the
// same name is refused.
func ExampleRegister() {
	toggle := model.Funcs[bool]{
		Name: "toggle-of-mine",
		Doc:  "flip, and read the switch",
		Init: func() bool { return false },
		Step: func(on bool, op history.Op) (bool, bool) {
			if op.F == "flip" {
				return !on, true
			}
			return on, model.Returned(op, on)
		},
	}
	if err := model.Register(toggle.Model()); err != nil {
		fmt.Println(err)
	}
	m, err := model.Lookup("toggle-of-mine")
	fmt.Println(m.Name(), "—", m.Doc(), err)
	fmt.Println(model.Register(toggle.Model()))
	// Output:
	// toggle-of-mine — flip, and read the switch <nil>
	// model.Register: a model named "toggle-of-mine" is already known
}
