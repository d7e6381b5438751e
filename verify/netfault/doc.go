// Package netfault is the network side of the harness's partition nemesis:
// which links a partition cuts (a Grudge and the shapes that build one), and
// three ways of cutting them between real processes.
//
// # Shapes
//
// A Grudge maps a node to the nodes it cannot reach. Halves, RandomHalves,
// Isolate, MajoritiesRing and Bridge build the usual partition shapes; all of
// them are symmetric (a cut link is listed in both directions) and
// deterministic, the random one through its seed, so that a run can be
// replayed from its seed.
//
// # Proxies (unprivileged, the default)
//
// A Mesh puts one Proxy on every ordered pair of nodes: node i reaches node j
// at Mesh.Addr(i, j), a loopback port that forwards to j's real address.
// Cutting the link (i, j) affects the connections i opens to j; see Mode for
// what existing and new connections see. A proxy works at the connection
// level, so a directed cut (i cannot reach j, j can reach i) means that i's
// connections to j fail while j's connections to i, replies included, still
// work: "i cannot send requests to j".
//
// # One proxy per node, senders told apart by a header (HeaderMesh)
//
// A Mesh needs node i to be configured with a different address for each
// peer. etcd cannot be: a member advertises one peer URL that every other
// member dials. But etcd's raft transport names the sender on every raft
// request (streams, pipeline and snapshot messages) in the X-Server-From
// header, the member ID in hexadecimal. A HeaderMesh puts one proxy in
// front of each node, whose address the node advertises, and reads the
// sender from the caller's bytes as they flow: it finds the line
// "\r\n<header>: <value>\r\n" (name in any case, a line split across reads
// included) and maps the value to a node through SetSender. The latest
// value a connection carried names its sender, since a pooled connection
// may carry requests of several kinds; a value learnt later through
// SetSender still identifies the connections that carried it.
//
// A connection whose sender is known is cut when the grudge cuts the link
// between the sender and the node, in either direction: one TCP connection
// carries both. A connection whose sender is not known yet, or not at all,
// is cut as soon as the grudge cuts any link into or out of its node: it
// could come from a cut peer, and a partition must never let a cut link's
// traffic through. That also cuts some requests without the header (etcd's
// /raft/probing health probes, /version, /members) between members that
// still reach each other; raft requests are not among them, as each names
// its sender, normally in the first read of its connection. When TCP splits
// the header line across reads and the connection's node has a cut link,
// the connection is cut on its first bytes; once its line is whole and its
// sender turns out not to be cut, it is reset, so the sender redials
// rather than waits for a timeout.
//
// The decision is made when a connection's first bytes arrive (the node is
// dialled only then, so a connection cut at once never reaches it), again
// whenever a request names another sender, before that request is
// forwarded, and for every open connection on Apply, Heal and SetSender.
// Cuts then do what Mode says, as on a Proxy. The sniffing sees only
// cleartext HTTP/1.1: with TLS between peers, or HTTP/2, no sender is ever
// found and every connection of a node with a cut link is cut. A body that
// happens to contain a header line is read as one; sender lines longer
// than a small bound are ignored.
//
// # Network namespaces and nftables (root)
//
// Netns gives each node its own network namespace and cuts links with
// nftables, at the packet level: a cut stalls established TCP connections
// and makes new ones time out, as a real partition does. The layout, for a
// prefix P and nodes n1..nk:
//
//	root namespace              namespace P-br            node namespaces
//	                            br0: bridge, no address
//	nf250-X =================== host: port of br0
//	10.250.X.254/24 (HostIP)    v0:   port of br0 ======== P-n1: eth0 10.250.X.1/24, lo
//	                            v1:   port of br0 ======== P-n2: eth0 10.250.X.2/24, lo
//	                            ...                        ...
//
// where === is a veth pair.
//
// X is derived from P (an FNV hash), moved to the next free value when the
// /24 is already used on the machine or claimed by another run (the name of
// the root-side link, nf250-X, is the claim: creating it fails when it
// exists). The bridge has no address and lives in its own namespace, so
// nothing of the test network but one veth appears in the root namespace.
// Nodes have no default route and only their connected /24, and forwarding
// is switched off on the root-side link, so test traffic cannot leave the
// machine; there is no NAT.
//
// The root namespace reaches every node through nf250-X: the harness's
// clients run there and talk to the nodes' IPs, and a service the nodes must
// reach (the cloud simulator) listens on HostIP. Grudges only name nodes, so
// a partition never cuts the nodes off from the harness or the simulator.
//
// Apply installs, in the namespace of every node b, one nftables table
// (inet netfault) whose input chain drops packets from each node a that
// cannot reach b. Packets are dropped on arrival rather than on departure:
// a drop in the output hook makes the sender's own send fail at once with
// EPERM (a UDP write does; TCP hides it behind retransmission), which no
// real partition does.
package netfault
