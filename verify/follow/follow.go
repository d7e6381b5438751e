// Package follow checks a JSON Lines history while it is being written:
// it reads the file as it grows (history.Follow) and feeds each new event
// to an online checker (isolation.Stream, lincheck.Online), so that when
// the writer appends the end marker, or stops, only the final analysis is
// left. The answer is the one a check of the finished file gives.
package follow

import (
	"context"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/lincheck"
	"github.com/ipfence/ipfence/verify/linear"
)

// Checker is an online checker as Check drives it.
type Checker interface {
	// Feed takes the next events, in order.
	Feed(ctx context.Context, events []history.Event) error
	// Finish judges every event fed.
	Finish(ctx context.Context) (linear.Verdict, error)
}

// Transactional checks transactions against a consistency model.
type Transactional struct {
	s *isolation.Stream
	// Result is the answer, once Finish has returned.
	Result *isolation.Result
}

// NewTransactional starts a transactional check with o.
func NewTransactional(o isolation.Options) (*Transactional, error) {
	s, err := isolation.NewStream(o)
	if err != nil {
		return nil, err
	}
	return &Transactional{s: s}, nil
}

// Feed hands the events to the stream.
func (t *Transactional) Feed(_ context.Context, events []history.Event) error {
	return t.s.Feed(events...)
}

// Finish analyses the transactions.
func (t *Transactional) Finish(ctx context.Context) (linear.Verdict, error) {
	r, err := t.s.Result(ctx)
	if err != nil {
		return linear.Unknown, err
	}
	t.Result = r
	return r.Valid, nil
}

// Linear checks linearizability, on a prefix each time the history has
// doubled and on the whole at the end.
type Linear struct {
	on *lincheck.Online
	// Report is the answer, once Finish has returned.
	Report *lincheck.Report
	// Early is the first prefix found not linearizable, and when it was.
	Early func(*lincheck.Report, int)
}

// NewLinear starts a linearizability check of the history named file
// with o.
func NewLinear(file string, o lincheck.Options) *Linear {
	return &Linear{on: lincheck.NewOnline(file, history.JSONL, o)}
}

// Feed hands the events over, checking the prefix when it has doubled.
func (l *Linear) Feed(ctx context.Context, events []history.Event) error {
	had := l.on.Early()
	r, err := l.on.Feed(ctx, events...)
	if err != nil {
		// The final check says the same, on the whole history.
		return nil
	}
	if r != nil && had == nil && l.Early != nil {
		l.Early(r, len(l.on.Events()))
	}
	return nil
}

// Finish checks the whole history.
func (l *Linear) Finish(ctx context.Context) (linear.Verdict, error) {
	r, err := l.on.Result(ctx)
	if err != nil {
		return linear.Unknown, err
	}
	l.Report = r
	return r.Valid, nil
}

// Check follows the JSON Lines history at path with o, feeding c, until
// the end marker or o.Idle without growth, and returns c's verdict and
// how the history ended. A malformed line, or an event c refuses, is the
// error.
func Check(ctx context.Context, path string, o history.FollowOptions, c Checker) (linear.Verdict, history.FollowEnd, error) {
	end, err := history.Follow(ctx, path, o, func(events []history.Event) error {
		return c.Feed(ctx, events)
	})
	if err != nil {
		return linear.Unknown, end, err
	}
	v, err := c.Finish(ctx)
	return v, end, err
}
