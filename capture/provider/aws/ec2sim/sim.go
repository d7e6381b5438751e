// Package ec2sim fakes EC2 beside the AWS driver, as httptest sits beside
// net/http, and is the core of the cloud simulator (`ipfence-verify cloudsim`)
// that the Azure and OCI fakes (armsim, ocisim) build on: NICs in one
// subnet that carry
// secondary private IPs and a source/dest check flag, served over the EC2
// Query API (the wire format the unmodified AWS SDK speaks) and over a JSON
// admin API that injects faults and shows the authoritative record of every
// mutation. The capture daemon's AWS driver talks to it as it would to EC2,
// and the harness reads the record to check that no address was ever on two
// NICs and that no stale action took effect.
//
// The placement of secondary addresses, forwarding (source/dest check off),
// asynchronous visibility and the record are memory.Provider's: the
// simulator adds what EC2 shows around them (MACs, primary IPs, instances),
// the Query dialect, faults, and persistence across restarts.
//
// # The EC2 Query API
//
// A call is a form-encoded POST / (or a GET / with the same parameters in
// the query string) with Action and Version=2016-11-15, signed: any
// Authorization header will do. The answer is EC2's XML in the namespace
// http://ec2.amazonaws.com/doc/2016-11-15/ with a requestId. The actions
// and their parameters (every action also takes DryRun):
//
//	AssignPrivateIpAddresses           NetworkInterfaceId, PrivateIpAddress.N, AllowReassignment
//	UnassignPrivateIpAddresses         NetworkInterfaceId, PrivateIpAddress.N
//	DescribeNetworkInterfaces          NetworkInterfaceId.N, Filter.N.Name, Filter.N.Value.M,
//	                                   MaxResults, NextToken
//	ModifyNetworkInterfaceAttribute    NetworkInterfaceId, SourceDestCheck.Value
//	DescribeNetworkInterfaceAttribute  NetworkInterfaceId, Attribute=sourceDestCheck
//
// The filters are addresses.private-ip-address (primary or secondary),
// private-ip-address (primary), network-interface-id,
// attachment.instance-id, mac-address and subnet-id, matched exactly.
// Semantics are the provider contract's: an address is on at most one NIC,
// a reassignment moves it atomically, an unassign touches only the NIC
// named, and a call is applied whole or not at all. Assigning a NIC its own
// primary IP succeeds and changes nothing; another NIC's primary never
// moves. The headers HeaderEpoch and HeaderIdempotencyKey are recorded with
// every mutation a call applies, and HeaderAddress with a forwarding
// change.
//
// Errors, as <Response><Errors><Error><Code>…</Code><Message>…</Message>
// </Error></Errors><RequestID>…</RequestID></Response>:
//
//	400 InvalidIPAddress.InUse              "Address <ip> is in use by <nic>": assign without
//	                                        AllowReassignment=true, or of another NIC's primary
//	400 InvalidParameterValue               "Some of the specified addresses are not assigned to
//	                                        interface <nic>"; an address outside the subnet; a
//	                                        malformed parameter, Version or X-Ipfence-* header (the
//	                                        message names the parameter and the value)
//	400 InvalidNetworkInterfaceID.NotFound  "The networkInterface ID '<nic>' does not exist"
//	400 MissingParameter                    "The request must contain the parameter <name>"
//	400 UnknownParameter                    a parameter the action does not take
//	400 InvalidAction                       an action the simulator does not serve
//	401 MissingAuthenticationToken          no Authorization header
//	412 DryRunOperation                     DryRun=true on a call that would have been tried
//	500 InternalError, 503 Unavailable,
//	503 RequestLimitExceeded                injected (see Faults); 500 InternalError also when a
//	                                        change could not be saved, and 503 Unavailable when
//	                                        the server stops while a call waits
package ec2sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/memory"
)

// bgctx is the context of the model's calls on the provider: once a call's
// checks have passed, a client that goes away must not cut it short
// between two of its addresses.
var bgctx = context.Background()

