// Package netfault is the network side of the harness's partition nemesis:
// which links a partition cuts (a Grudge and the shapes that build one), and
// two ways of cutting them between real processes.
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
