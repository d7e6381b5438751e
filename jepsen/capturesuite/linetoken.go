package capturesuite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/etcdline"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/linear"
)

// The etcd line's fencing token (issue 18 item 1). A provider call cannot
// sit inside etcd's transaction, so a node on the etcd line sends with
// each call the revision of the epoch record it confirmed in etcd right
// before it (X-Ipfence-Line-Revision), and the simulator records it with
// the mutation. After the run the harness reads etcd at each revision the
// mutations carried: the token is honest only if etcd wrote, at exactly
// that revision, the record of the mutation's epoch naming the node that
// acted (for an acquire).

// tokenAt names a record of the line as etcd held it: an address's key at
// a revision.
type tokenAt struct {
	Address string
	Rev     int64
}

// tokenReads are etcd's answers for the revisions the mutations carried.
type tokenReads struct {
	// held is the key's record as of each revision read (the zero
	// Record when the key did not exist then).
	held map[tokenAt]etcdline.Record
	// future are the revisions etcd had not reached when read: no
	// record was ever written at them.
	future map[tokenAt]bool
	// err says why etcd could not be read.
	err error
}

// nodeMutation says whether m was a node's action: the journal's calls
// carry their epoch, the harness's own (the set-up) none.
func nodeMutation(m mutationRecord) bool { return m.Epoch > 0 }

// acquires says whether the call m records was made for the node whose
// NIC it names, so that the record it acted at names that node as holder:
// a release (unassign, forwarding off) is made by the vacating node at
// the epoch of the record naming the next holder.
func acquires(m mutationRecord) bool {
	return m.Call == string(capture.Assign) || m.Call == string(capture.EnableForwarding)
}

// readTokens reads from etcd, through a member the harness reaches
// directly, the key of every address a node mutation acted on at every
// revision such mutations carried. etcd keeps past revisions until
// compacted, and the test's members never compact.
func (l *etcdLine) readTokens(ctx context.Context, muts []mutationRecord) tokenReads {
	out := tokenReads{held: map[tokenAt]etcdline.Record{}, future: map[tokenAt]bool{}}
	var eps []string
	for _, m := range l.members.Members() {
		eps = append(eps, "http://"+l.members.ClientAddr(m))
	}
	cl := &etcdline.Client{Endpoints: eps, Prefix: etcdPrefix, Node: "harness"}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	snap, err := cl.Snapshot(ctx)
	if err != nil {
		out.err = fmt.Errorf("reading the keys of the line: %w", err)
		return out
	}
	keys := map[string]capture.Key{}
	for k := range snap.Records {
		if other, ok := keys[k.Address.String()]; ok {
			out.err = fmt.Errorf("address %s is in two keys of the line, %s and %s: a mutation names only its address", k.Address, other, k)
			return out
		}
		keys[k.Address.String()] = k
	}
	for _, m := range muts {
		at := tokenAt{m.Address, m.LineRevision}
		if !nodeMutation(m) || m.LineRevision <= 0 || m.Address == "" {
			continue
		}
		if _, done := out.held[at]; done || out.future[at] {
			continue
		}
		k, ok := keys[m.Address]
		if !ok {
			out.held[at] = etcdline.Record{} // no key: nothing was held
			continue
		}
		r, err := cl.GetAt(ctx, k, m.LineRevision)
		if errors.Is(err, etcdline.ErrFutureRevision) {
			out.future[at] = true
			continue
		}
		if err != nil {
			out.err = fmt.Errorf("reading %s at revision %d: %w", k, m.LineRevision, err)
			return out
		}
		out.held[at] = r
	}
	return out
}

// lineTokens checks the tokens of the nodes' mutations (--epochs etcd):
// every node mutation carries a line revision; per address the revision
// rises with the epoch (a later epoch never carries a lower or equal one,
// one epoch always the same); and etcd wrote the address's key at exactly
// that revision, with the mutation's epoch and, for an acquire, the
// mutation's node as holder.
func lineTokens(col *collected) checker.Checker {
	return checker.Func(func(_ context.Context, _ *checker.Run) checker.Result {
		return checkTokens(col.mutations, col.tokens)
	})
}

