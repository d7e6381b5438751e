//go:build linux

package netfault

// NftTable is the nftables table a partition owns on a node ("inet
// netfault"), the one Netns.Apply replaces.
const NftTable = nftTable

// NftScript returns the nft script (for nft -f -) that gives a node the
// partition Netns.Apply gives it: its table replaced, in one transaction,
// by one whose input chain drops packets from each address in from; with
// none, the table removed. It is for nodes reached another way than
// through a Netns, such as machines reached over SSH.
func NftScript(from []string) string { return rules(from) }
