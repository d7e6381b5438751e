//go:build ipfence_revert_overflow

package plan

// wrapEpochs is true in the revert test's build only: the pre-fix Epochs,
// which adopts any higher record and bumps with a plain +1 that wraps at
// 2^64−1. Never in a binary that ships.
const wrapEpochs = true
