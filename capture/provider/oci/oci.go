// Package oci is the provider driver for Oracle Cloud Infrastructure:
// secondary private IPs on VNICs, and skip-source/dest-check as
// forwarding. It speaks through the real SDK's core.VirtualNetworkClient
// (github.com/oracle/oci-go-sdk/v65), with credentials from the SDK's
// usual chain (the config file and OCI_* environment, or instance
// principals) and an endpoint override for ipfence's simulator
// (capture/provider/oci/ocisim).
//
// A move is one UpdatePrivateIp that names the new VNIC, conditional on
// the ETag the driver read for the private IP just before (one
// GetPrivateIp on the OCID it remembers from its first look, so a move
// costs a read, the write and a read that sees it): the cloud
// refuses it with 412 when anyone changed the private IP in between, so a
// driver whose view went stale — a node paused between its look and its
// send — changes nothing, and the call fails with ErrChanged rather than
// trying again on a fresh look. That is a second wall behind the gate,
// for the window between the driver's read and its write. (A private IP
// deleted in that window, released by its holder, is made anew on the
// VNIC by a create, which the cloud refuses with 409 when anyone took the
// address since.) A release is a DeletePrivateIp conditional the same
// way, so a release can never take the address off a VNIC it moved to
// since the look. A node's own calls on one address are serialized, so
// they never refuse each other.
//
// The epoch is the other half of that wall. Every write also stores, in the
// private IP's freeform tags, the highest capture epoch that acted on the
// address (capture/provider/epochtag), and before a move or a release the
// driver reads that record together with the ETag: an action at an older
// epoch than the record's is refused with provider.ErrStale and sends
// nothing, and one that read before the newer write is refused by the
// cloud's 412 (and reported as ErrStale when a fresh read shows the newer
// epoch). A zombie with its gate off is thus stopped by the cloud's own
// record. Two gaps remain, stated here because the capture test measures
// them: a forwarding change (UpdateVnic) on the VNIC holding the address
// is checked against the record but not conditional on it; and a private
// IP deleted by its holder takes its record with it, so a stale create of
// the freed address is stopped only by the gate (and the private IP it
// makes carries the stale epoch as its record, so the same zombie's
// forwarding change or release at that epoch passes too, until a newer
// write moves or deletes the private IP).
//
// Fencing rules as in the AWS driver: a change is never retried by the
// SDK (a delayed retry of an old acquire could take the address back from
// a newer holder); reads are retried with backoff on 429, 5xx and network
// errors; after an acquire the driver reads until the change is visible
// or a deadline passes. A change is sent only if the readiness check its
// context carries (gate.WithReady) passes as the last step, after signing,
// right before the request leaves. The epoch and idempotency key travel in
// the X-Ipfence-Epoch and X-Ipfence-Idempotency-Key headers: OCI ignores
// them, the simulator records them. A create carries an opc-retry-token
// derived from the idempotency key.
package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"
	"github.com/oracle/oci-go-sdk/v65/common/auth"
	"github.com/oracle/oci-go-sdk/v65/core"

	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/callbudget"
	"github.com/ipfence/ipfence/capture/provider/epochtag"
)

// Header names carrying the fencing token to the simulator, and the
// address a forwarding change is made for (UpdateVnic names only the
// VNIC).
const (
	HeaderEpoch          = "X-Ipfence-Epoch"
	HeaderIdempotencyKey = "X-Ipfence-Idempotency-Key"
	HeaderAddress        = "X-Ipfence-Address"
	// HeaderLineRevision carries the etcd revision of the epoch record
	// the node confirmed before the call (provider.Request.LineRevision);
	// absent off the etcd line.
	HeaderLineRevision = "X-Ipfence-Line-Revision"
)

// ErrChanged is the cloud's refusal of a conditional write (412
// NoEtagMatch): the private IP changed between the driver's read and its
// write, so the write was based on a stale view and changed nothing. It is
// not retried: the next reconcile looks afresh.
var ErrChanged = errors.New("the private IP changed since it was read; the cloud refused the write (412)")

// Auth names where credentials come from.
type Auth string

// The credential sources.
const (
	// AuthConfigFile is the SDK's default chain: ~/.oci/config (or
	// OCI_CONFIG_FILE) and the OCI_* environment variables.
	AuthConfigFile Auth = "config_file"
	// AuthInstancePrincipal is the instance's own identity, from the
	// instance metadata service.
	AuthInstancePrincipal Auth = "instance_principal"
)

