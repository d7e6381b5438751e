package control

import (
	"context"
	"fmt"
	"strings"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/nemesis"
)

// Confirmed wraps f so that each start and stop adds to its description
// what the checks made of it, as l recorded them while it ran ("kill n2
// confirmed (pid 812 gone)"): each confirmation lands in the history
// beside its fault, where a reader of the run looks for it.
func Confirmed(f nemesis.Fault, l *Ledger) nemesis.Fault {
	note := func(from int) string {
		all := l.All()
		if from >= len(all) {
			return ""
		}
		var parts []string
		for _, c := range all[from:] {
			word := "confirmed"
			if !c.Confirmed {
				word = "NOT confirmed"
			}
			parts = append(parts, fmt.Sprintf("%s %s %s (%s)", c.Fault, c.Target, word, c.Detail))
		}
		return "; " + strings.Join(parts, "; ")
	}
	return nemesis.Fault{
		Start: func(ctx context.Context, v any) (string, error) {
			from := len(l.All())
			desc, err := f.Start(ctx, v)
			return desc + note(from), err
		},
		Stop: func(ctx context.Context) (string, error) {
			from := len(l.All())
			desc, err := f.Stop(ctx)
			return desc + note(from), err
		},
	}
}

// FaultsChecker makes a run whose faults did not all take effect unknown
// rather than valid: what the clients saw was not tested against the
// faults the history names. Its fields say how many of each kind were
// confirmed (summary, as Ledger.Summary) and which were not
// (not_confirmed), for the closing note.
func FaultsChecker(l *Ledger) checker.Checker {
	return checker.Func(func(context.Context, *checker.Run) checker.Result {
		missed := []string{}
		for _, c := range l.All() {
			if !c.Confirmed {
				missed = append(missed, fmt.Sprintf("%s %s: %s", c.Fault, c.Target, c.Detail))
			}
		}
		res := checker.Result{Valid: linear.True, Fields: map[string]any{"summary": l.Summary(), "not_confirmed": missed}}
		if len(missed) > 0 {
			res.Valid = linear.Unknown
		}
		return res
	})
}
