// Package ocisim is the OCI dialect of ipfence's cloud simulator: VNICs in
// one subnet carrying secondary private IPs and a skip-source/dest-check
// flag, served over the REST API of OCI's Networking service (the paths,
// JSON, headers and errors the unmodified OCI Go SDK's
// core.VirtualNetworkClient speaks), with the fault knobs of the EC2
// dialect (capture/provider/aws/ec2sim) and throttling.
//
// The placement of secondary addresses, forwarding, late visibility and
// the record of mutations are memory.Provider's, as in the EC2 dialect, so
// the single-holder and fence checkers read this simulator's Mutations
// unchanged. The simulator adds what OCI shows around them: private IP
// objects with OCIDs and ETags, conditional writes, retry tokens, request
// signatures.
//
// # The API
//
// Under /20160918 (the SDK's base path):
//
//	GET    /privateIps/{id}         GetPrivateIp; etag header
//	GET    /privateIps              ListPrivateIps: subnetId and ipAddress (one address),
//	                                subnetId alone, or vnicId; limit (1–1000) and page
//	                                (opc-next-page)
//	PUT    /privateIps/{id}         UpdatePrivateIp: vnicId moves a secondary private IP to
//	                                another VNIC of the subnet; displayName, hostnameLabel and
//	                                freeformTags change the object; if-match
//	POST   /privateIps              CreatePrivateIp: vnicId and ipAddress; opc-retry-token
//	DELETE /privateIps/{id}         DeletePrivateIp; if-match
//	GET    /vnics/{id}              GetVnic; etag header
//	PUT    /vnics/{id}              UpdateVnic: skipSourceDestCheck (forwarding); if-match
//
// Every object carries an ETag that changes with every change to it; a
// write with if-match (other than "*") that does not name the current ETag
// is refused with 412 NoEtagMatch and changes nothing. A create with an
// opc-retry-token answers a repeat of the same token with the first
// answer, for 24 hours, without doing anything again; the same token with
// another body is 409 Conflict. Requests must carry OCI's HTTP signature:
// the Authorization header's shape, the covered headers, the date and the
// body hash are checked, and the RSA signature too when Config.Keys holds
// the signer's public key.
//
// The control plane (conflicts, ETags, OCIDs) is strongly consistent;
// with Faults.RemapDelay the placement that reads report (a private IP's
// vnicId, whether a read finds it at all) follows memory.Provider's visible
// state, later. The ipfence headers (HeaderEpoch, HeaderIdempotencyKey,
// HeaderAddress) are recorded with every mutation, as in the EC2 dialect.
//
// Errors are JSON {"code": …, "message": …} with an opc-request-id:
//
//	400 InvalidParameter           a malformed or unsupported parameter or body; an address
//	                               outside the subnet; moving or deleting a primary private IP
//	400 MissingParameter           a required parameter is missing
//	401 NotAuthenticated           no signature, or one of the wrong shape, date or hash
//	404 NotAuthorizedOrNotFound    no such private IP or VNIC (also a vnicId in a body)
//	409 Conflict                   the address is in use; a retry token reused with another body
//	412 NoEtagMatch                if-match names an ETag that is not the object's
//	429 TooManyRequests            injected, or the token bucket is empty
//	500 InternalServerError,
//	503 ServiceUnavailable         injected; 503 also when the server stops while a call waits
//
// What it does not do: VLANs, IPv6, reserved public IPs, more than one
// subnet, compartments and IAM (any signed caller may do anything), the
// bulk operations, and persistence across restarts.
package ocisim

import (
	"context"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/memory"
	"github.com/ipfence/ipfence/internal/simfault"
)

// Headers a caller may send with a mutation; the simulator records their
// values with every mutation the call applies. OCI ignores them.
const (
	// HeaderEpoch carries the action's capture epoch in decimal.
	HeaderEpoch = "X-Ipfence-Epoch"
	// HeaderIdempotencyKey carries the action's idempotency key.
	HeaderIdempotencyKey = "X-Ipfence-Idempotency-Key"
	// HeaderAddress carries the address an UpdateVnic is made for, which
	// OCI's call does not name: the forwarding mutation's (informational)
	// address.
	HeaderAddress = "X-Ipfence-Address"
	// HeaderLineRevision carries the etcd revision of the epoch record
	// the node confirmed before the call (its fencing token on the etcd
	// epoch line), positive and in decimal; absent off the etcd line.
	HeaderLineRevision = "X-Ipfence-Line-Revision"
)

