package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
)

// epochSubjects are n capture keys of one pool, as strings.
func epochSubjects(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("web/10.1.%d.%d@provider:sim:placement:g1", i/250, 1+i%250)
	}
	return out
}

// TestEmitManyOneWrite: a thousand epoch records are numbered and stamped
// as a thousand Emits would (consecutive sequence numbers and Lamport
// times), applied, and queued for every peer, with one write of the log
// for the events (and one for the block of sequence numbers); when that
// write fails, none of them is applied or queued.
func TestEmitManyOneWrite(t *testing.T) {
	n := openNode(t, filepath.Join(t.TempDir(), "f.db"), "a", nil)
	defer n.Close()
	writes := 0
	n.writeHook = func() error { writes++; return nil }
	subjects := epochSubjects(1000)
	events, err := n.EmitMany(Epoch, subjects, func(i int, e *Event) {
		e.Record = &capture.EpochRecord{Epoch: capture.Epoch(i + 1), Holder: "a"}
	})
	if err != nil {
		t.Fatal(err)
	}
	if writes != 2 {
		t.Fatalf("%d writes of the log for 1000 events, want 2 (the sequence block and the events)", writes)
	}
	for i, e := range events {
		if e.Seq != uint64(i+1) || e.Lamport != uint64(i+1) || e.Subject != subjects[i] || e.Record.Epoch != capture.Epoch(i+1) {
			t.Fatalf("event %d: %+v", i, e)
		}
		got, ok := n.state.Get("epoch|" + subjects[i])
		if !ok || got.Seq != e.Seq {
			t.Fatalf("event %d not applied: %+v", i, got)
		}
	}
	for _, p := range []string{"b", "c"} {
		if got := n.pending(p); got != 1000 {
			t.Fatalf("%d events queued for %s, want 1000", got, p)
		}
	}

	// A failing write: nothing of the batch is applied or queued.
	n.writeHook = func() error { return errors.New("disk full") }
	more := []string{"web/10.9.0.1@provider:sim:placement:g1", "web/10.9.0.2@provider:sim:placement:g1"}
	if _, err := n.EmitMany(Epoch, more, func(i int, e *Event) {
		e.Record = &capture.EpochRecord{Epoch: 1, Holder: "a"}
	}); err == nil {
		t.Fatal("EmitMany on a failing disk succeeded")
	}
	for _, s := range more {
		if _, ok := n.state.Get("epoch|" + s); ok {
			t.Fatalf("%s applied although its write failed", s)
		}
	}
	if got := n.pending("b"); got != 1000 {
		t.Fatalf("%d events queued for b after a failed write, want 1000", got)
	}
}

// TestUnreplicatedCountsTheOrigin: b publishes epoch 5 for a key, and c,
// which bumped at once to the same record, publishes it too, with a later
// Lamport time: c's event takes the register. c holds it (it wrote it
// before sending it), although b's outbox still names the register for c
// (b's own event, never acknowledged), so the record is held by a
// majority of a, b, c. Counting the outbox alone refused b's acquire.
func TestUnreplicatedCountsTheOrigin(t *testing.T) {
	n := openNode(t, filepath.Join(t.TempDir(), "f.db"), "b", nil)
	defer n.Close()
	k := mustKey(t, key1)
	rec := capture.EpochRecord{Epoch: 5, Holder: "b"}
	want := map[capture.Key]capture.EpochRecord{k: rec}
	if _, err := n.Emit(Epoch, key1, func(e *Event) { r := rec; e.Record = &r }); err != nil {
		t.Fatal(err)
	}
	if got := n.Unreplicated(want); len(got) != 1 {
		t.Fatalf("held by no peer yet: %v", got)
	}
	r := rec
	theirs := Event{Origin: "c", Seq: 1, Lamport: 100, Time: time.Now().UnixNano(), Kind: Epoch, Subject: key1, Record: &r}
	if applied, refused, err := n.Receive(Batch{From: "c", Events: []Event{theirs}}); err != nil || applied != 1 || refused != 0 {
		t.Fatalf("receive: applied %d, refused %d, %v", applied, refused, err)
	}
	if cur, _ := n.state.Get("epoch|" + key1); cur.Origin != "c" {
		t.Fatalf("the register holds %+v, want c's event", cur)
	}
	if n.pending("c") != 1 {
		t.Fatalf("b's outbox for c: %d, want its own unacknowledged event", n.pending("c"))
	}
	if got := n.Unreplicated(want); len(got) != 0 {
		t.Fatalf("c's own record counted as not held by c: %v", got)
	}
	// Another record is still refused: the check is of the record.
	if got := n.Unreplicated(map[capture.Key]capture.EpochRecord{k: {Epoch: 5, Holder: "c"}}); len(got) != 1 {
		t.Fatalf("a record the cluster does not hold passed: %v", got)
	}
}

// batchRecorder is a peer's endpoint that keeps every batch it received.
type batchRecorder struct {
	mu      sync.Mutex
	batches []Batch
	events  map[string]bool
}

func (b *batchRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var batch Batch
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.batches = append(b.batches, batch)
	for _, e := range batch.Events {
		b.events[e.Register()] = true
	}
	b.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]int{"applied": len(batch.Events), "refused": 0})
}

// TestBacklogGoesOutAtOnce: 700 epoch records (three batches) are
// delivered one batch after another, not one batch per heartbeat interval
// (an hour here), and the first batch carries the sender's heartbeat
// ahead of the epoch records: a backlog must not make a busy node look
// silent.
func TestBacklogGoesOutAtOnce(t *testing.T) {
	rec := &batchRecorder{events: map[string]bool{}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	n, err := Open(Config{Node: "a", Peers: []Peer{{Name: "b", URL: srv.URL}}, Path: filepath.Join(t.TempDir(), "f.db"), Heartbeat: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// The backlog is queued before the loop starts, so that the loop's
	// first heartbeat joins it.
	if _, err := n.EmitMany(Epoch, epochSubjects(700), func(i int, e *Event) {
		e.Record = &capture.EpochRecord{Epoch: 1, Holder: "a"}
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for n.pending("b") > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d events still pending for b: the backlog waits for the heartbeat interval", n.pending("b"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.events) != 701 {
		t.Fatalf("b received %d registers, want 700 epochs and a heartbeat", len(rec.events))
	}
	if len(rec.batches) < 3 || len(rec.batches[0].Events) != maxBatch {
		t.Fatalf("%d batches, the first of %d events", len(rec.batches), len(rec.batches[0].Events))
	}
	if first := rec.batches[0].Events[0]; first.Kind != Heartbeat {
		t.Fatalf("the first batch starts with %s %s, want the heartbeat", first.Kind, first.Subject)
	}
}
