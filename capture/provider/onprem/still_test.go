package onprem_test

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider/onprem"
	"github.com/ipfence/ipfence/internal/testonly/l2labtest"
	"github.com/ipfence/ipfence/jepsen/l2lab"
)

// The second burst asks StillHolder, with the address and the epoch of
// the Assign that made it, and is withheld when the host no longer holds
// the address there: a host whose line moved on while it was paused or
// cut off must not draw the LAN's traffic back 5 s later. While the host
// holds, the burst goes out as before.
func TestSecondBurstAsksStillHolder(t *testing.T) {
	l := l2labtest.New(t, l2lab.Options{Hosts: 1})
	const (
		count  = 3
		repeat = 400 * time.Millisecond
		slack  = 150 * time.Millisecond
	)
	var (
		mu    sync.Mutex
		moved bool
		asked []string
	)
	still := func(addr netip.Addr, epoch capture.Epoch, since time.Time) error {
		if since.IsZero() || time.Since(since) < repeat/2 {
			return fmt.Errorf("asked with the Assign's time %v, %v ago, want about %v ago", since, time.Since(since), repeat)
		}
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, fmt.Sprintf("%s@%d", addr, epoch))
		if moved {
			return errors.New("the line moved on to h2 at a newer epoch")
		}
		return nil
	}
	d := newDriver(t, l, "h1", onprem.Options{GARPCount: count, GARPRepeatAfter: repeat, GARPInterval: time.Millisecond, StillHolder: still})
	s := sniff(t, l)
	mac, addr, ctx := l.MAC("h1"), l.Address(), t.Context()
	seen := func(what string, at time.Time, want int) {
		t.Helper()
		time.Sleep(time.Until(at))
		if got := len(s.garps(mac, addr)); got != want {
			t.Fatalf("%s: %d gratuitous ARPs seen, want %d", what, got, want)
		}
	}

	r := req(l)
	r.Epoch = 7
	start := time.Now()
	if err := d.Assign(ctx, r, false); err != nil {
		t.Fatal(err)
	}
	seen("first burst", start.Add(slack), count)
	mu.Lock()
	moved = true
	mu.Unlock()
	seen("after the repeat delay, the line moved on", start.Add(repeat+slack), count)
	mu.Lock()
	got := append([]string(nil), asked...)
	moved = false
	asked = nil
	mu.Unlock()
	if want := addr.String() + "@7"; len(got) != 1 || got[0] != want {
		t.Fatalf("StillHolder asked %v, want once with %s (the first refusal ends the burst)", got, want)
	}

	r.Epoch = 9
	start = time.Now()
	if err := d.Assign(ctx, r, false); err != nil {
		t.Fatal(err)
	}
	seen("still the holder: both bursts", start.Add(repeat+slack), 3*count)
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != count {
		t.Fatalf("StillHolder asked %d times for a burst of %d, want once per frame: %v", len(asked), count, asked)
	}
	for _, a := range asked {
		if a != addr.String()+"@9" {
			t.Fatalf("StillHolder asked %v, want the second Assign's epoch 9", asked)
		}
	}
}
