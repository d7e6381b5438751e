//go:build ipfence_revert_amnesia && !ipfence_revert_overflow

package federation

// The revert test's build in which a new incarnation is synced at once
// and acts at records no peer holds yet (Unreplicated is empty), as
// before the amnesia fix; never shipped.
const (
	revertOverflow = false
	revertAmnesia  = true
)
