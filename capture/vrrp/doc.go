// Package vrrp gives on-premises capture its authority: keepalived runs
// VRRP between the members of an L2 domain, and a member may capture a
// mobile address (answer ARP for it and announce it) only while keepalived
// says it is MASTER for the instance. Every other state, BACKUP, FAULT,
// STOP, and not knowing, means release: the member fails closed.
//
// keepalived only elects. It manages no address of ipfence's (see
// Config.NoVIP); it reports each transition on its notify FIFO, one line
// per event:
//
//	INSTANCE "VI_1" BACKUP 100
//	INSTANCE "VI_1" MASTER 100
//	INSTANCE "VI_1" STOP 100
//	GROUP "G1" MASTER 0
//
// ParseLine reads such a line; a Watcher reads the FIFO and tracks one
// instance's State, with each change on a channel. Config renders
// keepalived.conf and Start runs keepalived in the foreground with its own
// pid files, optionally inside a network namespace, for tests and the
// harness.
//
// What keepalived 2.2.7 (Debian 12) wrote in this package's tests: at
// start BACKUP, then MASTER or nothing more; on SIGTERM STOP (after which it
// closes the FIFO); on SIGKILL nothing, the FIFO just closes; on SIGHUP
// nothing, though it closes and reopens the FIFO. The priority is the
// instance's configured one, and 0 on GROUP lines. The Watcher's
// documentation says how it turns this into a state that is never MASTER
// by mistake.
//
// VRRP alone is weaker than cloud capture: a partition between members
// makes two masters, and both answer ARP. The package's tests show it;
// full safety would need fencing (STONITH) or quorum, which ipfence leaves
// out and detects instead.
package vrrp
