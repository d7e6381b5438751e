package checker

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/lincheck"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
	"github.com/ipfence/ipfence/verify/report"
)

// Counts are the outcomes of some operations.
type Counts struct {
	Count int `json:"count"`
	OK    int `json:"ok"`
	Fail  int `json:"fail"`
	Info  int `json:"info"`
}

func (c *Counts) add(t history.Type) {
	c.Count++
	switch t {
	case history.OK:
		c.OK++
	case history.Fail:
		c.Fail++
	default:
		c.Info++
	}
}

// Stats counts client operations by outcome, overall and per function. It
// is invalid when some function never once succeeded, as Jepsen's is: a
// test whose writes all failed checked nothing about writes.
func Stats() Checker {
	return Func(func(_ context.Context, r *Run) Result {
		var all Counts
		byF := map[string]*Counts{}
		for _, o := range r.Ops {
			all.add(o.Type)
			c := byF[o.F]
			if c == nil {
				c = &Counts{}
				byF[o.F] = c
			}
			c.add(o.Type)
		}
		valid := linear.True
		var never []string
		out := map[string]Counts{}
		for _, f := range slices.Sorted(maps.Keys(byF)) {
			out[f] = *byF[f]
			if byF[f].OK == 0 {
				valid = linear.False
				never = append(never, f)
			}
		}
		fields := map[string]any{"count": all.Count, "ok": all.OK, "fail": all.Fail, "info": all.Info, "by_f": out}
		if len(never) > 0 {
			fields["never_ok"] = never
		}
		return Result{Valid: valid, Fields: fields}
	})
}

// ErrorCount is one distinct error the clients reported.
type ErrorCount struct {
	Error string `json:"error"`
	Count int    `json:"count"`
	// First is the first operation that reported it.
	First string `json:"first"`
}

// UnhandledErrors lists the distinct errors that came with fail and info
// completions, most frequent first. It only informs: it is always valid.
func UnhandledErrors() Checker {
	return Func(func(_ context.Context, r *Run) Result {
		byErr := map[string]*ErrorCount{}
		for _, o := range r.Ops {
			if o.Error == nil {
				continue
			}
			k := history.Show(o.Error)
			if c := byErr[k]; c != nil {
				c.Count++
				continue
			}
			byErr[k] = &ErrorCount{Error: k, Count: 1, First: fmt.Sprintf("process %s %s %s at index %d", o.Process, o.Type, o.F, o.Index)}
		}
		list := make([]ErrorCount, 0, len(byErr))
		for _, c := range byErr {
			list = append(list, *c)
		}
		slices.SortFunc(list, func(a, b ErrorCount) int {
			if a.Count != b.Count {
				return b.Count - a.Count
			}
			if a.Error < b.Error {
				return -1
			}
			return 1
		})
		return Result{Valid: linear.True, Fields: map[string]any{"errors": list}}
	})
}

// LatencyFigures are one function's latency quantiles in milliseconds.
type LatencyFigures struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Perf reports the latency quantiles of ok operations per function and
// draws latency.png, rate.png and timeline.html into the run's folder. It
// judges nothing, so it is valid unless it could not read the history.
func Perf() Checker {
	return Func(func(_ context.Context, r *Run) Result {
		q, err := report.Quantiles(r.Events)
		if err != nil {
			return Errorf("%v", err)
		}
		lat := map[string]LatencyFigures{}
		for f, l := range q {
			lat[f] = LatencyFigures{Count: l.Count, P50: ms(l.P50), P95: ms(l.P95), P99: ms(l.P99), Max: ms(l.Max)}
		}
		fields := map[string]any{"latency": lat}
		if r.Dir != "" {
			var problems []string
			if err := report.LatencyPNG(filepath.Join(r.Dir, "latency.png"), r.Events, r.Faults); err != nil {
				problems = append(problems, err.Error())
			}
			if err := report.RatePNG(filepath.Join(r.Dir, "rate.png"), r.Events, r.Faults); err != nil {
				problems = append(problems, err.Error())
			}
			var page bytes.Buffer
			if err := report.TimelineWith(&page, r.Events, report.TimelineOptions{Title: r.Name, Faults: r.Faults, Names: r.Names}); err != nil {
				problems = append(problems, err.Error())
			} else if err := os.WriteFile(filepath.Join(r.Dir, "timeline.html"), page.Bytes(), 0o644); err != nil {
				problems = append(problems, err.Error())
			}
			if len(problems) > 0 {
				// The plots are for people; failing to draw them says
				// nothing about the system, so the verdict stays true.
				fields["errors"] = problems
			}
		}
		return Result{Valid: linear.True, Fields: fields}
	})
}

