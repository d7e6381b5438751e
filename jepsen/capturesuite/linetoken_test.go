package capturesuite

import (
	"errors"
	"slices"
	"testing"

	"github.com/ipfence/ipfence/capture/etcdline"
	"github.com/ipfence/ipfence/verify/linear"
)

// The line-token checker on concrete histories: n2 takes 10.0.1.10 at
// epoch 3 (etcd wrote it at revision 12) and turns forwarding on under the
// same token; n1 takes it back at epoch 4 (revision 15) while n2, the
// vacating node, unassigns at epoch 4; the set-up's mutation carries no
// epoch and is not a node's.
func TestLineTokens(t *testing.T) {
	base := func() ([]mutationRecord, tokenReads) {
		muts := []mutationRecord{
			{Call: "assign-secondary-ip", NIC: "eni-n1", Address: "10.0.1.10"}, // set-up
			{Call: "assign-secondary-ip", NIC: "eni-n2", Address: "10.0.1.10", Epoch: 3, LineRevision: 12},
			{Call: "ensure-forwarding-enabled", NIC: "eni-n2", Address: "10.0.1.10", Epoch: 3, LineRevision: 12},
			{Call: "assign-secondary-ip", NIC: "eni-n1", Address: "10.0.1.10", Epoch: 4, LineRevision: 15},
			{Call: "unassign-secondary-ip", NIC: "eni-n2", Address: "10.0.1.10", Epoch: 4, LineRevision: 15},
		}
		reads := tokenReads{held: map[tokenAt]etcdline.Record{
			{"10.0.1.10", 12}: {Rev: 12, EpochRecord: epochRec(3, "n2")},
			{"10.0.1.10", 15}: {Rev: 15, EpochRecord: epochRec(4, "n1")},
		}}
		return muts, reads
	}
	for _, tc := range []struct {
		name   string
		change func([]mutationRecord, *tokenReads)
		valid  linear.Verdict
		counts [5]int // tokened, untokened, checked, mismatches, regressions
		want   []string
	}{
		{"good", func([]mutationRecord, *tokenReads) {}, linear.True, [5]int{4, 0, 4, 0, 0}, nil},
		{"down", func(m []mutationRecord, r *tokenReads) {
			// Epoch 4 carries revision 11, below epoch 3's 12; etcd held
			// no record of the key yet at 11.
			m[3].LineRevision, m[4].LineRevision = 11, 11
			r.held[tokenAt{"10.0.1.10", 11}] = etcdline.Record{}
		}, linear.False, [5]int{4, 0, 4, 2, 1}, []string{
			"mutation 3 (assign-secondary-ip 10.0.1.10 on eni-n1 at epoch 4): etcd held no record of 10.0.1.10 at revision 11",
			"mutation 4 (unassign-secondary-ip 10.0.1.10 on eni-n2 at epoch 4): etcd held no record of 10.0.1.10 at revision 11",
			"10.0.1.10: epoch 4 carries revision 11, not above epoch 3's 12",
		}},
		{"off by one", func(m []mutationRecord, r *tokenReads) {
			// Revision 16 is past the write at 15: etcd held epoch 4 for
			// n1 then, written at 15, not at 16.
			m[3].LineRevision = 16
			r.held[tokenAt{"10.0.1.10", 16}] = etcdline.Record{Rev: 15, EpochRecord: epochRec(4, "n1")}
		}, linear.False, [5]int{4, 0, 4, 1, 1}, []string{
			"mutation 3 (assign-secondary-ip 10.0.1.10 on eni-n1 at epoch 4): etcd wrote no record of 10.0.1.10 at revision 16 (it held epoch 4 for n1, written at 15)",
			"mutation 4 (unassign-secondary-ip 10.0.1.10 on eni-n2): epoch 4 carries revision 15, an earlier mutation at that epoch 16",
		}},
		{"another holder", func(m []mutationRecord, r *tokenReads) {
			// etcd wrote epoch 3 at revision 12 for n3, not for n2.
			r.held[tokenAt{"10.0.1.10", 12}] = etcdline.Record{Rev: 12, EpochRecord: epochRec(3, "n3")}
		}, linear.False, [5]int{4, 0, 4, 2, 0}, []string{
			"mutation 1 (assign-secondary-ip 10.0.1.10 on eni-n2 at epoch 3): etcd's record at revision 12 is epoch 3 for n3",
			"mutation 2 (ensure-forwarding-enabled 10.0.1.10 on eni-n2 at epoch 3): etcd's record at revision 12 is epoch 3 for n3",
		}},
		{"no token", func(m []mutationRecord, _ *tokenReads) { m[2].LineRevision = 0 },
			linear.False, [5]int{3, 1, 3, 0, 0}, []string{
				"mutation 2 (ensure-forwarding-enabled 10.0.1.10 on eni-n2 at epoch 3) carries no line revision",
			}},
		{"future", func(m []mutationRecord, r *tokenReads) {
			// Revision 16 is one past etcd's last: no record at it.
			m[3].LineRevision, m[4].LineRevision = 16, 16
			r.future = map[tokenAt]bool{{"10.0.1.10", 16}: true}
		}, linear.False, [5]int{4, 0, 4, 2, 0}, []string{
			"mutation 3 (assign-secondary-ip 10.0.1.10 on eni-n1 at epoch 4): etcd had not reached revision 16 after the run",
			"mutation 4 (unassign-secondary-ip 10.0.1.10 on eni-n2 at epoch 4): etcd had not reached revision 16 after the run",
		}},
		{"etcd not read", func(_ []mutationRecord, r *tokenReads) { r.held, r.err = nil, errTest },
			linear.Unknown, [5]int{4, 0, 0, 0, 0}, []string{}},
	} {
		muts, reads := base()
		tc.change(muts, &reads)
		r := checkTokens(muts, reads)
		got, _ := r.Fields["findings"].([]string)
		counts := [5]int{r.Fields["tokened"].(int), r.Fields["untokened"].(int), r.Fields["checked"].(int), r.Fields["mismatches"].(int), r.Fields["regressions"].(int)}
		if r.Valid != tc.valid || counts != tc.counts || r.Fields["node_mutations"] != 4 || (tc.want != nil && !slices.Equal(got, tc.want)) || (tc.want == nil && len(got) != 0) {
			t.Errorf("%s: %v, counts %v (node mutations %v), findings %q; want %v, %v, %q", tc.name, r.Valid, counts, r.Fields["node_mutations"], got, tc.valid, tc.counts, tc.want)
		}
	}
}

var errTest = errors.New("etcd unreachable")