// Options configure a driver.
type Options struct {
	// SubnetID is the OCID of the subnet the VNICs are in; required: a
	// private IP is found by its subnet and address.
	SubnetID string
	// Region overrides the credentials' region.
	Region string
	// Host overrides the Networking endpoint, such as the simulator's URL.
	Host string
	// Auth picks the credential chain when ConfigurationProvider is nil;
	// empty means AuthConfigFile.
	Auth Auth
	// Profile is the config file's profile for AuthConfigFile; empty
	// means DEFAULT.
	Profile string
	// ConfigurationProvider overrides the chain (tests use a raw one
	// with a key they made).
	ConfigurationProvider common.ConfigurationProvider
	// HTTPClient sends the requests; nil means the SDK's. Tests use a TLS
	// test server's client.
	HTTPClient *http.Client
	// IgnoreEpochRecord turns off the refusals by the epoch record (the
	// record is still kept): for callers whose epochs are not one line
	// per address, such as the provider contract suite, whose concurrent
	// callers draw epochs from one counter and then race, and expect every
	// seize to succeed or to meet a conflict.
	IgnoreEpochRecord bool
	// VisibleTimeout bounds the wait for an acquire to become visible;
	// 0 means 10 seconds.
	VisibleTimeout time.Duration
	// PollInterval is the pause between looks; 0 means 100 ms.
	PollInterval time.Duration
	// ReadAttempts is how many times a read is tried; 0 means 5.
	ReadAttempts int
	// MaxBackoff caps the pause between read attempts; 0 means 2 seconds.
	MaxBackoff time.Duration
	// Budget paces the calls (every attempt, the read retries too, takes
	// a token first: a GET from the read bucket, anything else from the
	// write bucket) and pauses a bucket when OCI answers 429, for its
	// Retry-After when it sends one; nil sends every call at once. The
	// daemon always gives one (callbudget.OCI unless configured).
	Budget *callbudget.Budget
}

// Driver is an OCI provider.
type Driver struct {
	client core.VirtualNetworkClient
	opts   Options
	read   common.RetryPolicy
	once   common.RetryPolicy

	mu    sync.Mutex
	locks map[netip.Addr]*addrLock
	// ids remembers each address's private IP OCID from the driver's
	// last look or create: an OCID names one address for the object's
	// life (a move keeps it), so a seize reads the object and its ETag
	// with one GetPrivateIp instead of a list and a get. A stale entry
	// (the object was deleted, perhaps made anew by another node) answers
	// 404, or names another address, and is forgotten.
	ids map[netip.Addr]string
}

type addrLock struct {
	mu   sync.Mutex
	refs int
}

// New builds a driver.
func New(o Options) (*Driver, error) {
	if o.SubnetID == "" {
		return nil, errors.New("oci: no subnet OCID")
	}
	if o.VisibleTimeout == 0 {
		o.VisibleTimeout = 10 * time.Second
	}
	if o.PollInterval == 0 {
		o.PollInterval = 100 * time.Millisecond
	}
	if o.ReadAttempts == 0 {
		o.ReadAttempts = 5
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 2 * time.Second
	}
	cp := o.ConfigurationProvider
	if cp == nil {
		var err error
		switch o.Auth {
		case "", AuthConfigFile:
			cp = common.DefaultConfigProvider()
			if o.Profile != "" {
				cp = common.CustomProfileConfigProvider(configFile(), o.Profile)
			}
		case AuthInstancePrincipal:
			if cp, err = auth.InstancePrincipalConfigurationProvider(); err != nil {
				return nil, fmt.Errorf("oci: instance principal credentials: %w", err)
			}
		default:
			return nil, fmt.Errorf("oci: unknown auth %q (want %s or %s)", o.Auth, AuthConfigFile, AuthInstancePrincipal)
		}
	}
	client, err := core.NewVirtualNetworkClientWithConfigurationProvider(cp)
	if err != nil {
		return nil, fmt.Errorf("oci: Networking client: %w", err)
	}
	if o.Region != "" {
		client.SetRegion(o.Region)
	}
	if o.Host != "" {
		client.Host = o.Host
	}
	// The SDK's circuit breaker would turn a storm of 5xx or 429 into
	// refusals of its own and hide the cloud's answers from the driver's
	// error mapping; the executor and the read retries pace the calls.
	client.Configuration.CircuitBreaker = nil
	var base common.HTTPRequestDispatcher = client.HTTPClient
	if o.HTTPClient != nil {
		base = o.HTTPClient
	}
	client.HTTPClient = dispatcher{next: base, budget: o.Budget}
	d := &Driver{client: client, opts: o, locks: map[netip.Addr]*addrLock{}, ids: map[netip.Addr]string{}}
	d.once = common.NoRetryPolicy()
	d.read = common.NewRetryPolicy(uint(o.ReadAttempts), retryRead, func(r common.OCIOperationResponse) time.Duration {
		// Exponential from 50 ms, capped, with jitter so that nodes
		// throttled together do not come back together.
		back := min(o.MaxBackoff, 50*time.Millisecond<<min(r.AttemptNumber, 16))
		return back/2 + rand.N(back/2+1)
	})
	return d, nil
}

