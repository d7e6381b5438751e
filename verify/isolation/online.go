package isolation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ipfence/ipfence/verify/history"
)

// Stream checks a history that is still being written: each event fed
// goes at once into the compact form of the transactions (as CheckReader
// reads them), so that when the history ends only the analysis is left
// to do, and nothing is read twice. Its Result is the one Check gives on
// the same events, CheckNS aside. A Stream is not safe for concurrent use.
type Stream struct {
	o    Options
	b    *builder
	err  error
	done bool
}

// NewStream starts a streaming check with o, refusing options Check
// would refuse.
func NewStream(o Options) (*Stream, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &Stream{o: o, b: newBuilder(o.Workload)}, nil
}

// errStreamDone is the error of a Feed after Result: the transactions
// were closed for the analysis, so later events have nowhere to go.
var errStreamDone = errors.New("isolation: Feed after Result")

// Feed takes the next events, in the history's order. The first event
// that cannot be read (a completion with no invoke, a micro-operation of
// the wrong workload) is the error of this and every later Feed and of
// Result, the same error Check gives for that history.
func (s *Stream) Feed(events ...history.Event) error {
	if s.done {
		return errStreamDone
	}
	for i := range events {
		if s.err != nil {
			break
		}
		s.err = s.b.event(&events[i])
	}
	return s.err
}

// Txns is how many transactions have been invoked so far.
func (s *Stream) Txns() int { return len(s.b.p.txns) }

// Result analyses every transaction fed: transactions still open are
// indeterminate, as at the end of a history. It may be called once; the
// stream takes no events after it.
func (s *Stream) Result(ctx context.Context) (*Result, error) {
	if s.done {
		return nil, fmt.Errorf("isolation: Result called twice")
	}
	s.done = true
	if s.err != nil {
		return nil, s.err
	}
	start := time.Now()
	return s.b.finish().check(ctx, s.o, start), nil
}
