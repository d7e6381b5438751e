package store

import (
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/policy"
)

var (
	t0  = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	k1  = capture.Key{Pool: "web", Address: netip.MustParseAddr("10.0.0.1"), Domain: "provider:aws:placement:g"}
	k2  = capture.Key{Pool: "web", Address: netip.MustParseAddr("10.0.0.2"), Domain: "provider:aws:placement:g"}
	pol = policy.AllowAll(100)
)

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{RetryAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func assign(k capture.Key, holder, target string, e capture.Epoch) capture.Action {
	return capture.NewAction(capture.Assign, k, "aws", target, holder, e, nil)
}

func unassign(k capture.Key, holder, target string, e capture.Epoch) capture.Action {
	return capture.NewAction(capture.Unassign, k, "aws", target, holder, e, nil)
}

func states(t *testing.T, s *Store) string {
	t.Helper()
	rows, err := s.Rows(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, r := range rows {
		parts = append(parts, string(r.Kind[:3])+"@"+string(rune('0'+r.Epoch))+"="+string(r.State))
	}
	return strings.Join(parts, " ")
}

func TestEpochsPersistAndNeverGoDown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ep, changed, err := s.ReconcileEpochs(map[capture.Key]string{k1: "a", k2: ""}, nil)
	if err != nil || ep[k1] != (capture.EpochRecord{Epoch: 1, Holder: "a"}) || len(changed) != 1 {
		t.Fatalf("first reconcile: %v %v %v", ep, changed, err)
	}
	// A peer's lower record is ignored, a higher one adopted.
	if ch, _ := s.ObserveEpochs(map[capture.Key]capture.EpochRecord{k1: {Epoch: 0, Holder: "z"}}); len(ch) != 0 {
		t.Fatalf("a lower epoch was adopted")
	}
	if ch, _ := s.ObserveEpochs(map[capture.Key]capture.EpochRecord{k1: {Epoch: 7, Holder: "b"}}); len(ch) != 1 {
		t.Fatalf("a higher epoch was not adopted")
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ep, changed, err = s.ReconcileEpochs(map[capture.Key]string{k1: "a"}, map[capture.Key]capture.EpochRecord{k1: {Epoch: 3, Holder: "a"}})
	if err != nil || ep[k1] != (capture.EpochRecord{Epoch: 8, Holder: "a"}) || len(changed) != 1 {
		t.Fatalf("after restart: %v %v %v", ep, changed, err)
	}
	// Nothing to change: no write, same records.
	ep2, changed, _ := s.ReconcileEpochs(map[capture.Key]string{k1: "a"}, nil)
	if len(changed) != 0 || ep2[k1] != ep[k1] {
		t.Fatalf("steady reconcile changed %v", changed)
	}
}

func TestImportGateAndDedupe(t *testing.T) {
	s := open(t)
	if _, _, err := s.ReconcileEpochs(map[capture.Key]string{k1: "a", k2: "b"}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := s.Import([]capture.Action{
		assign(k1, "a", "eni-a", 1),   // current
		assign(k1, "a", "eni-a", 1),   // duplicate key
		assign(k2, "a", "eni-a", 1),   // a is not the holder of k2
		unassign(k2, "b", "eni-b", 1), // b is the holder: not a release
		assign(k1, "a", "eni-a", 0),   // old epoch
		unassign(k2, "a", "eni-a", 1), // a vacating k2: fine
	}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Imported != 2 || res.Existing != 1 || res.Stale != 3 {
		t.Fatalf("import %+v", res)
	}
	for k, why := range res.Reasons {
		if why == "" {
			t.Errorf("%s stale without a reason", k)
		}
	}
	if got := states(t, s); got != "ass@1=pending una@1=pending" {
		t.Fatalf("rows %s", got)
	}
}

func TestLifecycle(t *testing.T) {
	s := open(t)
	s.ReconcileEpochs(map[capture.Key]string{k1: "a"}, nil)
	a := assign(k1, "a", "eni-a", 1)
	if _, err := s.Import([]capture.Action{a}, t0); err != nil {
		t.Fatal(err)
	}
	// Claiming a pending row is refused; approving twice too.
	if _, err := s.Claim(a.IdempotencyKey, t0); err == nil || !strings.Contains(err.Error(), "is pending, not approved") {
		t.Fatalf("claim pending: %v", err)
	}
	if err := s.Approve(a.IdempotencyKey, "op"); err != nil {
		t.Fatal(err)
	}
	if err := s.Approve(a.IdempotencyKey, "op"); err == nil {
		t.Fatal("approved twice")
	}
	if err := s.Approve("nope", "op"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("approve unknown: %v", err)
	}
	row, err := s.Claim(a.IdempotencyKey, t0.Add(time.Second))
	if err != nil || row.State != capture.Running || row.Attempts != 1 || row.ApprovedBy != "op" {
		t.Fatalf("claim: %+v %v", row, err)
	}
	// From the claim on, the node may hold the address.
	if held, _ := s.Held(); held[k1] != (capture.Held{Key: k1, Provider: "aws", Target: "eni-a", Epoch: 1}) {
		t.Fatalf("held after claim: %+v", held)
	}
	// Stuck running: requeued only after the timeout.
	if q, _ := s.Requeue(t0.Add(30*time.Second), time.Minute); len(q) != 0 {
		t.Fatalf("requeued early: %v", q)
	}
	if q, _ := s.Requeue(t0.Add(62*time.Second), time.Minute); len(q) != 1 {
		t.Fatalf("not requeued: %v", q)
	}
	if _, err := s.Claim(a.IdempotencyKey, t0.Add(63*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(a.IdempotencyKey, Outcome{Err: errors.New("throttled")}, t0.Add(64*time.Second)); err != nil {
		t.Fatal(err)
	}
	row, _ = s.Row(a.IdempotencyKey)
	if row.State != capture.Failed || row.Reason != "throttled" || row.Attempts != 2 {
		t.Fatalf("failed row %+v", row)
	}
	if held, _ := s.Held(); held[k1].Confirmed || held[k1].Target != "eni-a" {
		t.Fatalf("a failed acquire must stay maybe held: %+v", held)
	}
	// A failed row is re-armed by an import once RetryAfter has passed.
	res, _ := s.Import([]capture.Action{a}, t0.Add(90*time.Second))
	if res.Rearmed != 0 || res.Existing != 1 {
		t.Fatalf("re-armed too early: %+v", res)
	}
	res, _ = s.Import([]capture.Action{a}, t0.Add(125*time.Second))
	if res.Rearmed != 1 {
		t.Fatalf("not re-armed: %+v", res)
	}
	if ap, _ := s.AutoApprove(pol, t0, 0); len(ap) != 1 {
		t.Fatalf("auto-approve %v", ap)
	}
	s.Claim(a.IdempotencyKey, t0)
	if err := s.Complete(a.IdempotencyKey, Outcome{Observed: "on eni-a"}, t0); err != nil {
		t.Fatal(err)
	}
	held, _ := s.Held()
	if h := held[k1]; h.Target != "eni-a" || h.Epoch != 1 || h.Provider != "aws" || !h.Confirmed {
		t.Fatalf("held %+v", held)
	}
	if err := s.Complete(a.IdempotencyKey, Outcome{}, t0); err == nil {
		t.Fatal("completed a succeeded row")
	}
}

func TestCompleteReleases(t *testing.T) {
	s := open(t)
	s.ReconcileEpochs(map[capture.Key]string{k1: "a"}, nil)
	run := func(a capture.Action) {
		t.Helper()
		if _, err := s.Import([]capture.Action{a}, t0); err != nil {
			t.Fatal(err)
		}
		if err := s.Approve(a.IdempotencyKey, "op"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(a.IdempotencyKey, t0); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(a.IdempotencyKey, Outcome{}, t0); err != nil {
			t.Fatal(err)
		}
	}
	run(assign(k1, "a", "eni-a", 1))
	s.ReconcileEpochs(map[capture.Key]string{k1: "b"}, nil)
	// A release of another NIC does not end the capture on eni-a; the
	// release of eni-a does, and removes its marker.
	other := unassign(k1, "a", "eni-z", 2)
	mine := unassign(k1, "a", "eni-a", 2)
	s.ApplyMarkers([]capture.Action{other, mine}, nil)
	run(other)
	if held, _ := s.Held(); len(held) != 1 {
		t.Fatalf("a release of another NIC ended the capture: %v", held)
	}
	run(mine)
	if held, _ := s.Held(); len(held) != 0 {
		t.Fatalf("the release did not end the capture: %v", held)
	}
	if ms, _ := s.Markers(); len(ms) != 0 {
		t.Fatalf("markers left: %v", ms)
	}
}

func TestClaimGateAndReject(t *testing.T) {
	s := open(t)
	s.ReconcileEpochs(map[capture.Key]string{k1: "a"}, nil)
	a := assign(k1, "a", "eni-a", 1)
	s.Import([]capture.Action{a}, t0)
	s.Approve(a.IdempotencyKey, "op")
	s.ObserveEpochs(map[capture.Key]capture.EpochRecord{k1: {Epoch: 2, Holder: "b"}})
	row, err := s.Claim(a.IdempotencyKey, t0)
	if !errors.Is(err, ErrStale) || row.State != capture.Skipped || !strings.Contains(row.Reason, "stale at execute: epoch 1 is not the current epoch 2") {
		t.Fatalf("stale claim: %+v %v", row, err)
	}
	if ap, _ := s.Approved(); len(ap) != 0 {
		t.Fatalf("a skipped row is still approved: %v", ap)
	}
	b := assign(k1, "b", "eni-b", 2)
	s.Import([]capture.Action{b}, t0)
	if err := s.Reject(b.IdempotencyKey, "alice", t0); err != nil {
		t.Fatal(err)
	}
	if row, _ := s.Row(b.IdempotencyKey); row.State != capture.Skipped || row.Reason != "rejected by alice" {
		t.Fatalf("rejected row %+v", row)
	}
	if err := s.Reject(b.IdempotencyKey, "alice", t0); err == nil {
		t.Fatal("rejected a skipped row")
	}
}

func TestAutoApprovePolicyAndCap(t *testing.T) {
	s := open(t)
	s.ReconcileEpochs(map[capture.Key]string{k1: "a", k2: "a"}, nil)
	s.Import([]capture.Action{assign(k1, "a", "eni-a", 1), assign(k2, "a", "eni-a", 1),
		capture.NewAction(capture.EnableForwarding, k2, "aws", "eni-a", "a", 1, nil)}, t0)
	if ap, _ := s.AutoApprove(policy.Policy{}, t0, 0); len(ap) != 0 {
		t.Fatalf("the default policy approved %v", ap)
	}
	narrow := policy.Policy{Auto: true, Providers: []string{"aws"}, Kinds: []capture.Kind{capture.Assign},
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/32")}, MaxPerRun: 10}
	ap, _ := s.AutoApprove(narrow, t0, 0)
	if len(ap) != 1 || !strings.Contains(ap[0], "10.0.0.2") || !strings.Contains(ap[0], "assign-secondary-ip") {
		t.Fatalf("narrow policy approved %v", ap)
	}
	capped := policy.AllowAll(1)
	if ap, _ := s.AutoApprove(capped, t0, 0); len(ap) != 1 || !strings.Contains(ap[0], "10.0.0.1") {
		t.Fatalf("capped policy approved %v (want the oldest one)", ap)
	}
}

func TestDeprovisionHold(t *testing.T) {
	s := open(t)
	s.ReconcileEpochs(map[capture.Key]string{k1: "b"}, nil)
	rel := unassign(k1, "a", "eni-a", 1)
	s.Import([]capture.Action{rel}, t0)
	if ap, _ := s.AutoApprove(pol, t0.Add(9*time.Second), 10*time.Second); len(ap) != 0 {
		t.Fatalf("a release was approved inside the hold: %v", ap)
	}
	if ap, _ := s.AutoApprove(pol, t0.Add(10*time.Second), 10*time.Second); len(ap) != 1 {
		t.Fatalf("a release was not approved after the hold: %v", ap)
	}
}

func TestSweep(t *testing.T) {
	s := open(t)
	s.ReconcileEpochs(map[capture.Key]string{k1: "a"}, nil)
	a := assign(k1, "a", "eni-a", 1)
	b := capture.NewAction(capture.EnableForwarding, k1, "aws", "eni-a", "a", 1, nil)
	s.Import([]capture.Action{a, b}, t0)
	s.Approve(b.IdempotencyKey, "op")
	if sw, _ := s.Sweep(t0); len(sw) != 0 {
		t.Fatalf("swept current rows %v", sw)
	}
	s.ReconcileEpochs(map[capture.Key]string{k1: ""}, nil)
	sw, _ := s.Sweep(t0)
	if len(sw) != 2 {
		t.Fatalf("swept %v", sw)
	}
	if got := states(t, s); got != "ass@1=skipped ens@1=skipped" {
		t.Fatalf("rows %s", got)
	}
}

func TestBadFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A file from a newer ipfence is refused, not misread.
	db, _ := bolt.Open(path, 0o600, nil)
	db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put([]byte("schema"), []byte{9}) })
	db.Close()
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "schema 9") {
		t.Fatalf("newer schema: %v", err)
	}
	// A corrupt epoch record is an error naming the key.
	path = filepath.Join(t.TempDir(), "c.db")
	s, _ = Open(path, Options{})
	s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bEpochs).Put(keyBytes(k1), []byte{0x80}) })
	if _, err := s.Epochs(); err == nil || !strings.Contains(err.Error(), k1.String()) {
		t.Fatalf("corrupt record: %v", err)
	}
	s.Close()
	if _, err := Open(filepath.Join(t.TempDir(), "missing", "x.db"), Options{}); err == nil {
		t.Fatal("opened a file in a missing folder")
	}
}
