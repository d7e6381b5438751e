// Package armsim is the Azure dialect of ipfence's cloud simulator: NICs
// in one resource group and one subnet, served over the part of Azure
// Resource Manager's REST API that the unmodified Azure SDK for Go
// (armnetwork's InterfacesClient) uses to move a secondary private IP: GET
// and PUT of Microsoft.Network/networkInterfaces, the list of a resource
// group's NICs, and the Azure-AsyncOperation status a PUT is polled
// through. The placement of secondary addresses, forwarding
// (enableIPForwarding), late visibility and the record of mutations are
// capture/provider/memory's, as in the EC2 dialect (capture/provider/aws/ec2sim), so
// the single-holder and fence checkers read this record unchanged.
//
// # The ARM API
//
// Paths are ARM's, matched without regard to case; every request needs
// api-version=2025-01-01 (the version armnetwork/v7 sends) and an
// Authorization: Bearer header (any token; the token is the principal the
// throttle counts for):
//
//	GET /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces/{nic}
//	PUT /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces/{nic}
//	GET /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces
//	GET /subscriptions/{s}/providers/Microsoft.Network/locations/{loc}/operations/{id}
//
// A NIC is ARM's JSON with an etag that changes with every PUT that changes
// it. A PUT replaces the NIC's ipConfigurations, enableIPForwarding and
// tags (at most 50, values of at most 256 characters); it
// is conditional when it carries If-Match (the etag, or * for any), and
// answers 412 PreconditionFailed when the etag no longer matches, changing
// nothing. An accepted PUT answers 200 with the NIC in provisioningState
// Updating and an Azure-AsyncOperation header; the operation's status is
// InProgress until its changes are visible (Config.Latency's settling time
// and Faults.Delay later), then
// Succeeded. GET shows the NIC as the last accepted PUT left it, in
// provisioningState Updating until its operation succeeded. The headers
// X-Ipfence-Epoch, X-Ipfence-Idempotency-Key and X-Ipfence-Address (the
// EC2 dialect's, see cloudsim) are recorded with every mutation a PUT
// makes (or, with X-Ipfence-Addresses listing the addresses of a PUT
// carrying several actions, comma-separated epochs and keys, one per
// address): an address removed is an unassign, an address added an assign
// (a move is two PUTs, so the record never shows one with From set), a
// change of enableIPForwarding a forwarding change.
//
// Errors are ARM's {"error":{"code":…,"message":…}} with the code also in
// x-ms-error-code:
//
//	400 PrivateIPAddressInUse          an address of the PUT is on another NIC (primary or not)
//	400 PrivateIPAddressNotInSubnet    outside the subnet, or its network or broadcast address
//	400 NicMustHaveIpConfiguration     a PUT with no ipConfigurations
//	400 PrimaryIpConfigurationRequired a PUT that drops or changes the primary ipConfiguration
//	400 InvalidRequestFormat           unreadable JSON, a repeated name or address, no static
//	                                   address, an address that is not IPv4, a foreign subnet
//	400 MissingApiVersionParameter, InvalidApiVersionParameter
//	401 AuthenticationFailed           no bearer token
//	404 ResourceNotFound               a NIC, operation or path the simulator does not have
//	                                   (the simulator never creates NICs)
//	405 MethodNotAllowed               DELETE and other methods
//	412 PreconditionFailed             If-Match does not match the etag
//	429 SubscriptionRequestsThrottled  the token bucket of the subscription and principal is
//	                                   empty, with Retry-After in seconds (see Limits)
//	429 TooManyRequests, 500 InternalServerError, 503 ServiceUnavailable  injected (Faults)
//
// Not simulated: creating or deleting NICs, pagination of the list (one
// page), IPv6, public IPs, and persistence across restarts.
package armsim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/memory"
	"github.com/ipfence/ipfence/internal/simfault"
)

// APIVersion is the ARM API version of Microsoft.Network that the
// simulator speaks: armnetwork/v7's.
const APIVersion = "2025-01-01"

// Defaults of a Config that names none.
const (
	DefaultSubscription  = "00000000-0000-4000-8000-000000000001"
	DefaultResourceGroup = "ipfence"
	DefaultLocation      = "eastus"
)

// DefaultSubnet is the subnet of a simulator whose Config names none.
var DefaultSubnet = netip.MustParsePrefix("10.0.0.0/24")

// primaryName is the name of every NIC's primary ipConfiguration, as the
// portal names the first one.
const primaryName = "ipconfig1"

