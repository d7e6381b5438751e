//go:build !ipfence_revert_cloudwall

package epochtag

// Enforced says whether drivers refuse an action that the epoch record
// shows stale. Built with the tag ipfence_revert_cloudwall it is false
// (wall_off.go), the behaviour from before the record, so that the
// capture test can show the wall is what makes an unfenced run valid.
const Enforced = true
