package txnsim

import "github.com/ipfence/ipfence/verify/history"

// keyState is one key's committed versions. Every committed version of a
// list is a prefix of the next (appends go to the latest version, and the
// levels that could append to an older one abort instead), so a list key
// keeps its elements once and each version is a length; a register key's
// version is its value.
type keyState struct {
	// name is the key as a history value, boxed once rather than at every
	// micro-op.
	name  history.Value
	elems []int64   // list-append: the latest list
	vers  []version // ascending commit number
	// issued counts the values handed out for this key by the workload,
	// committed or not: the next write or append gets issued+1.
	issued int64
	// refs counts the micro-ops of running transactions on this key, so
	// that a retired key is forgotten only when nothing can read it.
	refs    int32
	retired bool
	// lock is 1 + the thread holding the read-committed write lock, or 0.
	lock int32
}

// version is the state a commit installed: the list's length or the
// register's value.
type version struct {
	cn int
	v  int64
}

// at returns the version visible to a snapshot holding commits 1..snap;
// ok is false when no visible commit wrote the key.
func (ks *keyState) at(snap int) (v int64, ok bool) {
	// Snapshots are almost always recent, so search from the newest.
	for i := len(ks.vers) - 1; i >= 0; i-- {
		if ks.vers[i].cn <= snap {
			return ks.vers[i].v, true
		}
	}
	return 0, false
}

// lastCommit is the commit number of the newest version, 0 when none.
func (ks *keyState) lastCommit() int {
	if len(ks.vers) == 0 {
		return 0
	}
	return ks.vers[len(ks.vers)-1].cn
}

// install records one written value of commit cn. A transaction that
// writes a key several times installs one version: its last value, or its
// list with all its appends.
func (ks *keyState) install(cn int, appendWL bool, val int64) {
	v := val
	if appendWL {
		ks.elems = append(ks.elems, val)
		v = int64(len(ks.elems))
	}
	if n := len(ks.vers); n > 0 && ks.vers[n-1].cn == cn {
		ks.vers[n-1].v = v
		return
	}
	ks.vers = append(ks.vers, version{cn, v})
}