// BasePath is the API version prefix of every OCI Networking path.
const BasePath = "/20160918"

// The operations the simulator serves, as the SDK names them.
const (
	OpGetPrivateIp    = "GetPrivateIp"
	OpListPrivateIps  = "ListPrivateIps"
	OpUpdatePrivateIp = "UpdatePrivateIp"
	OpCreatePrivateIp = "CreatePrivateIp"
	OpDeletePrivateIp = "DeletePrivateIp"
	OpGetVnic         = "GetVnic"
	OpUpdateVnic      = "UpdateVnic"
)

var operations = []string{OpCreatePrivateIp, OpDeletePrivateIp, OpGetPrivateIp, OpGetVnic, OpListPrivateIps, OpUpdatePrivateIp, OpUpdateVnic}

// DefaultSubnet is the subnet of a simulator whose Config names none.
var DefaultSubnet = netip.MustParsePrefix("10.0.0.0/24")

// Bounds the simulator keeps.
const (
	maxVNICIDLen      = 255
	maxRetryToken     = 64 // OCI's limit on opc-retry-token
	maxIdempotencyKey = 1024
	maxBody           = 1 << 20
	retryTokenTTL     = 24 * time.Hour
	maxRetryTokens    = 1 << 16
	defaultListLimit  = 100
	maxListLimit      = 1000
	maxDisplayName    = 255
)

// Config configures a simulator.
type Config struct {
	// VNICs are the VNIC OCIDs (any ids without spaces or commas will
	// do). Each gets a primary private IP from the top of the subnet.
	VNICs []string
	// Subnet is the subnet's CIDR; the zero value means DefaultSubnet.
	Subnet netip.Prefix
	// SubnetID is the subnet's OCID; empty means one derived from Subnet.
	SubnetID string
	// Keys, when not empty, are the public keys by keyId whose RSA
	// signatures are verified; a request signed by another key is
	// refused. When empty only the signature's shape is checked.
	Keys map[string]*rsa.PublicKey
	// Clock gives the time of mutations and of late visibility; nil
	// means time.Now.
	Clock func() time.Time
	// Seed seeds the random numbers of injected errors and the jitter of
	// Latency's waits.
	Seed uint64
	// Latency is OCI's own pace (see Realistic), in force under whatever
	// faults are injected, which add to it; the zero value answers at
	// once.
	Latency simfault.Profile
}

// VNIC is a simulated VNIC's identity, fixed when the simulator is made.
type VNIC struct {
	ID          string     `json:"id"`
	MAC         string     `json:"mac"`
	PrimaryIP   netip.Addr `json:"primaryIp"`
	PrimaryIPID string     `json:"primaryIpId"`
}

// PrivateIP is a private IP object of the control plane.
type PrivateIP struct {
	ID       string            `json:"id"`
	Address  netip.Addr        `json:"address"`
	VNIC     string            `json:"vnic"`
	Primary  bool              `json:"primary"`
	ETag     string            `json:"etag"`
	Created  time.Time         `json:"created"`
	Display  string            `json:"displayName"`
	Hostname string            `json:"hostnameLabel,omitempty"`
	Freeform map[string]string `json:"freeformTags,omitempty"`
	version  uint64
}

