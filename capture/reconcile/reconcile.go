// Package reconcile is a node's level-triggered loop: every tick and every
// wake-up it reads its inputs from scratch, computes where each address
// should be, reconciles epochs, plans, persists release intents, imports
// through the gate, sweeps stale rows, approves by policy and executes. It
// never acts on an edge: running a pass twice does nothing the first did
// not, and a pass interrupted anywhere is finished by the next.
//
// Time is an input: a pass reads the clock once and hands that instant to
// everything below it.
package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/executor"
	"github.com/ipfence/ipfence/capture/placement"
	"github.com/ipfence/ipfence/capture/plan"
	"github.com/ipfence/ipfence/capture/policy"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/store"
)

// Config wires a loop.
type Config struct {
	// Node is this node's name.
	Node  string
	Store *store.Store
	// Pools returns the current pools with their members' drain and
	// liveness state; it is read at the start of every pass.
	Pools func() []capture.Pool
	// Seen returns the epoch records learned from peers; nil for none.
	Seen func() map[capture.Key]capture.EpochRecord
	// Preempt, when set, makes placement sticky: an address's current
	// holder keeps it while eligible, unless a member ahead of it may
	// preempt it (see placement.Desired). nil means plain priority.
	Preempt placement.Preempt
	// Providers maps provider references to drivers.
	Providers map[string]provider.Provider
	// Policy approves rows without an operator.
	Policy policy.Policy
	// Execute makes the pass run approved rows.
	Execute bool
	// MaxExecute caps the rows one pass executes; 0 means no cap.
	MaxExecute int
	// RunningTimeout is how long a row may stay running before it is
	// requeued; 0 means one minute.
	RunningTimeout time.Duration
	// DeprovisionHold delays the approval of releases (see
	// store.AutoApprove).
	DeprovisionHold time.Duration
	// Interval is the tick; 0 means five seconds.
	Interval time.Duration
	// Clock is the time input; nil means time.Now.
	Clock func() time.Time
	// Wake triggers a pass between ticks (a subscription to the event bus).
	Wake <-chan struct{}
	// OnPass, when set, receives every pass's report.
	OnPass func(Report, error)
	// OnEpochs, when set, is told the keys whose epoch record the pass
	// moved, right after it moved them and before anything is executed at
	// the new epochs: the daemon publishes them to its peers then.
	OnEpochs func(changed []capture.Key, epochs map[capture.Key]capture.EpochRecord)
	// Ready, when set, is called at the start of every pass, before any
	// input is read; the function it returns is the executor's Ready for
	// the pass (see executor.Executor.Ready). Taking the snapshot first
	// means that whatever made the node ready (news from its peers) is in
	// the inputs the pass plans from.
	Ready func() func() error
	// ReadyExempt, when set, names the action kinds that run whether or
	// not Ready allows (see executor.Executor.ReadyExempt).
	ReadyExempt func(capture.Kind) bool
	// LineRevision, when set, is the executor's token of a key on the
	// etcd epoch line (see executor.Executor.LineRevision).
	LineRevision func(capture.Key, capture.Epoch) (rev int64, onLine bool)
	// Hooks interrupt a pass at chosen points, for crash tests.
	Hooks Hooks
}

// Hooks are failure points: a hook that returns an error ends the pass
// there, as a crash would.
type Hooks struct {
	// AfterMarkers runs once the release intents are persisted, before the
	// plan is imported.
	AfterMarkers func() error
	// AfterClaim runs once a row is running, before the provider call.
	AfterClaim func(capture.Row) error
	// AfterCall runs after the provider call, before its outcome is
	// recorded.
	AfterCall func(capture.Row) error
}

// Report is what one pass did.
type Report struct {
	Now time.Time
	// Desired maps every key this node tracks to its desired holder.
	Desired map[capture.Key]string
	// Epochs are the records after the pass; Changed the keys whose record
	// the pass moved.
	Epochs   map[capture.Key]capture.EpochRecord
	Changed  []capture.Key
	Plan     plan.Plan
	Import   store.ImportResult
	Swept    []string
	Requeued []string
	Approved []string
	Exec     executor.Result
}

// Loop is one node's reconcile loop.
type Loop struct {
	cfg  Config
	exec *executor.Executor
}