// checkTokens is lineTokens on its inputs.
func checkTokens(muts []mutationRecord, reads tokenReads) checker.Result {
	var findings []string
	nodeMuts, tokened, untokened, checked, mismatches, regressions := 0, 0, 0, 0, 0, 0
	byEpoch := map[string]map[uint64]int64{} // address → epoch → revision
	for i, m := range muts {
		if !nodeMutation(m) {
			continue
		}
		nodeMuts++
		if m.LineRevision <= 0 {
			untokened++
			findings = append(findings, fmt.Sprintf("mutation %d (%s %s on %s at epoch %d) carries no line revision", i, m.Call, m.Address, m.NIC, m.Epoch))
			continue
		}
		tokened++
		if byEpoch[m.Address] == nil {
			byEpoch[m.Address] = map[uint64]int64{}
		}
		if prev, ok := byEpoch[m.Address][m.Epoch]; ok && prev != m.LineRevision {
			regressions++
			findings = append(findings, fmt.Sprintf("mutation %d (%s %s on %s): epoch %d carries revision %d, an earlier mutation at that epoch %d", i, m.Call, m.Address, m.NIC, m.Epoch, m.LineRevision, prev))
		} else if !ok {
			byEpoch[m.Address][m.Epoch] = m.LineRevision
		}
		if reads.err != nil {
			continue
		}
		at := tokenAt{m.Address, m.LineRevision}
		if reads.future[at] {
			checked++
			mismatches++
			findings = append(findings, fmt.Sprintf("mutation %d (%s %s on %s at epoch %d): etcd had not reached revision %d after the run", i, m.Call, m.Address, m.NIC, m.Epoch, m.LineRevision))
			continue
		}
		got, ok := reads.held[at]
		if !ok {
			continue // not read: counted below as unchecked
		}
		checked++
		holder := nodeOf(m.NIC)
		switch {
		case got.Rev != m.LineRevision:
			mismatches++
			if got.Rev == 0 {
				findings = append(findings, fmt.Sprintf("mutation %d (%s %s on %s at epoch %d): etcd held no record of %s at revision %d", i, m.Call, m.Address, m.NIC, m.Epoch, m.Address, m.LineRevision))
			} else {
				findings = append(findings, fmt.Sprintf("mutation %d (%s %s on %s at epoch %d): etcd wrote no record of %s at revision %d (it held epoch %d for %s, written at %d)", i, m.Call, m.Address, m.NIC, m.Epoch, m.Address, m.LineRevision, got.Epoch, got.Holder, got.Rev))
			}
		case uint64(got.Epoch) != m.Epoch || (acquires(m) && got.Holder != holder):
			mismatches++
			findings = append(findings, fmt.Sprintf("mutation %d (%s %s on %s at epoch %d): etcd's record at revision %d is epoch %d for %s", i, m.Call, m.Address, m.NIC, m.Epoch, m.LineRevision, got.Epoch, got.Holder))
		}
	}
	// Across epochs: in epoch order, each revision above the one before.
	for _, a := range slices.Sorted(maps.Keys(byEpoch)) {
		epochs := slices.Sorted(maps.Keys(byEpoch[a]))
		for j := 1; j < len(epochs); j++ {
			lo, hi := byEpoch[a][epochs[j-1]], byEpoch[a][epochs[j]]
			if hi <= lo {
				regressions++
				findings = append(findings, fmt.Sprintf("%s: epoch %d carries revision %d, not above epoch %d's %d", a, epochs[j], hi, epochs[j-1], lo))
			}
		}
	}
	valid := linear.True
	if len(findings) > 0 {
		valid = linear.False
	}
	fields := map[string]any{
		"node_mutations": nodeMuts, "tokened": tokened, "untokened": untokened,
		"checked": checked, "mismatches": mismatches, "regressions": regressions,
		"findings": first(findings, 10), "findings_total": len(findings),
	}
	if reads.err != nil {
		valid = linear.Unknown
		fields["read_error"] = reads.err.Error()
	} else if checked < tokened {
		valid = linear.Unknown
		fields["read_error"] = fmt.Sprintf("%d tokens not read from etcd", tokened-checked)
	}
	if len(findings) > 0 {
		valid = linear.False
	}
	return checker.Result{Valid: valid, Fields: fields}
}
