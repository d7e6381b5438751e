package lincheck

import (
	"context"
	"fmt"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// Online checks a history that is still being written. Linearizability
// has no cheap incremental form (an operation still open may be placed
// anywhere after its invoke), so it checks the history so far each time
// it has doubled, from minPrefix events on: a prefix that is not
// linearizable proves the whole is not (the operations open at its end
// are indeterminate there, which admits every way the whole can
// complete them), so a violation is known early, at a total cost of at
// most twice the final check. The final check, Result, is Check on every
// event fed: the same answer an offline check gives.
type Online struct {
	file   string
	format history.Format
	opt    Options
	events []history.Event
	next   int // the length at which the next prefix is checked
	early  *Report
}

// minPrefix is the shortest prefix checked early: below it a check is
// cheaper than the bookkeeping.
const minPrefix = 1024

// NewOnline starts an online check of the history named file (for the
// report), whose events are in format (it sets the model's semantics,
// as Check's History.Format does).
func NewOnline(file string, format history.Format, opt Options) *Online {
	return &Online{file: file, format: format, opt: opt, next: minPrefix}
}

// Feed takes the next events, in order, and when the history has
// doubled since the last prefix checked, checks it under ctx. The
// returned report is non-nil when a prefix was found not linearizable
// (now or earlier): the whole history cannot be either. An error says
// the prefix could not be paired or compiled; the final check will
// report it too, so Feed only returns it.
func (o *Online) Feed(ctx context.Context, events ...history.Event) (*Report, error) {
	o.events = append(o.events, events...)
	if o.early != nil || len(o.events) < o.next {
		return o.early, nil
	}
	o.next = 2 * len(o.events)
	r, err := o.checkPrefix(ctx)
	if err != nil {
		return nil, err
	}
	if r.Valid == linear.False {
		o.early = r
	}
	return o.early, nil
}

// checkPrefix checks the events fed so far, with the invokes still open
// left indeterminate, as Pair leaves an invoke with no completion.
func (o *Online) checkPrefix(ctx context.Context) (*Report, error) {
	prefix := o.events[:len(o.events):len(o.events)]
	r, err := Check(ctx, o.file, &history.History{Format: o.format, Events: prefix}, o.opt)
	if err != nil {
		return nil, fmt.Errorf("checking the first %d events: %w", len(prefix), err)
	}
	return r, nil
}

// Early returns the report of the prefix found not linearizable, or nil
// when none was.
func (o *Online) Early() *Report { return o.early }

// Events returns the events fed so far; the caller must not change them.
func (o *Online) Events() []history.Event { return o.events }

// Result checks every event fed, as Check does.
func (o *Online) Result(ctx context.Context) (*Report, error) {
	return Check(ctx, o.file, &history.History{Format: o.format, Events: o.events}, o.opt)
}
