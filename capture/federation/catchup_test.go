package federation

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
)

// A node that kept its state but may have missed news — it restarted, or
// its peers went without hearing it for longer than the contact window —
// reads a majority's records before it acts: a heartbeat says a peer is
// there, not that everything it sent has arrived (a backlog of epoch
// records goes out batch after batch, heartbeats first). Here c restarts
// while 300 epoch records it has not seen (held by a and b) wait for it,
// with every batch to it cut: it is not synced until it has pulled, and
// then holds them all.
func TestNodeCatchesUpBeforeActing(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := map[string]context.CancelFunc{}
	done := map[string]chan struct{}{}
	run := func(name string) {
		rctx, stop := context.WithCancel(ctx)
		runs[name], done[name] = stop, make(chan struct{})
		go func() { c.nodes[name].Run(rctx); close(done[name]) }()
	}
	for _, n := range []string{"a", "b", "c"} {
		run(n)
	}
	eventually(t, "a, b and c sync", func() bool {
		for _, n := range c.nodes {
			if ok, _ := n.Synced(); !ok {
				return false
			}
		}
		return true
	})
	runs["c"]()
	<-done["c"]
	c.setCut("a", "c", true)
	c.setCut("b", "c", true)
	subjects := make([]string, 300)
	for i := range subjects {
		subjects[i] = capture.Key{Pool: "p", Address: netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)), Domain: "d"}.String()
	}
	if _, err := c.nodes["a"].EmitMany(Epoch, subjects, func(i int, e *Event) {
		e.Record = &capture.EpochRecord{Epoch: 7, Holder: "a"}
	}); err != nil {
		t.Fatal(err)
	}
	// a acts at a record once a majority holds it: here a and b. c then
	// needs the records of one peer besides its own log.
	eventually(t, "b holds a's records", func() bool { return c.nodes["a"].Stats()["b"].Pending == 0 })
	c.restart("c")
	n := c.nodes["c"]
	if ok, why := n.Synced(); ok || !strings.Contains(why, "started and may have missed") {
		t.Fatalf("c just restarted: synced %v (%s)", ok, why)
	}
	run("c")
	eventually(t, "c catches up", func() bool { ok, _ := n.Synced(); return ok })
	held := 0
	n.View(func(s *State) {
		for _, rec := range s.Epochs() {
			if rec.Epoch == 7 {
				held++
			}
		}
	})
	if held != len(subjects) {
		t.Fatalf("c caught up holding %d of the %d records", held, len(subjects))
	}

	// Its peers stop hearing c for longer than the window (c's batches
	// cut): once heard again, c reads their records before it acts.
	c.setCut("a", "c", false)
	c.setCut("b", "c", false)
	eventually(t, "c is covered", func() bool { return n.Covered(time.Now().Add(-time.Millisecond)) == nil })
	c.setCut("c", "a", true)
	c.setCut("c", "b", true)
	eventually(t, "c's cover runs out", func() bool { return n.Covered(time.Now()) != nil })
	c.setCut("c", "a", false)
	c.setCut("c", "b", false)
	defer func() {
		if t.Failed() {
			ok, why := n.Synced()
			n.mu.Lock()
			reason := n.contact.Reason()
			n.mu.Unlock()
			t.Logf("c: synced %v (%s), reason %q, covered %v, stats %+v", ok, why, reason, n.Covered(time.Now()), n.Stats())
		}
	}()
	eventually(t, "c is covered again and caught up", func() bool {
		n.mu.Lock()
		missed := n.contact.Reason()
		n.mu.Unlock()
		ok, _ := n.Synced()
		return ok && strings.Contains(missed, "not heard by a majority")
	})
	for _, stop := range runs {
		stop()
	}
	for _, d := range done {
		<-d
	}
	for _, n := range c.nodes {
		n.Close()
	}
}
