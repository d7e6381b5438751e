// Package regsim simulates a store of compare-and-set registers, one per
// key, and writes the history a Jepsen-style test of it records: the
// histories the linearizability checker is measured on at scale (issue 20:
// ten million operations over many keys, a hundred thousand on one key
// with crashed operations). It is deterministic: the same Config gives the
// same events, byte for byte.
//
// # Histories
//
// Operations are Jepsen's independent cas-register operations, as
// `ipfence-verify check --model independent-cas-register` reads them: F is
// "read" (invoke value [key nil], ok value [key v]; v nil before the first
// write), "write" ([key v]) or "cas" ([key [old new]]). Keys and values are
// int64; values are drawn from 0..Values-1, as Jepsen's (rand-int 5).
//
// Every operation takes effect at one instant between its invoke and its
// completion (its linearization point), so a history with StaleRate 0 is
// linearizable by construction. A cas whose old value is not the
// register's completes with fail: it certainly took no effect. With
// probability InfoRate an operation completes with info (error "timeout")
// instead, whether it took effect or not (by the seed); the process is not
// reused, and its thread goes on as process + Concurrency.
//
// StaleRate plants a bug: a read whose key was last written by an
// operation that completed before the read was invoked returns, with that
// probability, the value the write replaced.
package regsim

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/history"
)

// Defaults and bounds of Config's fields.
const (
	DefaultConcurrency = 10
	DefaultKeys        = 1
	DefaultValues      = 5
	MaxConcurrency     = 1 << 16
	MaxKeys            = 1 << 24
	MaxValues          = 1 << 30
)

// Config describes a simulated run.
type Config struct {
	// Ops is the number of operations invoked.
	Ops int
	// Concurrency is the number of client threads (0: DefaultConcurrency).
	Concurrency int
	// Keys is the number of registers operations spread over uniformly
	// (0: DefaultKeys).
	Keys int
	// Values is the size of the value domain (0: DefaultValues).
	Values int
	// InfoRate is the probability that an operation completes with info.
	InfoRate float64
	// StaleRate is the probability that an eligible read is stale (see
	// the package comment): 0 for a linearizable store.
	StaleRate float64
	// Seed seeds the simulation.
	Seed uint64
}

// Validate reports every field out of range.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("regsim: "+format, args...)) }
	if c.Ops < 0 {
		bad("Ops is %d; valid: 0 or more", c.Ops)
	}
	for _, f := range []struct {
		name       string
		v, hi, def int
	}{{"Concurrency", c.Concurrency, MaxConcurrency, DefaultConcurrency}, {"Keys", c.Keys, MaxKeys, DefaultKeys},
		{"Values", c.Values, MaxValues, DefaultValues}} {
		if f.v < 0 || f.v > f.hi {
			bad("%s is %d; valid: 1 to %d, or 0 for the default %d", f.name, f.v, f.hi, f.def)
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"InfoRate", c.InfoRate}, {"StaleRate", c.StaleRate}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			bad("%s is %v; valid: 0 to 1", f.name, f.v)
		}
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Keys = cmp.Or(c.Keys, DefaultKeys)
	c.Values = cmp.Or(c.Values, DefaultValues)
	return c
}

// Stats counts what a run planted, for tests.
type Stats struct {
	// Events is the number of events written.
	Events int
	// Infos counts info completions; InfoApplied those that took effect.
	Infos, InfoApplied int
	// Stale counts stale reads returned.
	Stale int
}

// Generate simulates c and returns its history: 2·c.Ops events.
func Generate(c Config) ([]history.Event, Stats, error) {
	events := make([]history.Event, 0, min(2*max(c.Ops, 0), 1<<20))
	st, err := run(c, func(e history.Event) error {
		events = append(events, e)
		return nil
	})
	return events, st, err
}