// firstPrimary is how many addresses at the start of the subnet Azure
// keeps (network, gateway, two for DNS): primary IPs start after them.
// The simulator still lets callers put secondaries there, as the contract
// suite uses 10.0.0.1–3.
const firstPrimary = 4

// Config configures a Server.
type Config struct {
	// SubscriptionID, ResourceGroup and Location place the NICs; empty
	// means the defaults above.
	SubscriptionID string
	ResourceGroup  string
	Location       string
	// NICs are the names of the NICs, each with a primary ipConfiguration
	// holding its own primary IP. Names compare exactly.
	NICs []string
	// Subnet holds every address; the zero value means DefaultSubnet.
	Subnet netip.Prefix
	// Seed seeds the draws of injected error rates and the jitter of
	// Latency's waits.
	Seed uint64
	// Latency is ARM's own pace (see Realistic), in force under whatever
	// faults are injected, which add to it: each call's latency, and how
	// long a PUT's operation takes to succeed. The zero value answers at
	// once.
	Latency simfault.Profile
	// Clock gives mutation times, operation progress and the throttle's
	// refills; nil means time.Now. Injected latency is real time.
	Clock func() time.Time
	// Limits is the throttle; the zero value is ARM's documented one.
	Limits Limits
	// Logger receives a line per accepted PUT; nil discards them.
	Logger *slog.Logger
}

// Server is the simulator: an http.Handler serving the ARM API and the
// admin API under /admin/. It is safe for concurrent use; every call runs
// under one lock with the model's clock frozen at one reading.
type Server struct {
	log      *slog.Logger
	clock    func() time.Time
	seed     uint64
	sub, rg  string
	location string
	subnet   netip.Prefix
	subnetID string
	requests atomic.Uint64

	mu     sync.Mutex
	now    time.Time
	p      *memory.Provider
	names  []string // sorted
	nics   map[string]*nic
	owner  map[netip.Addr]string // every address on a NIC, primaries too
	ops    map[string]*operation
	opSeq  uint64
	tagSeq uint64
	// staleRefused counts the PUTs refused with 412 whose epoch was below
	// the NIC's epoch record (StaleRefused).
	staleRefused uint64
	// lastDone is when the last accepted change becomes visible: the
	// provider's queue is first in, first out, and so are operations.
	lastDone time.Time
	// accepted are the changes of accepted PUTs, in order, each with the
	// moment ARM accepted it: the moment GETs began to show it, which
	// the record (times of visibility, Faults.Delay later) does not tell.
	accepted []acceptedChange
	faults   Faults
	rng      *rand.Rand
	// pace is the latency profile, and jitter the source of its waits.
	pace   simfault.Profile
	jitter *rand.Rand
	// timer starts the wait of a call's latency, returning what fires
	// when it is over and what stops it: a real timer, or a test's.
	timer   func(time.Duration) (<-chan time.Time, func() bool)
	limits  Limits
	buckets map[string]*buckets
	// resume is closed when the ARM API resumes; nil while it runs.
	resume chan struct{}
	// waiting counts the calls held by a pause.
	waiting atomic.Int64

	// The identity endpoint's record (identity.go): its requests, the
	// tokens it issued (by client id), and the ARM calls with and
	// without one of them.
	idLog  []IdentityRequest
	tokens map[string]string
	// calls counts ARM calls by the client their token was issued to,
	// then by operation (Calls).
	calls     map[string]map[string]uint64
	armIssued atomic.Uint64
	armOther  atomic.Uint64
}

// nic is a NIC as ARM holds it after the last accepted PUT.
type nic struct {
	name    string
	primary netip.Addr
	mac     string
	etag    string
	// tags are the NIC's, as the last PUT set them.
	tags map[string]string
	// secondary maps each secondary address to its ipConfiguration name.
	secondary  map[netip.Addr]string
	forwarding bool
	// busyUntil is when the last PUT's changes become visible.
	busyUntil time.Time
}

// operation is an accepted PUT's Azure-AsyncOperation.
type operation struct {
	id     string
	start  time.Time
	doneAt time.Time
}

