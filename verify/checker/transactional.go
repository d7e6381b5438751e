package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/linear"
)

// TransactionalOptions configure Transactional.
type TransactionalOptions struct {
	// Isolation says which workload the transactions are and which
	// consistency model they must satisfy.
	Isolation isolation.Options
	// History builds the history to check from the run; nil checks the
	// run's events as they are.
	History func(r *Run) ([]history.Event, error)
	// Timeout bounds the check; past it the searches still running report
	// unknown.
	Timeout time.Duration
}

// Transactional checks the run's transactions against a consistency model
// with the transactional checker (Elle's method). When the run has a
// folder it writes the whole result, every anomaly with its explanation,
// to anomalies.json, and each cycle found as a Graphviz file under
// cycles/.
func Transactional(o TransactionalOptions) Checker {
	return Func(func(ctx context.Context, r *Run) Result {
		events := r.Events
		if o.History != nil {
			var err error
			if events, err = o.History(r); err != nil {
				return Errorf("building the transactional history: %v", err)
			}
		}
		if o.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, o.Timeout)
			defer cancel()
		}
		res, err := isolation.Check(ctx, &history.History{Format: history.JSONL, Events: events}, o.Isolation)
		return txnResult(r, events, res, err)
	})
}

// txnResult turns the transactional checker's answer on events (those of
// run r, or built from them) into a checker's result, and writes its
// pages into the run's folder.
func txnResult(r *Run, events []history.Event, res *isolation.Result, err error) Result {
	if err != nil {
		return Errorf("%v", err)
	}
	fields := map[string]any{
		"model": res.Workload, "consistency": res.Consistency,
		"anomaly_types": res.AnomalyTypes, "not": res.Not, "also_not": res.AlsoNot,
		"txns": res.Txns, "check_ms": float64(res.CheckNS) / 1e6,
	}
	if len(res.Counts) > 0 {
		fields["counts"] = res.Counts
	}
	if len(res.Incomplete) > 0 {
		fields["incomplete"] = res.Incomplete
	}
	if r.Dir != "" {
		if err := writeAnomalies(r.Dir, res); err != nil {
			fields["page_error"] = err.Error()
		} else if len(res.AnomalyTypes) > 0 {
			fields["page"] = "anomalies.json"
		}
	}
	out := Result{Valid: res.Valid, Fields: fields}
	if res.Valid == linear.False {
		out.Failure = txnFailure(res, events)
	}
	return out
}

// writeAnomalies saves the result and one Graphviz file per cycle.
func writeAnomalies(dir string, res *isolation.Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "anomalies.json"), b, 0o644); err != nil {
		return err
	}
	for _, typ := range res.AnomalyTypes {
		for i, a := range res.Anomalies[typ] {
			dot := a.DOT()
			if dot == "" {
				continue
			}
			if err := os.MkdirAll(filepath.Join(dir, "cycles"), 0o755); err != nil {
				return err
			}
			name := filepath.Join(dir, "cycles", fmt.Sprintf("%s-%d.dot", typ, i))
			if err := os.WriteFile(name, []byte(dot), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// txnFailure explains a false transactional verdict: the anomaly types
// found, and the transactions of the first one.
func txnFailure(res *isolation.Result, events []history.Event) *Failure {
	f := &Failure{Anomalies: res.Anomalies}
	f.Summary = fmt.Sprintf("%s is ruled out by %s", res.Consistency, strings.Join(res.AnomalyTypes, ", "))
	if len(res.Not) > 0 {
		f.Summary += fmt.Sprintf(" (not %s)", strings.Join(res.Not, ", "))
	}
	ops, _, _ := history.Pair(events)
	for _, typ := range res.AnomalyTypes {
		if as := res.Anomalies[typ]; len(as) > 0 {
			for _, r := range as[0].Ops {
				f.Ops = append(f.Ops, FromIsolation(r, ops, events))
			}
			if as[0].Explanation != "" {
				f.Summary += ": " + as[0].Explanation
			}
			break
		}
	}
	if len(f.Ops) > 0 {
		f.Op = &f.Ops[0]
	}
	return f
}
