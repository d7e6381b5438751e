//go:build !ipfence_revert_overflow && !ipfence_revert_amnesia

package federation

// The revert switches: both false in every normal build. The revert test
// (jepsen/capturesuite/revert_test.go) builds ipfence with the tag
// ipfence_revert_overflow (the door's counter bounds off) or
// ipfence_revert_amnesia (a new incarnation acts at once, as if synced,
// at records no peer holds) to
// show that the capture test catches each fault of issue 14 without its fix.
const (
	revertOverflow = false
	revertAmnesia  = false
)
