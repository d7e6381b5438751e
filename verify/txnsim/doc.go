// Package txnsim simulates a transactional key-value database at a chosen
// isolation level and writes the history a Jepsen-style test of it would
// record, for the tests and benchmarks of transactional consistency
// checkers. It is deterministic: the same Config gives the same events,
// byte for byte, on any platform.
//
// # Histories
//
// Every operation is a transaction: F is "txn" and the value is a list of
// micro-ops [f key value], as Elle reads them. In list-append f is
// "append" (value: an int64) or "r"; in rw-register f is "w" (value: an
// int64) or "r". Keys are int64. An invoke's reads have value nil; an ok
// completion repeats the micro-ops with each read's value filled in: the
// whole list ([]history.Value of int64, [] when empty) in list-append, the
// int64 or nil (never written) in rw-register. A read after the
// transaction's own write to the key sees that write.
//
// A fail completion means the database aborted the transaction: it
// certainly took no effect. Its value is the invoke's and its error a
// string saying why (a write-write conflict, a dangerous structure, a lock
// wait timeout). An info completion (error "timeout") comes with
// probability InfoRate, whatever the database decided: the transaction
// committed or not, by the seed, and when it did, it committed before the
// info completion and later transactions see its writes. A process that
// completes with info is not reused: its thread continues as process +
// Concurrency. Threads 0..Concurrency-1 start as processes of the same
// numbers, so process mod Concurrency is the thread.
//
// Event indexes run from 0; times are nanoseconds on a virtual clock that
// strictly increases from event to event.
//
// # Workloads
//
// A transaction has 1 to MaxTxnLen micro-ops (uniformly); each is a read
// or a write with even odds, on a key chosen uniformly among the Keys
// active keys, so read-only, write-only and mixed transactions all occur
// and a transaction may use a key more than once. The values written to a
// key are 1, 2, 3... in invoke order: unique per key, and increasing. When
// a key has been handed MaxWritesPerKey writes it retires (no later
// invoke uses it) and a fresh key, numbered after every earlier one,
// takes its place, so lists stay short however long the run. Writes of
// failed transactions leave gaps in a key's values.
//
// # Databases
//
// The database is a multi-version store on one virtual clock, and a run is
// a discrete-event simulation: Concurrency threads each invoke a
// transaction, run its micro-ops over some virtual time, commit or abort
// it, and complete it. "Commits before an event" below means commits that
// happened earlier in that single order.
//
// In every level: a read returns a state some set of committed
// transactions produced, plus the transaction's own earlier writes; a
// transaction's writes are installed at one instant, its commit, which
// lies between its invoke and its completion, and install one version per
// key; so no history contains G0 (write cycles), G1a (aborted reads), G1b
// (intermediate reads) or G1c (cycles of write and read dependencies), and
// in list-append every read of a key is a prefix of the key's final list
// (appends always go to the key's latest version). The levels differ in
// which state reads see and which commits are refused.
//
// serializable — strict serializability. Every micro-op of a transaction
// is evaluated at its commit instant against the state all earlier commits
// left. It never aborts (no fail completions). Histories have none of G0,
// G1a, G1b, G1c, G-single, G2-item, G2, lost update, internal inconsistency,
// or real-time violations: the commit order is a serialization that
// respects real time. A checker must accept them as strict serializable.
//
// ssi — serializable snapshot isolation. A transaction's snapshot is every
// commit made before its invoke; its micro-ops are evaluated at its commit
// instant against the snapshot and its own writes. It aborts at commit (1)
// when a transaction that committed after its snapshot wrote a key it
// writes (first committer wins), and (2) when committing it would give any
// committed transaction, itself included, both an incoming and an outgoing
// rw-antidependency with transactions concurrent with it (two committed
// transactions are concurrent when each committed after the other's
// snapshot). Rule (2) is the dangerous-structure rule of Cahill's SSI
// applied conservatively and with full knowledge of every committed
// transaction's reads and writes; by Fekete et al.'s theorem, every
// serialization cycle of a snapshot-isolation history has such a
// transaction, so the committed transactions, info ones included, are
// serializable: no G0, G1a, G1b, G1c, G-single, G2-item, G2, lost update
// or internal inconsistency. Every transaction sees all those that
// completed before its invoke. Whether the serialization order also
// respects real time is not promised: check ssi histories as serializable,
// not as strict serializable.
//
// si — snapshot isolation, the strong kind: a transaction's snapshot is
// every commit made before its invoke, its micro-ops are evaluated at its
// commit instant against the snapshot and its own writes, and it aborts
// when a transaction that committed after its snapshot wrote a key it
// writes (first committer wins). Histories have no G0, G1a, G1b, G1c,
// G-single (read skew), G-nonadjacent, lost update or internal
// inconsistency: every cycle of the serialization graph has two adjacent
// rw-antidependencies. Write skew (G2-item: two concurrent transactions
// each read a key the other writes) and other G2 cycles do happen, in any
// run of a few hundred transactions over a few keys with several
// processes. A read never misses a transaction that completed before its
// transaction's invoke.
//
// read-committed — each micro-op runs at its own instant inside the
// transaction's span. A read returns the latest committed state of the key
// at that instant, plus the transaction's own earlier writes. A write
// takes the key's write lock until the transaction ends; a write that finds
// the key locked by another transaction waits, and after a few tries
// aborts the transaction (error "lock wait timeout"). Writes are installed
// at commit, with no check of what was read. Histories have no G0, G1a,
// G1b, G1c, and no stale reads (a read sees every transaction that
// completed before it began). They do have lost updates (two committed
// transactions read the same version of a key and both write it),
// non-repeatable reads (one transaction reads a key twice, without writing
// it in between, and gets different values; Elle reports these as
// internal anomalies), read skew (G-single), write skew (G2-item) and G2.
//
// prefix — consistent prefix with stale snapshots (generalized snapshot
// isolation). Like si, but a transaction's snapshot is the first s commits,
// with s drawn uniformly between c−Concurrency and c (not below 0), where
// c is the number of commits made before its invoke; first committer wins
// against every commit after that snapshot. Histories have no G0, G1a,
// G1b, G1c, G-single, G-nonadjacent, lost update or internal
// inconsistency, and each key's history alone is serializable. They have
// write skew (G2-item) as si does, and they violate real time: a
// transaction may miss transactions that completed before its invoke,
// its own process's earlier ones included (no read-your-writes or
// monotonic reads across transactions), so a strict or strong-session
// checker must reject them.
package txnsim