// configFile is the OCI config file the SDK's default chain reads:
// ~/.oci/config when it exists, else the file OCI_CONFIG_FILE names when
// that exists. CustomProfileConfigProvider given no path reads
// ~/.oci/config alone, so a profile in the file OCI_CONFIG_FILE names
// would not be found, where the DEFAULT profile of the same file is.
func configFile() string {
	home := os.Getenv("HOME")
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		// The SDK's choice of home, so that both find the same file.
		home = u.HomeDir
	}
	def := filepath.Join(home, ".oci", "config")
	if _, err := os.Stat(def); err == nil {
		return def
	}
	if f := os.Getenv("OCI_CONFIG_FILE"); f != "" {
		if _, err := os.Stat(f); err == nil {
			return f
		}
	}
	return def
}

// retryRead says whether a failed read is worth another attempt: throttled,
// a server error, or the network.
func retryRead(r common.OCIOperationResponse) bool {
	if r.Error == nil {
		return false
	}
	if se, ok := common.IsServiceError(r.Error); ok {
		return se.GetHTTPStatusCode() == http.StatusTooManyRequests || se.GetHTTPStatusCode() >= 500
	}
	if errors.Is(r.Error, context.Canceled) || errors.Is(r.Error, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	return errors.As(r.Error, &ne) || common.IsNetworkError(r.Error)
}

// stampKey is the context key of a change's fencing token.
type stampKey struct{}

type stamp struct {
	req      provider.Request
	withAddr bool
}

// dispatcher is the last step before a request leaves, after the SDK
// signed it: it waits for a token of the budget, then, for a change (its
// context carries a stamp), adds the ipfence headers and asks readiness
// (gate.Ready) last; reads go straight out. It tells the budget of a 429.
type dispatcher struct {
	next   common.HTTPRequestDispatcher
	budget *callbudget.Budget
}

func (d dispatcher) Do(r *http.Request) (*http.Response, error) {
	if ctx, ok := r.Context().Value(callerKey{}).(context.Context); ok {
		r = r.WithContext(ctx)
	}
	if d.budget == nil {
		return d.send(r)
	}
	class := callbudget.Write
	if r.Method == http.MethodGet {
		class = callbudget.Read
	}
	if err := d.budget.Wait(r.Context(), class); err != nil {
		return nil, err
	}
	resp, err := d.send(r)
	switch {
	case resp != nil && resp.StatusCode == http.StatusTooManyRequests:
		d.budget.Throttled(class, callbudget.RetryAfter(resp.Header, time.Now()))
	case resp != nil:
		d.budget.Answered(class)
	}
	return resp, err
}

func (d dispatcher) send(r *http.Request) (*http.Response, error) {
	if st, ok := r.Context().Value(stampKey{}).(stamp); ok {
		r.Header.Set(HeaderEpoch, strconv.FormatUint(uint64(st.req.Epoch), 10))
		r.Header.Set(HeaderIdempotencyKey, st.req.IdempotencyKey)
		if st.withAddr && st.req.Address.IsValid() {
			r.Header.Set(HeaderAddress, st.req.Address.String())
		}
		if rev := provider.LineRevisions(st.req); rev != "" {
			r.Header.Set(HeaderLineRevision, rev)
		}
		if err := gate.Ready(r.Context()); err != nil {
			return nil, err
		}
	}
	return d.next.Do(r)
}

// callerKey is the context key of the caller's own context, which sdk
// hides from the SDK.
type callerKey struct{}

// sdk is the context an SDK call gets: the caller's values without its
// cancellation, the caller's context carried along for the dispatcher to
// put back on the request. The SDK's retry loop, when its context ends
// first, reads the response that its attempt's goroutine is still writing
// (a data race in oci-go-sdk v65.130.0, common.Retry); with a context that
// never ends it waits for the attempt instead, and the attempt itself
// still ends with the caller's context, in the dispatcher's request.
func sdk(ctx context.Context) context.Context {
	ctx = callbudget.Call(ctx)
	return context.WithValue(context.WithoutCancel(ctx), callerKey{}, ctx)
}

func change(ctx context.Context, req provider.Request, withAddr bool) context.Context {
	return context.WithValue(ctx, stampKey{}, stamp{req: req, withAddr: withAddr})
}

// lock serializes this driver's calls on one address: its own movers must
// not refuse each other with 412s meant for other nodes.
func (d *Driver) lock(a netip.Addr) func() {
	d.mu.Lock()
	l := d.locks[a]
	if l == nil {
		l = &addrLock{}
		d.locks[a] = l
	}
	l.refs++
	d.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		d.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(d.locks, a)
		}
		d.mu.Unlock()
	}
}

