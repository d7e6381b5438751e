package gate

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/ipfence/ipfence/capture"
)

func TestCheck(t *testing.T) {
	k := capture.Key{Pool: "web", Address: netip.MustParseAddr("10.0.0.1"), Domain: "d"}
	act := func(kind capture.Kind, holder string, e capture.Epoch) *capture.Action {
		a := capture.NewAction(kind, k, "aws", "eni-x", holder, e, nil)
		return &a
	}
	cur := capture.EpochRecord{Epoch: 5, Holder: "b"}
	cases := []struct {
		a     *capture.Action
		known bool
		want  string
	}{
		{act(capture.Assign, "b", 5), true, ""},
		{act(capture.EnableForwarding, "b", 5), true, ""},
		{act(capture.Unassign, "a", 5), true, ""},
		{act(capture.DisableForwarding, "a", 5), true, ""},
		{act(capture.ProxyARPStop, "a", 5), true, ""},
		{act(capture.Assign, "b", 4), true, "epoch 4 is not the current epoch 5"},
		{act(capture.Unassign, "a", 6), true, "epoch 6 is not the current epoch 5"},
		{act(capture.Assign, "a", 5), true, "acquire for a, but the holder at epoch 5 is b"},
		{act(capture.ProxyARPStart, "a", 5), true, "acquire for a, but the holder at epoch 5 is b"},
		{act(capture.Unassign, "b", 5), true, "release by b, which is the holder again at epoch 5"},
		{act(capture.Assign, "b", 5), false, "no epoch is recorded for web/10.0.0.1@d"},
	}
	for _, c := range cases {
		if got := Check(c.a, cur, c.known); got != c.want {
			t.Errorf("%s: %q, want %q", c.a, got, c.want)
		}
	}
	if got := Check(act(capture.Assign, "a", 2), capture.EpochRecord{Epoch: 2}, true); got != "acquire for a, but the holder at epoch 2 is nobody" {
		t.Errorf("no holder: %q", got)
	}
}

func TestReady(t *testing.T) {
	if err := Ready(context.Background()); err != nil {
		t.Fatalf("no check carried: %v", err)
	}
	if err := Ready(WithReady(context.Background(), nil)); err != nil {
		t.Fatalf("nil check: %v", err)
	}
	n := 0
	ctx := WithReady(context.Background(), func() error {
		n++
		if n > 1 {
			return errors.New("pass too long")
		}
		return nil
	})
	if err := Ready(ctx); err != nil {
		t.Fatalf("first ask: %v", err)
	}
	err := Ready(ctx)
	if !errors.Is(err, ErrNotReady) || err.Error() != "not sent: this node is not ready to act: pass too long" {
		t.Fatalf("second ask: %v", err)
	}
	if n != 2 {
		t.Fatalf("check asked %d times, want 2 (never cached)", n)
	}
}