// DefaultSubnet is the subnet of a simulator whose Config names none.
var DefaultSubnet = netip.MustParsePrefix("10.0.0.0/24")

// reservedLow is how many addresses at the start of a subnet AWS keeps for
// itself (network, router, DNS, future use), so primary IPs start after
// them. The simulator still lets callers assign them as secondaries: the
// provider contract suite uses 10.0.0.1–3.
const reservedLow = 4

// Limits on a subnet: AWS allows /16 to /28.
const (
	minSubnetBits = 16
	maxSubnetBits = 28
)

// maxNICIDLen bounds a NIC id; EC2's are 21 characters.
const maxNICIDLen = 64

// NIC is a simulated NIC's identity: what EC2 reports about it besides its
// secondary addresses and its source/dest check, fixed when the simulator
// is first created. Each NIC is attached to its own instance.
type NIC struct {
	ID         string     `json:"id"`
	MAC        string     `json:"mac"`
	PrimaryIP  netip.Addr `json:"primaryIp"`
	InstanceID string     `json:"instanceId"`
}

// NICState is a NIC as the simulator shows it now.
type NICState struct {
	NIC
	// SecondaryIPs are the visible secondary addresses, ascending.
	SecondaryIPs []netip.Addr `json:"secondaryIps"`
	// SourceDestCheck is on for a new NIC: it does not forward.
	SourceDestCheck bool `json:"sourceDestCheck"`
}

// newNICs gives each id a deterministic identity: a MAC and an instance id
// derived from the id alone, and the primary IP at the id's position among
// the first addresses of the subnet that AWS does not reserve.
func newNICs(ids []string, subnet netip.Prefix) []NIC {
	base := subnet.Addr()
	for range reservedLow {
		base = base.Next()
	}
	out := make([]NIC, len(ids))
	for i, id := range ids {
		h := hash64("mac:" + id)
		var mac [8]byte
		binary.BigEndian.PutUint64(mac[:], h)
		out[i] = NIC{
			ID: id,
			// 02: a locally administered unicast address, as no
			// vendor's.
			MAC:        fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", mac[3], mac[4], mac[5], mac[6], mac[7]),
			PrimaryIP:  base,
			InstanceID: fmt.Sprintf("i-0%016x", hash64("instance:"+id)),
		}
		base = base.Next()
	}
	return out
}

// hash64 derives the ids and MACs the simulator makes up, so that the same
// NIC id gets the same ones on every run.
func hash64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// checkSubnet rejects a subnet EC2 could not have: not IPv4, not a network
// address, or outside /16 to /28.
func checkSubnet(p netip.Prefix) error {
	switch {
	case !p.IsValid() || !p.Addr().Is4():
		return fmt.Errorf("subnet %s is not an IPv4 prefix", p)
	case p.Masked() != p:
		return fmt.Errorf("subnet %s is not a network address (did you mean %s?)", p, p.Masked())
	case p.Bits() < minSubnetBits || p.Bits() > maxSubnetBits:
		return fmt.Errorf("subnet %s: the prefix length must be /%d to /%d", p, minSubnetBits, maxSubnetBits)
	}
	return nil
}

// checkNICIDs rejects ids that would be ambiguous on the wire or in the
// admin API: empty, repeated, too long, or holding spaces or controls.
func checkNICIDs(ids []string, subnet netip.Prefix) error {
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		switch {
		case id == "":
			return errors.New("empty NIC id")
		case len(id) > maxNICIDLen:
			return fmt.Errorf("NIC id %.20q…: longer than %d bytes", id, maxNICIDLen)
		case strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f || r == ',' }):
			return fmt.Errorf("NIC id %q: spaces, commas and control characters are not allowed", id)
		case seen[id]:
			return fmt.Errorf("NIC id %q appears twice", id)
		}
		seen[id] = true
	}
	// Every NIC needs a primary IP between the reserved addresses and
	// the broadcast address.
	if room := (1 << (32 - subnet.Bits())) - reservedLow - 1; len(ids) > room {
		return fmt.Errorf("%d NICs do not fit in subnet %s, which has room for %d", len(ids), subnet, room)
	}
	return nil
}