func (d *Driver) cachedID(a netip.Addr) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ids[a]
}

func (d *Driver) remember(a netip.Addr, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if id == "" {
		delete(d.ids, a)
	} else {
		d.ids[a] = id
	}
}

// retryToken is the opc-retry-token of a create: the same action on the
// same VNIC and address sends the same token, so a repeat after a lost
// answer is answered with the first result. OCI allows 64 characters.
func retryToken(req provider.Request) *string {
	if req.IdempotencyKey == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(req.IdempotencyKey + "\x00" + req.NIC + "\x00" + req.Address.String()))
	return common.String(hex.EncodeToString(sum[:]))
}

// find reads the private IP at an address in the subnet; nil when no
// VNIC holds it.
func (d *Driver) find(ctx context.Context, a netip.Addr) (*core.PrivateIp, error) {
	out, err := d.client.ListPrivateIps(sdk(ctx), core.ListPrivateIpsRequest{
		SubnetId: common.String(d.opts.SubnetID), IpAddress: common.String(a.String()),
		RequestMetadata: common.RequestMetadata{RetryPolicy: &d.read},
	})
	if err != nil {
		return nil, mapError(ctx, "ListPrivateIps", err)
	}
	switch len(out.Items) {
	case 0:
		return nil, nil
	case 1:
		return &out.Items[0], nil
	}
	return nil, fmt.Errorf("oci: ListPrivateIps reports %s %d times in subnet %s, which it never should", a, len(out.Items), d.opts.SubnetID)
}

// get reads a private IP with its ETag; nil when it is gone.
func (d *Driver) get(ctx context.Context, id string) (*core.PrivateIp, string, error) {
	out, err := d.client.GetPrivateIp(sdk(ctx), core.GetPrivateIpRequest{
		PrivateIpId: common.String(id), RequestMetadata: common.RequestMetadata{RetryPolicy: &d.read},
	})
	if status(err) == http.StatusNotFound {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", mapError(ctx, "GetPrivateIp", err)
	}
	return &out.PrivateIp, strOf(out.Etag), nil
}

// vnic reads a VNIC: provider.ErrUnknownNIC when there is none.
func (d *Driver) vnic(ctx context.Context, id string) (core.Vnic, error) {
	out, err := d.client.GetVnic(sdk(ctx), core.GetVnicRequest{
		VnicId: common.String(id), RequestMetadata: common.RequestMetadata{RetryPolicy: &d.read},
	})
	if status(err) == http.StatusNotFound {
		return core.Vnic{}, fmt.Errorf("oci: GetVnic %s: %w", id, provider.ErrUnknownNIC)
	}
	if err != nil {
		return core.Vnic{}, mapError(ctx, "GetVnic", err)
	}
	return out.Vnic, nil
}

func vnicOf(p *core.PrivateIp) string {
	if p == nil {
		return ""
	}
	return strOf(p.VnicId)
}