// New returns a loop.
func New(cfg Config) *Loop {
	if cfg.RunningTimeout == 0 {
		cfg.RunningTimeout = time.Minute
	}
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Loop{cfg: cfg, exec: &executor.Executor{Store: cfg.Store, Providers: cfg.Providers, AfterClaim: cfg.Hooks.AfterClaim, AfterCall: cfg.Hooks.AfterCall, LineRevision: cfg.LineRevision}}
}

// Run runs passes every Interval and on every Wake until ctx ends.
func (l *Loop) Run(ctx context.Context) error {
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		rep, err := l.Pass(ctx)
		if l.cfg.OnPass != nil {
			l.cfg.OnPass(rep, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-l.cfg.Wake:
		}
	}
}

// Pass runs one pass at the clock's current time.
func (l *Loop) Pass(ctx context.Context) (Report, error) { return l.PassAt(ctx, l.cfg.Clock()) }

// PassAt runs one pass with now as the time input.
func (l *Loop) PassAt(ctx context.Context, now time.Time) (Report, error) {
	rep := Report{Now: now}
	st := l.cfg.Store
	// Each pass has its executor of its own, with this pass's readiness:
	// the loop's is never changed under a pass still running.
	exec := *l.exec
	exec.Ready, exec.ReadyExempt = nil, l.cfg.ReadyExempt
	if l.cfg.Ready != nil {
		exec.Ready = l.cfg.Ready()
	}
	pools := l.cfg.Pools()
	held, err := st.Held()
	if err != nil {
		return rep, fmt.Errorf("reading held captures: %w", err)
	}
	markers, err := st.Markers()
	if err != nil {
		return rep, fmt.Errorf("reading markers: %w", err)
	}

	// Placement. A key this node holds or meant to release that left the
	// config is desired by nobody, so that it is released.
	var seen map[capture.Key]capture.EpochRecord
	if l.cfg.Seen != nil {
		seen = l.cfg.Seen()
	}
	// Placement sees the records the epoch reconcile is about to adopt:
	// a peer's newer record names the holder that stickiness keeps.
	current, err := st.Epochs()
	if err != nil {
		return rep, fmt.Errorf("reading epochs: %w", err)
	}
	for k, r := range seen {
		if r.Epoch > current[k].Epoch {
			current[k] = r
		}
	}
	rep.Desired = placement.Desired(pools, l.cfg.Node, current, l.cfg.Preempt)
	for k := range held {
		if _, ok := rep.Desired[k]; !ok {
			rep.Desired[k] = ""
		}
	}
	for _, m := range markers {
		if _, ok := rep.Desired[m.Key]; !ok {
			rep.Desired[m.Key] = ""
		}
	}
	if rep.Epochs, rep.Changed, err = st.ReconcileEpochs(rep.Desired, seen); err != nil {
		return rep, fmt.Errorf("reconciling epochs: %w", err)
	}
	if l.cfg.OnEpochs != nil && len(rep.Changed) > 0 {
		l.cfg.OnEpochs(rep.Changed, rep.Epochs)
	}

	rep.Plan = plan.Compute(plan.Input{Node: l.cfg.Node, Pools: pools, Epochs: rep.Epochs, Held: held, Markers: markers})
	if err := st.ApplyMarkers(rep.Plan.Markers, rep.Plan.Drop); err != nil {
		return rep, fmt.Errorf("persisting markers: %w", err)
	}
	if h := l.cfg.Hooks.AfterMarkers; h != nil {
		if err := h(); err != nil {
			return rep, err
		}
	}
	if rep.Import, err = st.Import(rep.Plan.Actions(), now); err != nil {
		return rep, err
	}
	if rep.Swept, err = st.Sweep(now); err != nil {
		return rep, fmt.Errorf("sweeping the journal: %w", err)
	}
	if rep.Requeued, err = st.Requeue(now, l.cfg.RunningTimeout); err != nil {
		return rep, fmt.Errorf("requeueing running rows: %w", err)
	}
	if rep.Approved, err = st.AutoApprove(l.cfg.Policy, now, l.cfg.DeprovisionHold); err != nil {
		return rep, fmt.Errorf("approving: %w", err)
	}
	if l.cfg.Execute {
		if rep.Exec, err = exec.Run(ctx, now, l.cfg.MaxExecute); err != nil {
			return rep, fmt.Errorf("executing: %w", err)
		}
	}
	return rep, nil
}