// New builds a simulator with every NIC holding only its primary address,
// forwarding off.
func New(c Config) (*Server, error) {
	if err := c.Latency.Validate(operations); err != nil {
		return nil, fmt.Errorf("armsim: %w", err)
	}
	s := &Server{
		pace: c.Latency.Clone(), jitter: simfault.NewJitter(c.Seed), timer: realTimer,
		log: c.Logger, clock: c.Clock, seed: c.Seed, sub: c.SubscriptionID, rg: c.ResourceGroup,
		location: c.Location, subnet: c.Subnet, limits: c.Limits,
		nics: map[string]*nic{}, owner: map[netip.Addr]string{}, ops: map[string]*operation{}, buckets: map[string]*buckets{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.sub == "" {
		s.sub = DefaultSubscription
	}
	if s.rg == "" {
		s.rg = DefaultResourceGroup
	}
	if s.location == "" {
		s.location = DefaultLocation
	}
	if !s.subnet.IsValid() {
		s.subnet = DefaultSubnet
	}
	if !s.subnet.Addr().Is4() || s.subnet.Masked() != s.subnet || s.subnet.Bits() > 29 {
		return nil, fmt.Errorf("armsim: subnet %s: want an IPv4 network address of /29 or larger", s.subnet)
	}
	if err := s.limits.validate(); err != nil {
		return nil, fmt.Errorf("armsim: limits: %w", err)
	}
	if len(c.NICs) == 0 {
		return nil, errors.New("armsim: no NICs")
	}
	room := (1 << (32 - s.subnet.Bits())) - firstPrimary - 1
	if len(c.NICs) > room {
		return nil, fmt.Errorf("armsim: %d NICs do not fit in subnet %s, which has room for %d", len(c.NICs), s.subnet, room)
	}
	a := s.subnet.Addr()
	for range firstPrimary {
		a = a.Next()
	}
	for _, name := range c.NICs {
		switch {
		case name == "" || len(name) > 80:
			return nil, fmt.Errorf("armsim: NIC name %.20q: want 1 to 80 characters", name)
		case strings.ContainsAny(name, "/?#%\\ ") || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }):
			return nil, fmt.Errorf("armsim: NIC name %q: slashes, spaces, %% ? # and control characters are not allowed", name)
		case s.nics[name] != nil:
			return nil, fmt.Errorf("armsim: NIC name %q appears twice", name)
		}
		h := hash64("mac:" + name)
		s.nics[name] = &nic{
			name: name, primary: a, secondary: map[netip.Addr]string{},
			mac: fmt.Sprintf("02-%02X-%02X-%02X-%02X-%02X", byte(h>>32), byte(h>>24), byte(h>>16), byte(h>>8), byte(h)),
		}
		s.owner[a] = name
		s.names = append(s.names, name)
		a = a.Next()
	}
	slices.Sort(s.names)
	for _, name := range s.names {
		s.nics[name].etag = s.newETag()
	}
	s.subnetID = fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/ipfence-vnet/subnets/default", s.sub, s.rg)
	s.p = memory.New(memory.Options{NICs: c.NICs, Clock: s.frozen})
	s.rng = rand.New(rand.NewPCG(s.seed, 0))
	return s, nil
}

// frozen is the provider's clock: the instant of the call in progress.
func (s *Server) frozen() time.Time { return s.now }

func hash64(v string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(v))
	return h.Sum64()
}

// newETag gives the next etag, in ARM's weak form with a GUID.
func (s *Server) newETag() string {
	s.tagSeq++
	return fmt.Sprintf(`W/"%08x-0000-4000-8000-%012x"`, uint32(hash64(s.sub)), s.tagSeq)
}

// SubscriptionID, ResourceGroup and Location are where the NICs are.
func (s *Server) SubscriptionID() string { return s.sub }

// ResourceGroup is the resource group of every NIC.
func (s *Server) ResourceGroup() string { return s.rg }

// NICID is the ARM resource id of the named NIC.
func (s *Server) NICID(name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/networkInterfaces/%s", s.sub, s.rg, name)
}

// Mutations implements provider.Recorder: every mutation made visible, in
// order, with the epoch and idempotency key of the PUT that made it.
func (s *Server) Mutations() []provider.Mutation {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	return s.p.Mutations()
}

// ETag returns the named NIC's etag now ("" for an unknown NIC).
func (s *Server) ETag(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.nics[name]; n != nil {
		return n.etag
	}
	return ""
}

// realTimer is the timer of latencies: real time.
func realTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// Latency returns the latency profile, which faults and resets leave as
// it is.
func (s *Server) Latency() simfault.Profile { return s.pace.Clone() }

// Faults returns the faults in force.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.clone()
}