// Server is the simulator; its ServeHTTP serves the API and the admin
// API. It is safe for concurrent use.
type Server struct {
	subnet   netip.Prefix
	subnetID string
	keys     map[string]*rsa.PublicKey
	clock    func() time.Time
	seed     uint64
	mux      *http.ServeMux
	requests atomic.Uint64
	waiting  atomic.Int64
	// calls counts the API calls by operation; the map is made whole in
	// New and only its counters change, so it is read without mu.
	calls map[string]*atomic.Uint64
	// callers counts them by signer (key id), then operation; under its
	// own lock, as it is counted before a call takes mu.
	callersMu sync.Mutex
	callers   map[string]map[string]uint64

	mu sync.Mutex
	// now is the instant of the call in progress: the memory provider's
	// clock, frozen while a call runs so that its checks and its change
	// happen at one time.
	now     time.Time
	vnics   map[string]*vnicState
	vnicIDs []string // sorted
	// ips are the private IP objects by address, primaries included.
	ips    map[netip.Addr]*PrivateIP
	byID   map[string]*PrivateIP
	seq    uint64
	p      *memory.Provider
	faults Faults
	rng    *rand.Rand
	// pace is the latency profile, and jitter the source of its waits.
	pace   simfault.Profile
	jitter *rand.Rand
	// timer starts the wait of a call's latency, returning what fires
	// when it is over and what stops it: a real timer, or a test's.
	timer  func(time.Duration) (<-chan time.Time, func() bool)
	bucket bucket
	tokens map[string]*retried
	// staleRefused counts the writes refused (412, or 409 on a create)
	// whose epoch was below the private IP's epoch record.
	staleRefused uint64
	// resume is closed when the API resumes; nil while it runs.
	resume chan struct{}
}

type vnicState struct {
	VNIC
	created time.Time
	version uint64
}

// retried is the first answer to a create with a retry token.
type retried struct {
	at     time.Time
	digest string
	status int
	body   any
	etag   string
}

// New builds a simulator.
func New(c Config) (*Server, error) {
	subnet := c.Subnet
	if !subnet.IsValid() {
		subnet = DefaultSubnet
	}
	if !subnet.Addr().Is4() || subnet.Masked() != subnet || subnet.Bits() < 16 || subnet.Bits() > 30 {
		return nil, fmt.Errorf("ocisim: subnet %s: want an IPv4 network address from /16 to /30", subnet)
	}
	if len(c.VNICs) == 0 {
		return nil, errors.New("ocisim: no VNICs")
	}
	if room := 1<<(32-subnet.Bits()) - 2; len(c.VNICs) > room {
		return nil, fmt.Errorf("ocisim: %d VNICs do not fit in subnet %s", len(c.VNICs), subnet)
	}
	if err := c.Latency.Validate(operations); err != nil {
		return nil, fmt.Errorf("ocisim: %w", err)
	}
	s := &Server{
		pace: c.Latency.Clone(), jitter: simfault.NewJitter(c.Seed), timer: realTimer,
		subnet: subnet, subnetID: c.SubnetID, keys: c.Keys, clock: c.Clock, seed: c.Seed,
		vnics: map[string]*vnicState{}, ips: map[netip.Addr]*PrivateIP{}, byID: map[string]*PrivateIP{},
		tokens: map[string]*retried{}, calls: map[string]*atomic.Uint64{},
	}
	for _, op := range operations {
		s.calls[op] = new(atomic.Uint64)
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.subnetID == "" {
		s.subnetID = "ocid1.subnet.oc1.iad." + hash("subnet:"+subnet.String())
	}
	s.now = s.clock()
	// Primaries from the top of the subnet down, so that tests may use
	// the low addresses as secondaries.
	a := broadcast(subnet)
	for _, id := range c.VNICs {
		switch {
		case id == "" || len(id) > maxVNICIDLen:
			return nil, fmt.Errorf("ocisim: VNIC id %.20q: empty or longer than %d bytes", id, maxVNICIDLen)
		case strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f || r == ',' || r == '/' || r == '?' }):
			return nil, fmt.Errorf("ocisim: VNIC id %q: spaces, commas, slashes and control characters are not allowed", id)
		case s.vnics[id] != nil:
			return nil, fmt.Errorf("ocisim: VNIC id %q appears twice", id)
		}
		a = a.Prev()
		h := hash("mac:" + id)
		v := &vnicState{VNIC: VNIC{ID: id, MAC: "02:" + strings.ToUpper(h[:2]+":"+h[2:4]+":"+h[4:6]+":"+h[6:8]+":"+h[8:10]), PrimaryIP: a}, created: s.now, version: 1}
		ip := s.newIP(a, id, true)
		v.PrimaryIPID = ip.ID
		s.vnics[id] = v
		s.vnicIDs = append(s.vnicIDs, id)
	}
	slices.Sort(s.vnicIDs)
	s.p = memory.New(memory.Options{NICs: c.VNICs, Clock: s.frozen})
	s.rng = rand.New(rand.NewPCG(s.seed, 0))
	s.mux = http.NewServeMux()
	s.routes()
	return s, nil
}