// Assign puts the address on the VNIC: CreatePrivateIp when no VNIC holds
// it, UpdatePrivateIp naming the new VNIC (if-match on the ETag just read)
// when another does and reassign is set (CreatePrivateIp after all when
// the holder deleted it meanwhile, see recreate). Then it reads until the
// change is visible, or superseded (the private IP's ETag moved past the
// one the write returned: someone changed it since), or the deadline
// passes; an acknowledged change not yet visible at the deadline is still
// a success: OCI finishes it.
func (d *Driver) Assign(ctx context.Context, req provider.Request, reassign bool) error {
	unlock := d.lock(req.Address)
	w, err := d.assign(ctx, req, reassign)
	unlock()
	if err != nil || w.noop {
		return err
	}
	deadline := time.Now().Add(d.opts.VisibleTimeout)
	for {
		if done, err := w.visible(ctx, d, req.NIC); err == nil && done {
			return nil
		}
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.opts.PollInterval):
		}
	}
}

// written is what an acquire wrote, for the wait until it shows.
type written struct {
	noop bool   // nothing was sent: the VNIC held the address already
	id   string // the private IP's OCID
	tag  string // its ETag after the write
}

// visible reads the private IP once: true when it is on nic, gone, or
// changed by someone after the write.
func (w written) visible(ctx context.Context, d *Driver, nic string) (bool, error) {
	p, tag, err := d.get(ctx, w.id)
	if err != nil {
		return false, err
	}
	return p == nil || vnicOf(p) == nic || tag != w.tag, nil
}

// assign makes the change.
func (d *Driver) assign(ctx context.Context, req provider.Request, reassign bool) (written, error) {
	var (
		p   *core.PrivateIp
		tag string
		err error
	)
	if id := d.cachedID(req.Address); id != "" {
		if p, tag, err = d.get(ctx, id); err != nil {
			return written{}, err
		}
		if p == nil || strOf(p.IpAddress) != req.Address.String() {
			d.remember(req.Address, "")
			p = nil
		}
	}
	if p == nil {
		if p, err = d.find(ctx, req.Address); err != nil {
			return written{}, err
		}
		if p == nil {
			w, err := d.create(ctx, req)
			if err == nil {
				d.remember(req.Address, w.id)
			}
			return w, err
		}
		d.remember(req.Address, strOf(p.Id))
		// A list item carries no ETag: the move reads the object.
		tag = ""
	}
	from := vnicOf(p)
	switch {
	case from == req.NIC && tag != "" && d.inPlace(p, req):
		return written{noop: true}, nil
	case from != req.NIC && (!reassign || boolOf(p.IsPrimary)):
		return written{}, d.elsewhere(ctx, p, req)
	}
	// The move is conditional on the ETag of a read of the object itself.
	if tag == "" {
		if p, tag, err = d.get(ctx, strOf(p.Id)); err != nil {
			return written{}, err
		}
		if p == nil {
			// Released between the list and the read: free, as below.
			return d.recreate(ctx, req)
		}
		switch from = vnicOf(p); {
		case from == req.NIC && d.inPlace(p, req):
			return written{noop: true}, nil
		case from != req.NIC && (!reassign || boolOf(p.IsPrimary)):
			return written{}, d.elsewhere(ctx, p, req)
		}
	}
	// From here on the write is a move, or, for an address read on its
	// VNIC already, the same write raising the epoch record (see inPlace).
	tags, err := d.record(p, req, "move")
	if errors.Is(err, provider.ErrStale) {
		// A move to a VNIC that does not exist is refused for that
		// first, as the contract says, stale or not.
		if _, verr := d.vnic(ctx, req.NIC); verr != nil {
			return written{}, verr
		}
	}
	if err != nil {
		return written{}, err
	}
	out, err := d.client.UpdatePrivateIp(sdk(change(ctx, req, false)), core.UpdatePrivateIpRequest{
		PrivateIpId:            p.Id,
		UpdatePrivateIpDetails: core.UpdatePrivateIpDetails{VnicId: common.String(req.NIC), FreeformTags: tags},
		IfMatch:                common.String(tag),
		RequestMetadata:        common.RequestMetadata{RetryPolicy: &d.once},
	})
	switch status(err) {
	case http.StatusOK:
		return written{id: strOf(p.Id), tag: strOf(out.Etag)}, nil
	case http.StatusPreconditionFailed:
		return written{}, d.changed(ctx, req, fmt.Sprintf("move %s from %s to %s", req.Address, from, req.NIC))
	case http.StatusNotFound:
		if _, verr := d.vnic(ctx, req.NIC); verr != nil {
			return written{}, verr
		}
		return d.recreate(ctx, req)
	}
	return written{}, mapError(ctx, "UpdatePrivateIp", err)
}