// SetFaults replaces the faults; invalid ones are refused and change
// nothing. The random draws start again from the seed.
func (s *Server) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("armsim: faults: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f.clone()
	s.p.SetDelay(time.Duration(f.Delay))
	s.rng = rand.New(rand.NewPCG(s.seed, 0))
	return nil
}

// Flush makes every accepted change visible now and every operation
// succeeded.
func (s *Server) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	s.p.Flush()
	for _, op := range s.ops {
		if op.doneAt.After(s.now) {
			op.doneAt = s.now
		}
	}
	for _, n := range s.nics {
		if n.busyUntil.After(s.now) {
			n.busyUntil = s.now
		}
	}
	if s.lastDone.After(s.now) {
		s.lastDone = s.now
	}
}

// Reset clears the faults, resumes the ARM API and makes everything
// accepted visible.
func (s *Server) Reset() {
	_ = s.SetFaults(Faults{})
	s.Resume()
	s.Flush()
}

// Pause makes ARM calls wait until Resume, or until their callers give
// up (and then they change nothing). The admin API goes on.
func (s *Server) Pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resume == nil {
		s.resume = make(chan struct{})
	}
}

// Resume lets paused and new ARM calls go on.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resume != nil {
		close(s.resume)
		s.resume = nil
	}
}

// Waiting counts the ARM calls a pause holds now.
func (s *Server) Waiting() int { return int(s.waiting.Load()) }

// waitResumed blocks while the ARM API is paused; false when done ended
// first.
func (s *Server) waitResumed(done <-chan struct{}) bool {
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
		case <-done:
			s.waiting.Add(-1)
			return false
		}
	}
}

// NICState is a NIC as the admin API shows it: as ARM holds it, and as
// visible in the data plane (the memory provider's placement).
type NICState struct {
	Name      string       `json:"name"`
	ETag      string       `json:"etag"`
	PrimaryIP netip.Addr   `json:"primaryIp"`
	Secondary []netip.Addr `json:"secondaryIps"`
	// Visible are the secondary addresses visible now; they lag
	// Secondary by Faults.Delay.
	Visible    []netip.Addr `json:"visibleIps"`
	Forwarding bool         `json:"enableIPForwarding"`
	Updating   bool         `json:"updating"`
	// Tags are the NIC's tags, the epoch record among them.
	Tags map[string]string `json:"tags,omitempty"`
}

// State returns every NIC, in name order.
func (s *Server) State() []NICState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	placed := s.p.NICs()
	vis := map[string][]netip.Addr{}
	for _, pl := range placed {
		vis[pl.Name] = pl.Addresses
	}
	out := make([]NICState, 0, len(s.names))
	for _, name := range s.names {
		n := s.nics[name]
		out = append(out, NICState{
			Name: name, ETag: n.etag, PrimaryIP: n.primary, Secondary: n.sortedSecondary(),
			Visible: vis[name], Forwarding: n.forwarding, Updating: n.busyUntil.After(s.now), Tags: maps.Clone(n.tags),
		})
	}
	return out
}

func (n *nic) sortedSecondary() []netip.Addr {
	out := make([]netip.Addr, 0, len(n.secondary))
	for a := range n.secondary {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// ServeHTTP serves the ARM API (see the package documentation) and the
// admin API, JSON without authentication:
//
//	GET  /admin/state      every NIC: []NICState
//	GET  /admin/mutations  the record, in the EC2 dialect's shape (lower-case names,
//	                       RFC 3339 time, mono: CLOCK_MONOTONIC nanoseconds), with
//	                       acceptedMono, when ARM accepted the change (AcceptedTimes)
//	GET  /admin/stale      {"refused": N}: PUTs refused with 412 that were stale (StaleRefused)
//	GET  /admin/latency    the latency profile (Config.Latency), durations as strings
//	GET  /admin/faults     the faults
//	PUT  /admin/faults     replace the faults (unknown fields are refused)
//	POST /admin/flush      make every accepted change visible now
//	POST /admin/pause      make ARM calls wait until resumed
//	POST /admin/resume     let them go on
//	POST /admin/reset      clear the faults, resume and flush
//	GET  /admin/identity   the identity endpoint's record: IdentityLog
//	GET  /admin/calls      the ARM calls by client and operation (Calls)
//
// and the identity endpoint (identity.go) under /{tenant}/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/admin/") {
		s.serveAdmin(w, r)
		return
	}
	if tenant, rest, ok := identityRoute(r.URL.Path); ok {
		s.serveIdentity(w, r, tenant, rest)
		return
	}
	s.serveARM(w, r)
}