// reason is why the model refused a call.
type reason int

const (
	reasonUnknownNIC      reason = iota + 1 // the call named a NIC that does not exist
	reasonInUse                             // the address is on another NIC and may not move
	reasonNotAssigned                       // unassign: the address is not on the NIC
	reasonOutsideSubnet                     // the address is not in the subnet
	reasonReserved                          // the subnet's network or broadcast address
	reasonPrimaryUnassign                   // unassign of the NIC's primary IP
)

// refusal is the model's answer to a call it does not carry out; nothing
// has changed. The Query dialect turns it into an EC2 error.
type refusal struct {
	reason reason
	nic    string     // the NIC the call named
	addr   netip.Addr // the first address at fault, if any
	other  string     // the NIC holding addr, for reasonInUse
}

func (r *refusal) Error() string {
	switch r.reason {
	case reasonUnknownNIC:
		return fmt.Sprintf("NIC %s does not exist", r.nic)
	case reasonInUse:
		return fmt.Sprintf("%s is on %s", r.addr, r.other)
	case reasonNotAssigned:
		return fmt.Sprintf("%s is not on %s", r.addr, r.nic)
	case reasonOutsideSubnet:
		return fmt.Sprintf("%s is outside the subnet", r.addr)
	case reasonReserved:
		return fmt.Sprintf("%s is the subnet's network or broadcast address", r.addr)
	case reasonPrimaryUnassign:
		return fmt.Sprintf("%s is the primary IP of %s", r.addr, r.nic)
	}
	return "refused"
}

// model is the simulated subnet: the NICs' identities and, in p, their
// secondary addresses and forwarding. It is not safe for concurrent use:
// the Server calls it under its lock, with p's clock frozen for the call,
// so that checking every address of a call and applying them happen at one
// instant and a call is applied whole or not at all.
type model struct {
	subnet netip.Prefix
	nics   []NIC // in id order
	byID   map[string]int
	// primary maps each primary IP to its NIC: primaries never move.
	primary map[netip.Addr]string
	p       *memory.Provider
}

func newModel(subnet netip.Prefix, nics []NIC, p *memory.Provider) *model {
	m := &model{
		subnet: subnet, nics: slices.Clone(nics), p: p,
		byID: make(map[string]int, len(nics)), primary: make(map[netip.Addr]string, len(nics)),
	}
	slices.SortFunc(m.nics, func(a, b NIC) int { return strings.Compare(a.ID, b.ID) })
	for i, n := range m.nics {
		m.byID[n.ID] = i
		m.primary[n.PrimaryIP] = n.ID
	}
	return m
}

// stamp is what a mutation carries besides its NIC and address: the
// fencing token it was issued under, and for a forwarding change the
// address it was made for.
type stamp struct {
	epoch capture.Epoch
	key   string
	addr  netip.Addr
	// epochs and keys are the lists of a call with one action per
	// address (HeaderEpoch); a single value applies to every address.
	epochs []capture.Epoch
	keys   []string
	// rev and revs are the etcd line revision (HeaderLineRevision), one
	// or one per address as epochs; zero when none was sent.
	rev  int64
	revs []int64
}

// at is the stamp of a call's i-th address.
func (st stamp) at(i int) stamp {
	one := stamp{epoch: st.epoch, key: st.key, addr: st.addr, rev: st.rev}
	if len(st.epochs) > 1 && i < len(st.epochs) {
		one.epoch = st.epochs[i]
	}
	if len(st.keys) > 1 && i < len(st.keys) {
		one.key = st.keys[i]
	}
	if len(st.revs) > 1 && i < len(st.revs) {
		one.rev = st.revs[i]
	}
	return one
}

func (m *model) request(nic string, a netip.Addr, st stamp) provider.Request {
	return provider.Request{NIC: nic, Address: a, Epoch: st.epoch, IdempotencyKey: st.key, LineRevision: st.rev}
}