// elsewhere is the refusal of an assign whose address is on another VNIC
// when it may not move.
func (d *Driver) elsewhere(ctx context.Context, p *core.PrivateIp, req provider.Request) error {
	// The target must exist for the refusal to be about the address.
	if _, err := d.vnic(ctx, req.NIC); err != nil {
		return err
	}
	what := "reassignment was not allowed"
	if boolOf(p.IsPrimary) {
		what = "it is that VNIC's primary private IP"
	}
	return fmt.Errorf("oci: assign %s to %s: %w (%s; %s)", req.Address, req.NIC, provider.ErrAssignedElsewhere, vnicOf(p), what)
}

// inPlace says whether an assign that reads the address on its own VNIC
// has nothing to write: a call outside the journal (epoch 0), no epoch
// record kept, a primary private IP, or the record already at the
// request's epoch. Otherwise the assign still makes the move's write (an
// UpdatePrivateIp naming the VNIC, if-match on the ETag just read): it
// raises the record, so that the cloud refuses a move made for an older
// epoch by a node that has not heard of this one (the OCI capture test,
// seed 5: a node one event behind moved an address away at epoch 34 after
// the holder's assign at 35 had found it in place and written nothing, and
// the holder, its row done, never put it back); and since a read may show
// a placement late (the simulator's remap delay), an address in fact
// elsewhere is moved here rather than left there with the assign reported
// done. A record above the epoch makes the write fail with ErrStale.
func (d *Driver) inPlace(p *core.PrivateIp, req provider.Request) bool {
	if req.Epoch == 0 || !epochtag.Enforced || d.opts.IgnoreEpochRecord || boolOf(p.IsPrimary) {
		return true
	}
	rec, err := epochtag.Decode(p.FreeformTags)
	return err == nil && rec[req.Address] == req.Epoch
}

// recreate makes the address on the VNIC after its private IP was deleted
// between the driver's look and its write: its holder released it. A look
// that found the address free would make it the same way; the create is
// conditional in its own way (409 when anyone made the address anew since)
// and asks readiness again before it leaves. Failing until the next pass
// instead left the address on no VNIC for over a second in drains whose old
// holder released before the move landed (TestOCIClusterDrainAndFailover,
// deprovision hold 0).
func (d *Driver) recreate(ctx context.Context, req provider.Request) (written, error) {
	d.remember(req.Address, "")
	w, err := d.create(ctx, req)
	if err == nil {
		d.remember(req.Address, w.id)
	}
	return w, err
}

func (d *Driver) create(ctx context.Context, req provider.Request) (written, error) {
	tags, err := d.record(nil, req, "create")
	if err != nil {
		return written{}, err
	}
	out, err := d.client.CreatePrivateIp(sdk(change(ctx, req, false)), core.CreatePrivateIpRequest{
		CreatePrivateIpDetails: core.CreatePrivateIpDetails{VnicId: common.String(req.NIC), IpAddress: common.String(req.Address.String()), FreeformTags: tags},
		OpcRetryToken:          retryToken(req),
		RequestMetadata:        common.RequestMetadata{RetryPolicy: &d.once},
	})
	switch status(err) {
	case http.StatusOK:
		return written{id: strOf(out.Id), tag: strOf(out.Etag)}, nil
	case http.StatusConflict:
		return written{}, fmt.Errorf("oci: create %s on %s: %w: %s", req.Address, req.NIC, provider.ErrAssignedElsewhere, message(err))
	case http.StatusNotFound:
		return written{}, fmt.Errorf("oci: create %s on %s: %w: %s", req.Address, req.NIC, provider.ErrUnknownNIC, message(err))
	}
	return written{}, mapError(ctx, "CreatePrivateIp", err)
}

// record checks the request against the epoch record in the private IP's
// tags (p nil for a create) and returns the tags a write sends: the
// record raised to the request's epoch, the object's other tags kept. A
// request older than the record fails with provider.ErrStale; a record
// that cannot be read fails too, rather than be taken for no record.
func (d *Driver) record(p *core.PrivateIp, req provider.Request, what string) (map[string]string, error) {
	var have map[string]string
	if p != nil {
		have = p.FreeformTags
	}
	rec, err := epochtag.Decode(have)
	if err != nil {
		return nil, fmt.Errorf("oci: %s %s: the epoch record on private IP %s: %w", what, req.Address, strOf(p.Id), err)
	}
	if epochtag.Enforced && !d.opts.IgnoreEpochRecord && rec.Stale(req.Address, req.Epoch) {
		return nil, fmt.Errorf("oci: %s %s at epoch %d (the private IP's record holds %d) on %s: %w",
			what, req.Address, req.Epoch, rec[req.Address], req.NIC, provider.ErrStale)
	}
	rec.Raise(req.Address, req.Epoch)
	return epochtag.Merge(have, rec)
}

