//go:build !ipfence_revert_overflow

package plan

// wrapEpochs is false: Epochs bounds every epoch by MaxEpoch. Only the
// revert test's build (tag ipfence_revert_overflow, see
// jepsen/capturesuite/revert_test.go) sets it, to show that the capture test
// catches the epoch overflow of issue 14 when the bound is gone.
const wrapEpochs = false
