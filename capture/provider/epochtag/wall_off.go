//go:build ipfence_revert_cloudwall

package epochtag

// Enforced is false in the revert test's build: drivers keep writing the
// record but refuse nothing by it (see wall_on.go).
const Enforced = false