// Write simulates c and streams its history to w as JSON Lines, holding
// only the running operations in memory.
func Write(w io.Writer, c Config) (Stats, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	var buf []byte
	st, err := run(c, func(e history.Event) error {
		var err error
		if buf, err = history.AppendEvent(buf[:0], e); err != nil {
			return err
		}
		if _, err := bw.Write(buf); err != nil {
			return fmt.Errorf("regsim: writing event %d: %w", e.Index, err)
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("regsim: writing history: %w", err)
	}
	return st, nil
}

type phase uint8

const (
	idle    phase = iota // no operation running
	invoked              // invoked, not yet at its linearization point
	applied              // past its linearization point, not completed
)

type thread struct {
	proc     history.Process
	phase    phase
	f        string
	key      int64
	arg, old int64 // write's or cas's new value; cas's old value
	out      history.Value
	ok       bool  // the operation took (or, for a cas, passed) effect
	info     bool  // completes with info
	invStep  int64 // step of the invoke
	writerID int64 // this operation's id, when it writes
}

type register struct {
	cur, prev history.Value // nil: never written
	writer    int64         // id of the operation that wrote cur
}

type sim struct {
	c      Config
	rng    gen.Rand
	emit   func(history.Event) error
	st     Stats
	step   int64
	regs   []register
	done   map[int64]int64 // writer id → step its operation completed (ok)
	nextID int64
}

func run(c Config, emit func(history.Event) error) (Stats, error) {
	if err := c.Validate(); err != nil {
		return Stats{}, err
	}
	c = c.withDefaults()
	s := &sim{c: c, rng: gen.NewRand(c.Seed), emit: emit, regs: make([]register, 0), done: map[int64]int64{}}
	threads := make([]thread, c.Concurrency)
	for i := range threads {
		threads[i].proc = history.Process(i)
	}
	invokedOps, running := 0, 0
	for invokedOps < c.Ops || running > 0 {
		th := &threads[s.rng.Uint64N(uint64(len(threads)))]
		s.step++
		var err error
		switch th.phase {
		case idle:
			if invokedOps == c.Ops {
				continue
			}
			invokedOps++
			running++
			err = s.invoke(th)
		case invoked:
			s.apply(th)
		case applied:
			running--
			err = s.complete(th, history.Process(c.Concurrency))
		}
		if err != nil {
			return s.st, err
		}
	}
	return s.st, nil
}

func (s *sim) reg(k int64) *register {
	for int64(len(s.regs)) <= k {
		s.regs = append(s.regs, register{writer: -1})
	}
	return &s.regs[k]
}

func (s *sim) value() int64 { return int64(s.rng.Uint64N(uint64(s.c.Values))) }

func (s *sim) event(th *thread, t history.Type, v history.Value, errv history.Value) error {
	e := history.Event{Index: int64(s.st.Events), Process: th.proc, Type: t, F: th.f, Value: v,
		Time: s.step * 1000, Error: errv}
	s.st.Events++
	return s.emit(e)
}

func (s *sim) invoke(th *thread) error {
	*th = thread{proc: th.proc, phase: invoked, key: int64(s.rng.Uint64N(uint64(s.c.Keys))), invStep: s.step, writerID: -1}
	var v history.Value
	switch s.rng.Uint64N(3) {
	case 0:
		th.f = "read"
		v = []history.Value{th.key, nil}
	case 1:
		th.f, th.arg = "write", s.value()
		v = []history.Value{th.key, th.arg}
	default:
		th.f, th.old, th.arg = "cas", s.value(), s.value()
		v = []history.Value{th.key, []history.Value{th.old, th.arg}}
	}
	th.info = s.c.InfoRate > 0 && s.rng.Float64() < s.c.InfoRate
	return s.event(th, history.Invoke, v, nil)
}

// apply is the operation's linearization point. An operation that will
// complete with info takes effect or not by the seed.
func (s *sim) apply(th *thread) {
	th.phase = applied
	if th.info && s.rng.Uint64N(2) == 0 {
		return
	}
	r := s.reg(th.key)
	switch th.f {
	case "read":
		th.out, th.ok = r.cur, true
		if s.c.StaleRate > 0 && r.writer >= 0 {
			if at, ok := s.done[r.writer]; ok && at < th.invStep && !history.Equal(r.prev, r.cur) && s.rng.Float64() < s.c.StaleRate {
				th.out = r.prev
				s.st.Stale++
			}
		}
	case "write":
		s.write(th, r)
	case "cas":
		if v, ok := r.cur.(int64); ok && v == th.old {
			s.write(th, r)
		}
	}
}

func (s *sim) write(th *thread, r *register) {
	th.ok = true
	th.writerID = s.nextID
	s.nextID++
	if r.writer >= 0 {
		delete(s.done, r.writer)
	}
	r.prev, r.cur, r.writer = r.cur, th.arg, th.writerID
}

func (s *sim) complete(th *thread, reuse history.Process) error {
	th.phase = idle
	var v history.Value
	switch th.f {
	case "read":
		v = []history.Value{th.key, th.out}
	case "write":
		v = []history.Value{th.key, th.arg}
	default:
		v = []history.Value{th.key, []history.Value{th.old, th.arg}}
	}
	var err error
	switch {
	case th.info:
		s.st.Infos++
		if th.ok {
			s.st.InfoApplied++
		}
		err = s.event(th, history.Info, v, "timeout")
		th.proc += reuse
	case !th.ok:
		if th.f == "read" {
			return fmt.Errorf("regsim: internal: read of key %d did not apply", th.key)
		}
		err = s.event(th, history.Fail, v, "precondition failed")
	default:
		// Only the current value's writer is remembered: a stale read
		// returns the value its write replaced.
		if th.writerID >= 0 && s.regs[th.key].writer == th.writerID {
			s.done[th.writerID] = s.step
		}
		err = s.event(th, history.OK, v, nil)
	}
	return err
}
