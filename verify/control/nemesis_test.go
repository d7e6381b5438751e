package control

import (
	"context"
	"errors"
	"testing"

	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/nemesis"
)

// TestFaultsChecker: one fault that did not take effect makes the run
// unknown, never valid.
func TestFaultsChecker(t *testing.T) {
	l := &Ledger{}
	l.Add(Confirmation{Fault: "kill", Target: "n1", Confirmed: true, Detail: "pid 7 gone"})
	if r := FaultsChecker(l).Check(t.Context(), nil); r.Valid != linear.True || r.Fields["summary"] != "kill 1/1" {
		t.Fatalf("all confirmed: %v %v", r.Valid, r.Fields)
	}
	l.Add(Confirmation{Fault: "pause", Target: "n2", Detail: "pid 9 running"})
	r := FaultsChecker(l).Check(t.Context(), nil)
	if r.Valid != linear.Unknown || r.Fields["summary"] != "kill 1/1, pause 0/1" {
		t.Fatalf("one not confirmed: %v %v", r.Valid, r.Fields)
	}
	if missed := r.Fields["not_confirmed"].([]string); len(missed) != 1 || missed[0] != "pause n2: pid 9 running" {
		t.Fatalf("not confirmed %q", missed)
	}
}

// TestConfirmed: a fault's start and stop carry the confirmations made
// while each ran, and only those, with the fault's own error.
func TestConfirmed(t *testing.T) {
	l := &Ledger{}
	l.Add(Confirmation{Fault: "kill", Target: "n3", Confirmed: true, Detail: "earlier"})
	bad := errors.New("no such node")
	f := Confirmed(nemesis.Fault{
		Start: func(context.Context, any) (string, error) {
			l.Add(Confirmation{Fault: "pause", Target: "n1", Confirmed: true, Detail: "pid 4 stopped"})
			l.Add(Confirmation{Fault: "pause", Target: "n2", Detail: "pid 5 running"})
			return "paused n1 n2", bad
		},
		Stop: func(context.Context) (string, error) { return "resumed", nil },
	}, l)
	desc, err := f.Start(t.Context(), nil)
	if want := "paused n1 n2; pause n1 confirmed (pid 4 stopped); pause n2 NOT confirmed (pid 5 running)"; desc != want || err != bad {
		t.Fatalf("start: %q, %v; want %q", desc, err, want)
	}
	if desc, err := f.Stop(t.Context()); desc != "resumed" || err != nil {
		t.Fatalf("stop with nothing checked: %q, %v", desc, err)
	}
}