// hash derives the ids the simulator makes up, so that the same input
// gets the same id on every run.
func hash(s string) string {
	h := fnv.New128a()
	_, _ = h.Write([]byte(s))
	return hex.EncodeToString(h.Sum(nil))
}

func broadcast(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n |= 1<<(32-p.Bits()) - 1
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// newIP makes a private IP object; the caller holds mu (or is New).
func (s *Server) newIP(a netip.Addr, vnic string, primary bool) *PrivateIP {
	s.seq++
	ip := &PrivateIP{
		ID:      fmt.Sprintf("ocid1.privateip.oc1.iad.%s", hash(fmt.Sprintf("privateip:%s:%d", a, s.seq))),
		Address: a, VNIC: vnic, Primary: primary, Created: s.now, version: 1,
		Display: "privateip" + strings.ReplaceAll(a.String(), ".", ""),
	}
	ip.ETag = etag(ip.ID, ip.version)
	s.ips[a] = ip
	s.byID[ip.ID] = ip
	return ip
}

// etag is an object's ETag at a version: opaque, and new with every
// change.
func etag(id string, version uint64) string { return hash(fmt.Sprintf("%s@%d", id, version))[:16] }

func (ip *PrivateIP) bump() {
	ip.version++
	ip.ETag = etag(ip.ID, ip.version)
}

func (v *vnicState) etag() string { return etag(v.ID, v.version) }

func (s *Server) frozen() time.Time { return s.now }

// SubnetID returns the subnet's OCID.
func (s *Server) SubnetID() string { return s.subnetID }

// Subnet returns the subnet's CIDR.
func (s *Server) Subnet() netip.Prefix { return s.subnet }

// VNICs returns the VNICs' identities in id order.
func (s *Server) VNICs() []VNIC {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]VNIC, len(s.vnicIDs))
	for i, id := range s.vnicIDs {
		out[i] = s.vnics[id].VNIC
	}
	return out
}

// PrivateIPs returns the control plane's private IP objects in address
// order, primaries included.
func (s *Server) PrivateIPs() []PrivateIP {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PrivateIP, 0, len(s.ips))
	for _, a := range slices.SortedFunc(func(yield func(netip.Addr) bool) {
		for a := range s.ips {
			if !yield(a) {
				return
			}
		}
	}, netip.Addr.Compare) {
		ip := *s.ips[a]
		if ip.Freeform != nil {
			ip.Freeform = cloneTags(ip.Freeform)
		}
		out = append(out, ip)
	}
	return out
}

func cloneTags(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Mutations implements provider.Recorder: every placement and forwarding
// change the simulator applied, in order, with the epoch and idempotency
// key of the call.
func (s *Server) Mutations() []provider.Mutation {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	return s.p.Mutations()
}

// Holder returns the VNIC that visibly holds a secondary address, or "".
func (s *Server) Holder(a netip.Addr) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	return s.p.Holder(a)
}

// Forwarding returns whether a VNIC skips the source/destination check
// (forwards for addresses other than its own).
func (s *Server) Forwarding(vnic string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	return s.p.Forwarding(vnic)
}

// Calls counts the API calls the simulator received since it was made,
// by operation (OpGetPrivateIp, …): every call that reached an
// operation's route, answered, refused or failed on purpose, so that a
// test can tell what a move costs in calls, reads included, which the
// record of mutations does not show.
func (s *Server) Calls() map[string]uint64 {
	out := make(map[string]uint64, len(s.calls))
	for op, n := range s.calls {
		out[op] = n.Load()
	}
	return out
}

// UnsignedCaller is the caller CallsBy names for calls whose signature
// was refused (missing, malformed, or not the key's); OtherCaller for
// signers past the bound on how many are told apart.
const (
	UnsignedCaller = "(not authenticated)"
	OtherCaller    = "(other)"
)

