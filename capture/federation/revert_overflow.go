//go:build ipfence_revert_overflow && !ipfence_revert_amnesia

package federation

// The revert test's build with the door's counter bounds off; never
// shipped.
const (
	revertOverflow = true
	revertAmnesia  = false
)