// changed is the error of a move the cloud refused with 412: ErrStale
// when a fresh read shows that a newer epoch wrote the private IP since,
// else ErrChanged.
func (d *Driver) changed(ctx context.Context, req provider.Request, what string) error {
	if id := d.cachedID(req.Address); id != "" && epochtag.Enforced && !d.opts.IgnoreEpochRecord {
		if p, _, err := d.get(ctx, id); err == nil && p != nil {
			if _, err := d.record(p, req, what); errors.Is(err, provider.ErrStale) {
				return fmt.Errorf("%w: refused with 412", err)
			}
		}
	}
	return fmt.Errorf("oci: %s: %w", what, ErrChanged)
}

// Unassign takes the address off the VNIC: DeletePrivateIp, conditional on
// the ETag read with the VNIC still holding it. When the VNIC does not hold
// it, or it moved away before the delete (412, and a new look shows it
// elsewhere), nothing changes and Unassign succeeds.
func (d *Driver) Unassign(ctx context.Context, req provider.Request) error {
	defer d.lock(req.Address)()
	out, err := d.client.ListPrivateIps(sdk(ctx), core.ListPrivateIpsRequest{
		VnicId: common.String(req.NIC), RequestMetadata: common.RequestMetadata{RetryPolicy: &d.read},
	})
	if status(err) == http.StatusNotFound {
		return fmt.Errorf("oci: unassign %s from %s: %w", req.Address, req.NIC, provider.ErrUnknownNIC)
	}
	if err != nil {
		return mapError(ctx, "ListPrivateIps", err)
	}
	// A VNIC holds at most a few dozen private IPs, one page; the pages
	// are followed all the same.
	items := out.Items
	for page := out.OpcNextPage; page != nil; {
		more, err := d.client.ListPrivateIps(sdk(ctx), core.ListPrivateIpsRequest{
			VnicId: common.String(req.NIC), Page: page, RequestMetadata: common.RequestMetadata{RetryPolicy: &d.read},
		})
		if err != nil {
			return mapError(ctx, "ListPrivateIps", err)
		}
		items = append(items, more.Items...)
		page = more.OpcNextPage
	}
	var id string
	for _, p := range items {
		if strOf(p.IpAddress) == req.Address.String() {
			if boolOf(p.IsPrimary) {
				return fmt.Errorf("oci: unassign %s from %s: it is the VNIC's primary private IP", req.Address, req.NIC)
			}
			id = strOf(p.Id)
		}
	}
	if id == "" {
		return nil
	}
	for range 2 {
		p, tag, err := d.get(ctx, id)
		if err != nil {
			return err
		}
		if p == nil || vnicOf(p) != req.NIC {
			return nil
		}
		if _, err := d.record(p, req, "release"); err != nil {
			return err
		}
		_, err = d.client.DeletePrivateIp(sdk(change(ctx, req, false)), core.DeletePrivateIpRequest{
			PrivateIpId: common.String(id), IfMatch: common.String(tag),
			RequestMetadata: common.RequestMetadata{RetryPolicy: &d.once},
		})
		switch status(err) {
		case http.StatusOK, http.StatusNoContent, http.StatusNotFound:
			d.remember(req.Address, "")
			return nil
		case http.StatusPreconditionFailed:
			// Changed since the read: look again; if it is still on
			// this VNIC, delete at the new ETag once more.
			continue
		}
		return mapError(ctx, "DeletePrivateIp", err)
	}
	return fmt.Errorf("oci: unassign %s from %s: %w twice", req.Address, req.NIC, ErrChanged)
}