// maxCallers bounds the signers CallsBy tells apart, so that callers
// making up key ids cannot grow the map without end.
const maxCallers = 1024

func (s *Server) countCall(caller, op string) {
	s.callersMu.Lock()
	defer s.callersMu.Unlock()
	if s.callers == nil {
		s.callers = map[string]map[string]uint64{}
	}
	byOp := s.callers[caller]
	if byOp == nil {
		if len(s.callers) >= maxCallers {
			caller = OtherCaller
			byOp = s.callers[caller]
		}
		if byOp == nil {
			byOp = map[string]uint64{}
			s.callers[caller] = byOp
		}
	}
	byOp[op]++
}

// CallsBy counts the API calls as Calls does, by signer (the key id of
// the request's signature; UnsignedCaller for calls refused as not
// authenticated), then by operation: what one client's work cost,
// apart from another's on the same simulator.
func (s *Server) CallsBy() map[string]map[string]uint64 {
	s.callersMu.Lock()
	defer s.callersMu.Unlock()
	out := make(map[string]map[string]uint64, len(s.callers))
	for c, byOp := range s.callers {
		out[c] = cloneCounts(byOp)
	}
	return out
}

func cloneCounts(m map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Faults returns the faults in force.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.clone()
}

// realTimer is the timer of latencies: real time.
func realTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// Latency returns the latency profile, which faults and resets leave as
// it is.
func (s *Server) Latency() simfault.Profile { return s.pace.Clone() }

// SetFaults replaces the faults; invalid ones are refused and change
// nothing. The random numbers and the token bucket start again.
func (s *Server) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("ocisim: faults: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	s.faults = f.clone()
	s.p.SetDelay(time.Duration(f.RemapDelay))
	s.rng = rand.New(rand.NewPCG(s.seed, 0))
	s.bucket = bucket{}
	return nil
}

// Pause makes API calls wait until Resume (or until their callers give
// up); the admin API goes on.
func (s *Server) Pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resume == nil {
		s.resume = make(chan struct{})
	}
}

// Resume lets paused and new API calls go on.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resumeLocked()
}

func (s *Server) resumeLocked() {
	if s.resume != nil {
		close(s.resume)
		s.resume = nil
	}
}

// Reset clears every fault and resumes the API. Changes already pending
// still become visible at their times.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	s.faults = Faults{}
	s.p.SetDelay(0)
	s.rng = rand.New(rand.NewPCG(s.seed, 0))
	s.bucket = bucket{}
	s.resumeLocked()
}

// Flush makes every pending change visible now.
func (s *Server) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	s.p.Flush()
}

// Waiting counts the calls a pause or the latency fault holds now.
func (s *Server) Waiting() int { return int(s.waiting.Load()) }

// waitResumed blocks while the API is paused; false when ctx ended first.
func (s *Server) waitResumed(ctx context.Context) bool {
	for {
		s.mu.Lock()
		ch := s.resume
		s.mu.Unlock()
		if ch == nil {
			return true
		}
		s.waiting.Add(1)
		select {
		case <-ch:
			s.waiting.Add(-1)
		case <-ctx.Done():
			s.waiting.Add(-1)
			return false
		}
	}
}

// StaleRefused is how many writes the simulator refused (412 NoEtagMatch,
// or 409 for a create of an address another private IP holds) whose epoch
// was below the one the private IP's epoch record held: stale actions the
// cloud itself stopped.
func (s *Server) StaleRefused() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.staleRefused
}

// request is the provider.Request a mutation is recorded with.
func request(vnic string, a netip.Addr, st stamp) provider.Request {
	return provider.Request{NIC: vnic, Address: a, Epoch: st.epoch, IdempotencyKey: st.key, LineRevision: st.rev}
}

// stamp is the fencing token a call carries in the ipfence headers.
type stamp struct {
	epoch capture.Epoch
	key   string
	addr  netip.Addr
	// rev is the etcd line revision (HeaderLineRevision); zero when none
	// was sent.
	rev int64
}