// usable reports why a is not an address a NIC of the subnet may carry.
func (m *model) usable(nic string, a netip.Addr) *refusal {
	if !m.subnet.Contains(a) {
		return &refusal{reason: reasonOutsideSubnet, nic: nic, addr: a}
	}
	if a == m.subnet.Addr() || a == broadcast(m.subnet) {
		return &refusal{reason: reasonReserved, nic: nic, addr: a}
	}
	return nil
}

// broadcast is the last address of an IPv4 prefix.
func broadcast(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	v := binary.BigEndian.Uint32(b[:]) | (1<<(32-p.Bits()) - 1)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// assign puts every address on nic, moving those on other NICs when
// reassign is set. Every address is checked before any is applied, so a
// refused call changes nothing. An address that is nic's own primary IP is
// skipped: EC2 accepts it and nothing changes.
func (m *model) assign(nic string, addrs []netip.Addr, reassign bool, st stamp) error {
	i, ok := m.byID[nic]
	if !ok {
		return &refusal{reason: reasonUnknownNIC, nic: nic}
	}
	todo := make([]netip.Addr, 0, len(addrs))
	at := make([]int, 0, len(addrs))
	for j, a := range addrs {
		if r := m.usable(nic, a); r != nil {
			return r
		}
		if a == m.nics[i].PrimaryIP {
			continue
		}
		// A primary IP is never moved, reassignment or not.
		if owner, ok := m.primary[a]; ok {
			return &refusal{reason: reasonInUse, nic: nic, addr: a, other: owner}
		}
		if h := m.p.Holder(a); h != "" && h != nic && !reassign {
			return &refusal{reason: reasonInUse, nic: nic, addr: a, other: h}
		}
		todo = append(todo, a)
		at = append(at, j)
	}
	for j, a := range todo {
		if err := m.p.Assign(bgctx, m.request(nic, a, st.at(at[j])), reassign); err != nil {
			// The checks above are the provider's own, against the
			// same frozen instant; reaching this is a bug.
			return fmt.Errorf("cloudsim: assign %s to %s after the checks passed: %w", a, nic, err)
		}
	}
	return nil
}

// unassign takes every address off nic. EC2 refuses the whole call when
// any address is not on the NIC, and then nothing changes; another NIC's
// copy of an address is never touched.
func (m *model) unassign(nic string, addrs []netip.Addr, st stamp) error {
	i, ok := m.byID[nic]
	if !ok {
		return &refusal{reason: reasonUnknownNIC, nic: nic}
	}
	for _, a := range addrs {
		if a == m.nics[i].PrimaryIP {
			return &refusal{reason: reasonPrimaryUnassign, nic: nic, addr: a}
		}
		if m.p.Holder(a) != nic {
			return &refusal{reason: reasonNotAssigned, nic: nic, addr: a}
		}
	}
	for j, a := range addrs {
		if err := m.p.Unassign(bgctx, m.request(nic, a, st.at(j))); err != nil {
			return fmt.Errorf("cloudsim: unassign %s from %s after the checks passed: %w", a, nic, err)
		}
	}
	return nil
}

// setSourceDestCheck turns nic's source/dest check on or off: off means
// the NIC forwards.
func (m *model) setSourceDestCheck(nic string, check bool, st stamp) error {
	if _, ok := m.byID[nic]; !ok {
		return &refusal{reason: reasonUnknownNIC, nic: nic}
	}
	if err := m.p.SetForwarding(bgctx, m.request(nic, st.addr, st), !check); err != nil {
		return fmt.Errorf("cloudsim: source/dest check of %s: %w", nic, err)
	}
	return nil
}

// states returns every NIC as visible now, in id order.
func (m *model) states() []NICState {
	placed := m.p.NICs()
	out := make([]NICState, len(placed))
	for i, pl := range placed {
		// p was built with exactly the model's NICs, so both lists are
		// the same ids in the same order.
		out[i] = NICState{NIC: m.nics[i], SecondaryIPs: pl.Addresses, SourceDestCheck: !pl.Forwarding}
	}
	return out
}