// SetForwarding sets the VNIC's skipSourceDestCheck (UpdateVnic). When the
// VNIC holds the request's address, a request older than the address's
// epoch record is refused with provider.ErrStale: a zombie turning off
// forwarding on a NIC that a newer epoch gave the address back to. That
// is a check, not a condition (the VNIC's ETag does not cover the private
// IP); on a VNIC that no longer holds the address the change is harmless
// and goes ahead.
func (d *Driver) SetForwarding(ctx context.Context, req provider.Request, enabled bool) error {
	if epochtag.Enforced && !d.opts.IgnoreEpochRecord && req.Address.IsValid() && req.Epoch != 0 {
		p, err := d.find(ctx, req.Address)
		if err != nil {
			return err
		}
		if p != nil && vnicOf(p) == req.NIC {
			if _, err := d.record(p, req, "forwarding for"); err != nil {
				return err
			}
		}
	}
	_, err := d.client.UpdateVnic(sdk(change(ctx, req, true)), core.UpdateVnicRequest{
		VnicId:            common.String(req.NIC),
		UpdateVnicDetails: core.UpdateVnicDetails{SkipSourceDestCheck: common.Bool(enabled)},
		RequestMetadata:   common.RequestMetadata{RetryPolicy: &d.once},
	})
	if status(err) == http.StatusNotFound {
		return fmt.Errorf("oci: forwarding on %s: %w", req.NIC, provider.ErrUnknownNIC)
	}
	if err != nil {
		return mapError(ctx, "UpdateVnic", err)
	}
	return nil
}

// Describe finds the VNIC holding the address (ListPrivateIps by subnet
// and address) and its forwarding (GetVnic).
func (d *Driver) Describe(ctx context.Context, addr netip.Addr) (provider.Observation, error) {
	obs := provider.Observation{Address: addr}
	if !addr.IsValid() {
		return obs, errors.New("oci: describe: invalid address")
	}
	p, err := d.find(ctx, addr)
	if err != nil || p == nil {
		return obs, err
	}
	obs.NIC = vnicOf(p)
	v, err := d.vnic(ctx, obs.NIC)
	if err != nil {
		return provider.Observation{Address: addr}, fmt.Errorf("oci: describe %s on %s: %w", addr, obs.NIC, err)
	}
	obs.Forwarding = boolOf(v.SkipSourceDestCheck)
	return obs, nil
}

// status is the HTTP status of an OCI call's outcome: 200 for success,
// the service error's status, or -1 for an error that is not the
// service's (the network, the context, a refused readiness check).
func status(err error) int {
	if err == nil {
		return http.StatusOK
	}
	if se, ok := common.IsServiceError(err); ok {
		return se.GetHTTPStatusCode()
	}
	return -1
}

func message(err error) string {
	if se, ok := common.IsServiceError(err); ok {
		return se.GetCode() + ": " + se.GetMessage()
	}
	return err.Error()
}

// mapError sorts an SDK error into the contract's kinds: throttled (429)
// and transient (5xx, the network) are sentinel errors; a refused
// readiness check and the context's end pass through; the rest are
// permanent and keep OCI's code and message. A call whose caller's
// context ended is the context's end, whatever came back: net/http may
// hand over an answer that raced the cancellation (a simulator that
// answers 503 the moment the connection closes), and the caller must not
// take an abandoned call for the provider's refusal.
func mapError(ctx context.Context, call string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("oci: %s: %w (the answer that came back after it: %v)", call, cerr, err)
	}
	if errors.Is(err, gate.ErrNotReady) {
		return fmt.Errorf("oci: %s: %w", call, err)
	}
	if se, ok := common.IsServiceError(err); ok {
		switch c := se.GetHTTPStatusCode(); {
		case c == http.StatusTooManyRequests:
			return fmt.Errorf("oci: %s: %w: %s: %s", call, provider.ErrThrottled, se.GetCode(), se.GetMessage())
		case c >= 500:
			return fmt.Errorf("oci: %s: %w: %d %s: %s", call, provider.ErrUnavailable, c, se.GetCode(), se.GetMessage())
		case c == http.StatusPreconditionFailed:
			return fmt.Errorf("oci: %s: %w: %s", call, ErrChanged, se.GetMessage())
		}
		return fmt.Errorf("oci: %s: %d %s: %s", call, se.GetHTTPStatusCode(), se.GetCode(), se.GetMessage())
	}
	var ne net.Error
	if errors.As(err, &ne) || common.IsNetworkError(err) {
		return fmt.Errorf("oci: %s: %w: %v", call, provider.ErrUnavailable, err)
	}
	return fmt.Errorf("oci: %s: %w", call, err)
}

var _ provider.Provider = (*Driver)(nil)

func boolOf(b *bool) bool { return b != nil && *b }

func strOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