// LinearOptions configure Linearizable.
type LinearOptions struct {
	// Model is the sequential specification.
	Model model.Model
	// Semantics are how the model reads the history (zero: ipfence's own).
	Semantics model.Options
	// History builds the history to check from the run; nil checks the
	// run's events as they are. Workloads use it to keep only the model's
	// operations or to merge records the system under test kept.
	History func(r *Run) ([]history.Event, error)
	// Timeout bounds the search; past it the answer is unknown.
	Timeout time.Duration
	// Page names the HTML page written into the run's folder (default
	// "linear.html").
	Page string
	// Names names the processes on the page; nil takes the run's Names.
	Names func(history.Process) string
}

// Linearizable checks the run's operations against a model with the
// linearizability checker and, when the run has a folder, writes its page.
func Linearizable(o LinearOptions) Checker {
	return Func(func(ctx context.Context, r *Run) Result {
		events := r.Events
		if o.History != nil {
			var err error
			if events, err = o.History(r); err != nil {
				return Errorf("building the history for model %s: %v", o.Model.Name(), err)
			}
		}
		sem := o.Semantics
		cm := &compiled{Model: o.Model}
		rep, err := lincheck.Check(ctx, "history", &history.History{Format: history.JSONL, Events: events},
			lincheck.Options{Model: cm, Semantics: &sem, Timeout: o.Timeout})
		if err != nil {
			return Errorf("%v", err)
		}
		if err := model.SpecError(cm.parts); err != nil {
			// The model's own code failed (a Step that panicked): the
			// search went on as if that step were impossible, so neither
			// verdict can be trusted.
			res := Errorf("model %s: %v", o.Model.Name(), err)
			if strings.Contains(err.Error(), "panicked") {
				res.Panic = err.Error()
			}
			return res
		}
		fields := map[string]any{"model": rep.Model, "ops": rep.Ops, "partitions": rep.Partitions,
			"check_ms": float64(rep.CheckNS) / 1e6, "configs": rep.Configs}
		if rep.Reason != "" {
			fields["reason"] = rep.Reason
		}
		var failure *Failure
		if rep.Failure != nil {
			fields["failure"] = rep.Failure
			op := FromLincheck(rep.Failure.Op)
			failure = &Failure{Summary: rep.Failure.Reason, Op: &op, Ops: []OpRef{op}, Linear: rep.Failure}
			if rep.Failure.Partition != "" {
				failure.Summary = rep.Failure.Partition + ": " + failure.Summary
			}
		}
		if r.Dir != "" {
			page := o.Page
			if page == "" {
				page = "linear.html"
			}
			var b bytes.Buffer
			names := o.Names
			if names == nil {
				names = r.Names
			}
			if err := rep.WriteHTMLWith(&b, lincheck.HTMLOptions{Names: names}); err != nil {
				fields["page_error"] = err.Error()
			} else if err := os.WriteFile(filepath.Join(r.Dir, page), b.Bytes(), 0o644); err != nil {
				fields["page_error"] = err.Error()
			} else {
				fields["page"] = page
			}
		}
		return Result{Valid: rep.Valid, Fields: fields, Failure: failure}
	})
}

// compiled is a model that keeps the partitions it compiled, so that the
// checker can ask their specs what went wrong, and that refuses partitions
// whose operations of unknown outcome were given a return position.
type compiled struct {
	model.Model
	parts []linear.Partition
}

func (c *compiled) Compile(ops []history.Op, opt model.Options) ([]linear.Partition, error) {
	if n, err := history.Normalize(opt.Initial); err == nil {
		// An Initial of 0 (an int) is the int64 0 reads return.
		opt.Initial = n
	}
	parts, err := c.Model.Compile(ops, opt)
	if err != nil {
		return nil, err
	}
	if err := model.CheckIntervals(ops, parts); err != nil {
		return nil, fmt.Errorf("model %s: %w", c.Model.Name(), err)
	}
	c.parts = parts
	return parts, nil
}
