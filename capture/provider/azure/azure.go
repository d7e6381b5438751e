// Package azure is the provider driver for Azure: secondary private IPs as
// ipConfigurations of network interfaces, and enableIPForwarding as
// forwarding. It speaks through the real SDK (armnetwork/v7 on azcore),
// with credentials from azidentity's default chain (environment, workload
// identity, managed identity, Azure CLI) unless Options names one, and an
// endpoint override for ipfence's simulator (capture/provider/azure/armsim).
//
// A NIC's ipConfigurations change only by a PUT of the whole NIC, a
// long-running operation that the driver polls to its end. A move is two
// writes, because ARM refuses an address that another NIC holds
// (PrivateIPAddressInUse): remove it from the old NIC, then add it to the
// new one. Between them the address is on no NIC; it is never on two.
// AssignMany, UnassignMany and DescribeMany (the executor's Batcher) carry
// many addresses in one write per NIC and one list of the resource group,
// which matters under ARM's write budget of 10 a second.
//
// # The cloud as a second wall
//
// Every PUT is conditional on the etag the driver read (If-Match), and is
// sent only if the readiness check the context carries (gate.WithReady)
// passes as the request's last step before the send. The order of one
// write is: read the NIC (GET, or the list for Describe) and note its
// etag; decide the change from what was read; ask readiness (is the pass
// at the action's epoch still current?); PUT with If-Match on the noted
// etag. The readiness check covers a node paused before the send; the etag
// covers what the check cannot see, another actor's write between this
// read and this write (a node paused after its check, a zombie whose
// fence is off): ARM answers 412 and changes nothing. On a 412 the driver
// reads the NIC again: when the address's placement on it (or, for
// forwarding, the setting) is still what the first read said, the
// conflicting write was about something else and the write is tried again
// with the new etag, readiness asked again; when it changed, the call
// fails with ErrConflict and sends nothing more, leaving the decision to
// the next pass. The etag is read inside the call, not when the pass
// planned it: a node whose whole call starts after another's write reads
// the new etag, and the etag alone cannot stop it.
//
// What stops that one is the epoch record (capture/provider/epochtag): a
// NIC's tags ipfence-epochs-N hold, for every address a write of ipfence
// placed or removed on it, the highest capture epoch that did so, and
// every PUT of an address's placement raises it in the same conditional
// write. Before a write the driver reads the record with the etag; an
// action at an older epoch than the record's is refused with
// provider.ErrStale and sends nothing (the others of a batch go on), and
// one that read before the newer write meets the 412 and, reading again,
// the newer record. An assign also reads every NIC's record for the
// address in the list it makes anyway, so that an address released by its
// holder at a newer epoch is not taken by an older one (that read is a
// check, not a condition). A forwarding change on the NIC holding the
// address is judged by that NIC's record too. A zombie with its gate off is thus stopped by the
// cloud's own record.
//
// A write is never retried by the SDK (a late retry could undo a newer
// holder's change); reads are, with azcore's backoff that honours
// Retry-After. The epoch and idempotency key travel in the
// X-Ipfence-Epoch and X-Ipfence-Idempotency-Key headers, as the AWS
// driver's: ARM ignores them, the simulator records them.
package azure

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v7"

	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/callbudget"
	"github.com/ipfence/ipfence/capture/provider/epochtag"
)

// Header names carrying the fencing token to the simulator, and the
// address a forwarding change is made for.
const (
	HeaderEpoch          = "X-Ipfence-Epoch"
	HeaderIdempotencyKey = "X-Ipfence-Idempotency-Key"
	HeaderAddress        = "X-Ipfence-Address"
	// HeaderAddresses lists the addresses of a write carrying several
	// actions, in the order of the epochs and keys of HeaderEpoch and
	// HeaderIdempotencyKey.
	HeaderAddresses = "X-Ipfence-Addresses"
	// HeaderLineRevision carries the etcd revision of the epoch record
	// the node confirmed before the call (provider.Request.LineRevision),
	// a list as HeaderEpoch for several actions; absent off the etcd
	// line.
	HeaderLineRevision = "X-Ipfence-Line-Revision"
)

// ErrConflict: the NIC changed since the driver read it, in a way that
// touches the call's address (or setting): another actor wrote first, and
// the call changed nothing more. The next pass decides again.
var ErrConflict = errors.New("the NIC changed since it was read")

// Options configure a driver.
type Options struct {
	// SubscriptionID and ResourceGroup hold every NIC the driver names;
	// both are required.
	SubscriptionID string
	ResourceGroup  string
	// Credential overrides azidentity's default chain (tests use a fake).
	Credential azcore.TokenCredential
	// Cloud is the Azure cloud; the zero value means the public one.
	Cloud cloud.Configuration
	// AuthorityHost, when set, is the Microsoft Entra ID authority the
	// default chain gets tokens from (https), instead of Cloud's or
	// AZURE_AUTHORITY_HOST: a sovereign or disconnected cloud's, or the
	// simulator's. The chain's instance discovery is then off: MSAL
	// skips it for the hosts Microsoft knows anyway, and for any other it
	// would ask login.microsoftonline.com to vouch for the host, a request
	// a disconnected cloud (and a test) must never send.
	AuthorityHost string
	// Endpoint overrides the cloud's Resource Manager endpoint, such as
	// the simulator's URL. ARM needs https for a bearer token.
	Endpoint string
	// Transport overrides the HTTP client (tests trust the simulator's
	// certificate with it).
	Transport policy.Transporter
	// PollFrequency is the pause between polls of a PUT's operation when
	// ARM sends no Retry-After; 0 means 1 second, azcore's minimum
	// outside tests.
	PollFrequency time.Duration
	// ReadRetries is how often a read is retried; 0 means 4.
	ReadRetries int32
	// RetryDelay and MaxRetryDelay shape the read retries' backoff; 0
	// means azcore's (800 ms, 60 s).
	RetryDelay    time.Duration
	MaxRetryDelay time.Duration
	// IgnoreEpochRecord turns off the refusals by the epoch record (the
	// record is still kept): for callers whose epochs are not one line
	// per address, such as the provider contract suite, whose concurrent
	// callers draw epochs from one counter and then race, and expect every
	// seize to succeed or to meet a conflict.
	IgnoreEpochRecord bool
	// WriteAttempts bounds the writes of one step: a 412 whose conflict
	// did not touch the address, or a seize finding the address taken
	// again; 0 means 5.
	WriteAttempts int
	// Budget paces the calls to ARM (every attempt takes a token first:
	// a GET, a poll of an operation and a read's retries from the read
	// bucket, a PUT from the write bucket) and pauses a bucket when ARM
	// answers 429, for its Retry-After; nil sends every call at once. The
	// daemon always gives one (callbudget.ARM unless configured).
	Budget *callbudget.Budget
}

// Driver is an Azure provider.
type Driver struct {
	client *armnetwork.InterfacesClient
	opts   Options
}

// New builds a driver.
func New(o Options) (*Driver, error) {
	if o.SubscriptionID == "" || o.ResourceGroup == "" {
		return nil, errors.New("azure: the subscription id and the resource group are required")
	}
	if o.PollFrequency == 0 {
		o.PollFrequency = time.Second
	}
	if o.ReadRetries == 0 {
		o.ReadRetries = 4
	}
	if o.WriteAttempts == 0 {
		o.WriteAttempts = 5
	}
	cred := o.Credential
	if cred == nil {
		dopts := &azidentity.DefaultAzureCredentialOptions{}
		// The chain's token requests go through the same transport as
		// ARM's, so that a test's trust in the simulator covers both.
		dopts.ClientOptions.Transport = o.Transport
		if o.AuthorityHost != "" {
			dopts.ClientOptions.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: o.AuthorityHost}
			dopts.DisableInstanceDiscovery = true
		}
		c, err := azidentity.NewDefaultAzureCredential(dopts)
		if err != nil {
			return nil, fmt.Errorf("azure: credentials from the default chain: %w", err)
		}
		cred = c
	}
	cfg := o.Cloud
	if cfg.Services == nil {
		cfg = cloud.AzurePublic
	}
	if o.Endpoint != "" {
		rm := cfg.Services[cloud.ResourceManager]
		cfg.Services = maps.Clone(cfg.Services)
		rm.Endpoint = o.Endpoint
		if rm.Audience == "" {
			rm.Audience = cloud.AzurePublic.Services[cloud.ResourceManager].Audience
		}
		cfg.Services[cloud.ResourceManager] = rm
	}
	copts := &arm.ClientOptions{
		ClientOptions: policy.ClientOptions{
			Cloud:     cfg,
			Transport: o.Transport,
			Retry: policy.RetryOptions{
				MaxRetries: o.ReadRetries, RetryDelay: o.RetryDelay, MaxRetryDelay: o.MaxRetryDelay,
			},
			PerRetryPolicies: []policy.Policy{readyPolicy{}},
		},
		// Registering resource providers needs rights a node should not
		// have; Microsoft.Network is registered wherever NICs exist.
		DisableRPRegistration: true,
	}
	if o.Budget != nil {
		// The budget's wait comes before the readiness check, which must
		// stay the last step before the send.
		copts.PerCallPolicies = []policy.Policy{callPolicy{}}
		copts.PerRetryPolicies = []policy.Policy{budgetPolicy{o.Budget}, readyPolicy{}}
	}
	client, err := armnetwork.NewInterfacesClient(o.SubscriptionID, cred, copts)
	if err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	return &Driver{client: client, opts: o}, nil
}

// readyPolicy asks the readiness check the request's context carries
// before a PUT is sent: it runs after the bearer token is attached, as the
// last policy before the transport, so a node paused anywhere before it
// rechecks when it wakes.
type readyPolicy struct{}

func (readyPolicy) Do(req *policy.Request) (*http.Response, error) {
	if req.Raw().Method != http.MethodGet {
		if err := gate.Ready(req.Raw().Context()); err != nil {
			return nil, err
		}
	}
	return req.Next()
}

// callPolicy marks a request as one call, so that the budget counts its
// retries.
type callPolicy struct{}

func (callPolicy) Do(req *policy.Request) (*http.Response, error) {
	return req.WithContext(callbudget.Call(req.Raw().Context())).Next()
}

// budgetPolicy makes every attempt wait for a token of the budget (a GET
// a read, anything else a write, as ARM counts them) and tells the budget
// of a 429 with its Retry-After. A request whose context ends while it
// waits is not sent and fails with the context's error.
type budgetPolicy struct{ b *callbudget.Budget }

func (p budgetPolicy) Do(req *policy.Request) (*http.Response, error) {
	class := callbudget.Write
	if req.Raw().Method == http.MethodGet {
		class = callbudget.Read
	}
	if err := p.b.Wait(req.Raw().Context(), class); err != nil {
		return nil, err
	}
	resp, err := req.Next()
	switch {
	case resp != nil && resp.StatusCode == http.StatusTooManyRequests:
		p.b.Throttled(class, callbudget.RetryAfter(resp.Header, time.Now()))
	case resp != nil:
		p.b.Answered(class)
	}
	return resp, err
}

// nicName reads a request's NIC: a name in the driver's resource group, or
// the full resource id of one.
func (d *Driver) nicName(nic string) (string, error) {
	if !strings.HasPrefix(nic, "/") {
		if nic == "" {
			return "", errors.New("azure: empty NIC name")
		}
		return nic, nil
	}
	id, err := arm.ParseResourceID(nic)
	if err != nil {
		return "", fmt.Errorf("azure: NIC id %q: %w", nic, err)
	}
	if !strings.EqualFold(id.ResourceType.String(), "Microsoft.Network/networkInterfaces") {
		return "", fmt.Errorf("azure: %q is a %s, not a network interface", nic, id.ResourceType)
	}
	if !strings.EqualFold(id.SubscriptionID, d.opts.SubscriptionID) || !strings.EqualFold(id.ResourceGroupName, d.opts.ResourceGroup) {
		return "", fmt.Errorf("azure: NIC %q is not in subscription %s, resource group %s, where this driver acts", nic, d.opts.SubscriptionID, d.opts.ResourceGroup)
	}
	return id.Name, nil
}

// get reads one NIC.
func (d *Driver) get(ctx context.Context, name string) (armnetwork.Interface, error) {
	resp, err := d.client.Get(ctx, d.opts.ResourceGroup, name, nil)
	if err != nil {
		return armnetwork.Interface{}, mapError("GET network interface "+name, err)
	}
	return resp.Interface, nil
}

// list reads every NIC of the resource group.
func (d *Driver) list(ctx context.Context) ([]*armnetwork.Interface, error) {
	var out []*armnetwork.Interface
	pages := d.client.NewListPager(d.opts.ResourceGroup, nil)
	for pages.More() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, mapError("list network interfaces of "+d.opts.ResourceGroup, err)
		}
		out = append(out, page.Value...)
	}
	return out, nil
}

// config finds the ipConfiguration of n holding a; -1 when none does.
func config(n *armnetwork.Interface, a netip.Addr) int {
	if n.Properties == nil {
		return -1
	}
	for i, c := range n.Properties.IPConfigurations {
		if c == nil || c.Properties == nil || c.Properties.PrivateIPAddress == nil {
			continue
		}
		if b, err := netip.ParseAddr(*c.Properties.PrivateIPAddress); err == nil && b == a {
			return i
		}
	}
	return -1
}

func isPrimary(c *armnetwork.InterfaceIPConfiguration) bool {
	return c.Properties != nil && c.Properties.Primary != nil && *c.Properties.Primary
}

func forwarding(n *armnetwork.Interface) bool {
	return n.Properties != nil && n.Properties.EnableIPForwarding != nil && *n.Properties.EnableIPForwarding
}

// put writes n back with If-Match on the etag it was read with, and polls
// the operation until it succeeds. The fencing token of each request goes
// with it: one request's in single values; several requests' as lists in
// the order of HeaderAddresses, one epoch and key per address.
func (d *Driver) put(ctx context.Context, reqs []provider.Request, n *armnetwork.Interface) error {
	name := str(n.Name)
	if n.Etag == nil || *n.Etag == "" {
		return fmt.Errorf("azure: NIC %s was read without an etag; refusing an unconditional write", name)
	}
	h := http.Header{}
	h.Set("If-Match", *n.Etag)
	if len(reqs) == 1 {
		h.Set(HeaderEpoch, strconv.FormatUint(uint64(reqs[0].Epoch), 10))
		h.Set(HeaderIdempotencyKey, reqs[0].IdempotencyKey)
		if reqs[0].Address.IsValid() {
			h.Set(HeaderAddress, reqs[0].Address.String())
		}
	} else {
		var addrs, epochs, keys []string
		for _, r := range reqs {
			addrs = append(addrs, r.Address.String())
			epochs = append(epochs, strconv.FormatUint(uint64(r.Epoch), 10))
			keys = append(keys, r.IdempotencyKey)
		}
		h.Set(HeaderAddresses, strings.Join(addrs, ","))
		h.Set(HeaderEpoch, strings.Join(epochs, ","))
		h.Set(HeaderIdempotencyKey, strings.Join(keys, ","))
	}
	if revs := provider.LineRevisions(reqs...); revs != "" {
		h.Set(HeaderLineRevision, revs)
	}
	wctx := policy.WithHTTPHeader(ctx, h)
	wctx = policy.WithRetryOptions(wctx, policy.RetryOptions{MaxRetries: -1})
	poller, err := d.client.BeginCreateOrUpdate(wctx, d.opts.ResourceGroup, name, *n, nil)
	if err != nil {
		return mapError("PUT network interface "+name, err)
	}
	// The polls are reads of the operation's status, retried as reads;
	// they carry neither the condition nor the token.
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: d.opts.PollFrequency}); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("azure: PUT network interface %s accepted, its outcome unknown: %w", name, err)
		}
		// ARM accepted the PUT: whatever stopped the polls (a throttled
		// or failed read), its change may or may not be made.
		return fmt.Errorf("azure: PUT network interface %s accepted, its outcome unknown: %w: %v", name, provider.ErrUnavailable, mapError("poll", err))
	}
	return nil
}

// write makes one conditional change to the named NIC: edit decides it
// from the NIC as read and the requests it is given (false: nothing to
// do), and same says whether a fresh read still shows what the first one
// said about the call's addresses or setting. A 412 is tried again only
// while same holds. When judge is set, requests the NIC's epoch record
// shows stale are left out (and reported with provider.ErrStale once the
// rest are written) and the write raises the record to the others'
// epochs.
func (d *Driver) write(ctx context.Context, reqs []provider.Request, n armnetwork.Interface, judge bool,
	edit func(n *armnetwork.Interface, reqs []provider.Request) (bool, error), same func(first, now *armnetwork.Interface) bool) error {
	first := n
	for attempt := 1; ; attempt++ {
		cp := n
		if n.Properties != nil {
			props := *n.Properties
			props.IPConfigurations = append([]*armnetwork.InterfaceIPConfiguration(nil), n.Properties.IPConfigurations...)
			cp.Properties = &props
		}
		todo, refused := reqs, error(nil)
		if judge {
			var err error
			if todo, refused, err = d.judged(&n, reqs); err != nil {
				return err
			}
			if len(todo) == 0 {
				return refused
			}
		}
		change, err := edit(&cp, todo)
		if err != nil || !change {
			return errors.Join(err, refused)
		}
		if judge {
			if err := raise(&cp, todo); err != nil {
				return err
			}
		}
		err = d.put(ctx, todo, &cp)
		if !isCode(err, http.StatusPreconditionFailed, "") {
			return errors.Join(err, refused)
		}
		now, gerr := d.get(ctx, str(n.Name))
		if gerr != nil {
			return fmt.Errorf("%w; then reading it again: %w", err, gerr)
		}
		if !same(&first, &now) {
			if judge {
				if _, stale, jerr := d.judged(&now, todo); jerr == nil && stale != nil {
					return fmt.Errorf("%w (refused with 412: %w)", stale, err)
				}
			}
			return fmt.Errorf("azure: %w: %s: %w", ErrConflict, str(n.Name), err)
		}
		if attempt >= d.opts.WriteAttempts {
			return fmt.Errorf("azure: %w: %s changed %d times while written (about other addresses): %w", ErrConflict, str(n.Name), attempt, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
		n = now
	}
}

// epochs reads the epoch record in a NIC's tags.
func epochs(n *armnetwork.Interface) (epochtag.Record, error) {
	tags := make(map[string]string, len(n.Tags))
	for k, v := range n.Tags {
		if v != nil {
			tags[k] = *v
		}
	}
	rec, err := epochtag.Decode(tags)
	if err != nil {
		return nil, fmt.Errorf("azure: the epoch record of NIC %s: %w", str(n.Name), err)
	}
	return rec, nil
}

// judged splits reqs by n's epoch record: the requests to carry out, and
// an error wrapping provider.ErrStale naming those it refuses (nil when
// none). A record it cannot read fails the call.
func (d *Driver) judged(n *armnetwork.Interface, reqs []provider.Request) ([]provider.Request, error, error) {
	rec, err := epochs(n)
	if err != nil {
		return nil, nil, err
	}
	return d.refuse(rec, str(n.Name), reqs)
}

// walled says whether the driver refuses what the epoch record shows
// stale.
func (d *Driver) walled() bool { return epochtag.Enforced && !d.opts.IgnoreEpochRecord }

// refuse leaves out the requests rec shows stale; see judged.
func (d *Driver) refuse(rec epochtag.Record, where string, reqs []provider.Request) ([]provider.Request, error, error) {
	if !d.walled() {
		return reqs, nil, nil
	}
	var todo []provider.Request
	var stale []string
	for _, r := range reqs {
		if rec.Stale(r.Address, r.Epoch) {
			stale = append(stale, fmt.Sprintf("%s at epoch %d (the record holds %d)", r.Address, r.Epoch, rec[r.Address]))
			continue
		}
		todo = append(todo, r)
	}
	if stale == nil {
		return todo, nil, nil
	}
	return todo, fmt.Errorf("azure: %s on %s: %w", strings.Join(stale, ", "), where, provider.ErrStale), nil
}

// raise writes the requests' epochs into n's record (the PUT carries it).
func raise(n *armnetwork.Interface, reqs []provider.Request) error {
	rec, err := epochs(n)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		rec.Raise(r.Address, r.Epoch)
	}
	tags := make(map[string]string, len(n.Tags))
	for k, v := range n.Tags {
		if v != nil {
			tags[k] = *v
		}
	}
	merged, err := epochtag.Merge(tags, rec)
	if err != nil {
		return fmt.Errorf("azure: the epoch record of NIC %s: %w", str(n.Name), err)
	}
	n.Tags = make(map[string]*string, len(merged))
	for k, v := range merged {
		n.Tags[k] = to.Ptr(v)
	}
	return nil
}

// samePlacement says whether two reads of a NIC agree on which of the
// requests' addresses it holds.
func samePlacement(reqs []provider.Request) func(first, now *armnetwork.Interface) bool {
	return func(first, now *armnetwork.Interface) bool {
		for _, r := range reqs {
			if (config(first, r.Address) >= 0) != (config(now, r.Address) >= 0) {
				return false
			}
		}
		return true
	}
}

// remove takes the requests' addresses off n in one conditional write;
// addresses n does not hold are left alone.
func (d *Driver) remove(ctx context.Context, reqs []provider.Request, n armnetwork.Interface) error {
	return d.write(ctx, reqs, n, true, func(n *armnetwork.Interface, reqs []provider.Request) (bool, error) {
		change := false
		for _, r := range reqs {
			i := config(n, r.Address)
			if i < 0 {
				continue
			}
			if isPrimary(n.Properties.IPConfigurations[i]) {
				return false, fmt.Errorf("azure: %s is the primary address of NIC %s, which ipfence never moves", r.Address, str(n.Name))
			}
			cfgs := n.Properties.IPConfigurations
			n.Properties.IPConfigurations = append(cfgs[:i:i], cfgs[i+1:]...)
			change = true
		}
		return change, nil
	}, samePlacement(reqs))
}

// add puts the requests' addresses on n in one conditional write, each in
// an ipConfiguration of its own in the subnet of n's primary.
func (d *Driver) add(ctx context.Context, reqs []provider.Request, n armnetwork.Interface) error {
	return d.write(ctx, reqs, n, true, func(n *armnetwork.Interface, reqs []provider.Request) (bool, error) {
		var subnet *armnetwork.Subnet
		for _, c := range n.Properties.IPConfigurations {
			if c != nil && isPrimary(c) && c.Properties != nil {
				subnet = c.Properties.Subnet
			}
		}
		var rec epochtag.Record
		if d.walled() {
			var err error
			if rec, err = epochs(n); err != nil {
				return false, err
			}
		}
		change := false
		for _, r := range reqs {
			a := r.Address
			if config(n, a) >= 0 {
				// In place: written only to raise the NIC's record.
				change = change || (rec != nil && r.Epoch > rec[a])
				continue
			}
			if subnet == nil {
				return false, fmt.Errorf("azure: NIC %s has no primary ipConfiguration with a subnet to put %s in", str(n.Name), a)
			}
			n.Properties.IPConfigurations = append(n.Properties.IPConfigurations, &armnetwork.InterfaceIPConfiguration{
				Name: to.Ptr(configName(a)),
				Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
					PrivateIPAddress:          to.Ptr(a.String()),
					PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
					PrivateIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
					Primary:                   to.Ptr(false),
					Subnet:                    &armnetwork.Subnet{ID: subnet.ID},
				},
			})
			change = true
		}
		return change, nil
	}, samePlacement(reqs))
}

// configName names the ipConfiguration ipfence adds for an address.
func configName(a netip.Addr) string {
	return "ipfence-" + strings.ReplaceAll(a.String(), ".", "-")
}

func checkAddr(a netip.Addr) error {
	if !a.Is4() {
		return fmt.Errorf("azure: %v: ipfence moves IPv4 secondary addresses only", a)
	}
	return nil
}

// Assign puts the address on the NIC. It reads every NIC of the resource
// group first; when another NIC holds the address and reassign is set, it
// takes it off that NIC and then adds it to this one, each a conditional
// write (see the package documentation). When the add finds the address
// taken meanwhile (PrivateIPAddressInUse), a seize reads again and tries
// again after a random pause, up to WriteAttempts, and then fails with
// ErrConflict; an assign without reassignment fails with
// provider.ErrAssignedElsewhere.
func (d *Driver) Assign(ctx context.Context, req provider.Request, reassign bool) error {
	name, err := d.nicName(req.NIC)
	if err != nil {
		return err
	}
	return d.assign(ctx, name, []provider.Request{req}, reassign)
}

// AssignMany puts every address of reqs on nic as Assign does for one,
// with one write to each NIC involved: one per NIC the addresses leave,
// then one to nic. An error means any of them may or may not have moved.
func (d *Driver) AssignMany(ctx context.Context, nic string, reqs []provider.Request, reassign bool) error {
	name, err := d.nicName(nic)
	if err != nil {
		return err
	}
	return d.assign(ctx, name, reqs, reassign)
}

func (d *Driver) assign(ctx context.Context, name string, reqs []provider.Request, reassign bool) error {
	if len(reqs) == 0 {
		return nil
	}
	for _, r := range reqs {
		if err := checkAddr(r.Address); err != nil {
			return err
		}
	}
	what := reqs[0].Address.String()
	if len(reqs) > 1 {
		what = fmt.Sprintf("%d addresses", len(reqs))
	}
	for attempt := 1; ; attempt++ {
		nics, err := d.list(ctx)
		if err != nil {
			return err
		}
		var target *armnetwork.Interface
		for _, n := range nics {
			if str(n.Name) == name {
				target = n
			}
		}
		if target == nil {
			t, err := d.get(ctx, name)
			if err != nil {
				return err
			}
			target = &t
		}
		// The address's epoch record over every NIC: one that released
		// it keeps its record, so that an older action cannot take the
		// address back from the released state either.
		rec := epochtag.Record{}
		for _, n := range nics {
			nr, err := epochs(n)
			if err != nil {
				return err
			}
			for a, e := range nr {
				rec.Raise(a, e)
			}
		}
		holders := map[string]*armnetwork.Interface{}
		leaving := map[string][]provider.Request{}
		var todo, stale []provider.Request
		for _, r := range reqs {
			var holder *armnetwork.Interface
			for _, n := range nics {
				if config(n, r.Address) < 0 {
					continue
				}
				if holder != nil {
					return fmt.Errorf("azure: ARM reports %s on 2 NICs (%s, %s), which it never should", r.Address, str(holder.Name), str(n.Name))
				}
				holder = n
			}
			if holder != nil && str(holder.Name) == name {
				// In place already. The write is still made, to raise the
				// record, when it holds an older epoch: otherwise a node
				// that has not heard of this epoch could move the address
				// away with an older one (see hold in the OCI driver).
				switch {
				case d.walled() && rec.Stale(r.Address, r.Epoch):
					stale = append(stale, r)
				case d.walled() && r.Epoch > rec[r.Address]:
					todo = append(todo, r)
				}
				continue
			}
			if holder != nil {
				hn := str(holder.Name)
				if !reassign {
					return fmt.Errorf("azure: assign %s to %s: %w (%s)", r.Address, name, provider.ErrAssignedElsewhere, hn)
				}
				if isPrimary(holder.Properties.IPConfigurations[config(holder, r.Address)]) {
					return fmt.Errorf("azure: assign %s to %s: %w: it is the primary address of %s", r.Address, name, provider.ErrAssignedElsewhere, hn)
				}
			}
			if d.walled() && rec.Stale(r.Address, r.Epoch) {
				stale = append(stale, r)
				continue
			}
			todo = append(todo, r)
			if holder == nil {
				continue
			}
			hn := str(holder.Name)
			holders[hn] = holder
			leaving[hn] = append(leaving[hn], r)
		}
		_, refused, _ := d.refuse(rec, "the resource group's NICs", stale)
		if len(todo) == 0 {
			return refused
		}
		for _, hn := range slices.Sorted(maps.Keys(leaving)) {
			if err := d.remove(ctx, leaving[hn], *holders[hn]); err != nil {
				return fmt.Errorf("azure: move %s from %s to %s, removing: %w", what, hn, name, err)
			}
		}
		err = d.add(ctx, todo, *target)
		if err == nil {
			return refused
		}
		if !isCode(err, http.StatusBadRequest, "PrivateIPAddressInUse") {
			return fmt.Errorf("azure: assign %s to %s: %w", what, name, err)
		}
		if !reassign {
			return fmt.Errorf("azure: assign %s to %s: %w: %w", what, name, provider.ErrAssignedElsewhere, err)
		}
		// Others keep taking the address between this seize's read and
		// its write: they wrote first, every time.
		if attempt >= d.opts.WriteAttempts {
			return fmt.Errorf("azure: assign %s to %s: %w: taken again by others %d times: %w", what, name, ErrConflict, attempt, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// UnassignMany takes every address of reqs off nic in one write; those
// nic does not hold are left alone.
func (d *Driver) UnassignMany(ctx context.Context, nic string, reqs []provider.Request) error {
	name, err := d.nicName(nic)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if err := checkAddr(r.Address); err != nil {
			return err
		}
	}
	n, err := d.get(ctx, name)
	if err != nil {
		return err
	}
	if err := d.remove(ctx, reqs, n); err != nil {
		return fmt.Errorf("azure: unassign %d addresses from %s: %w", len(reqs), name, err)
	}
	return nil
}

// DescribeMany reports where each address is, from one list of the
// resource group's NICs.
func (d *Driver) DescribeMany(ctx context.Context, addrs []netip.Addr) (map[netip.Addr]provider.Observation, error) {
	nics, err := d.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[netip.Addr]provider.Observation, len(addrs))
	for _, a := range addrs {
		obs := provider.Observation{Address: a}
		for _, n := range nics {
			if config(n, a) < 0 {
				continue
			}
			if obs.NIC != "" {
				return nil, fmt.Errorf("azure: ARM reports %s on 2 NICs (%s, %s), which it never should", a, obs.NIC, str(n.Name))
			}
			obs.NIC, obs.Forwarding = str(n.Name), forwarding(n)
		}
		out[a] = obs
	}
	return out, nil
}

// pause waits a random while that grows with the attempt, so that racing
// writers do not keep meeting.
func pause(ctx context.Context, attempt int) error {
	t := time.NewTimer(rand.N(time.Duration(attempt) * 10 * time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Unassign takes the address off the NIC; a NIC that does not hold it is
// left alone and the call succeeds.
func (d *Driver) Unassign(ctx context.Context, req provider.Request) error {
	name, err := d.nicName(req.NIC)
	if err != nil {
		return err
	}
	if err := checkAddr(req.Address); err != nil {
		return err
	}
	n, err := d.get(ctx, name)
	if err != nil {
		return err
	}
	if err := d.remove(ctx, []provider.Request{req}, n); err != nil {
		return fmt.Errorf("azure: unassign %s from %s: %w", req.Address, name, err)
	}
	return nil
}

// SetForwarding turns the NIC's enableIPForwarding on or off.
func (d *Driver) SetForwarding(ctx context.Context, req provider.Request, enabled bool) error {
	name, err := d.nicName(req.NIC)
	if err != nil {
		return err
	}
	n, err := d.get(ctx, name)
	if err != nil {
		return err
	}
	err = d.write(ctx, []provider.Request{req}, n, false, func(n *armnetwork.Interface, _ []provider.Request) (bool, error) {
		if forwarding(n) == enabled {
			return false, nil
		}
		// On the NIC holding the address, a request older than its
		// epoch record is a zombie's: refused, and the PUT's If-Match
		// makes the check hold until the write.
		if req.Address.IsValid() && config(n, req.Address) >= 0 {
			rec, err := epochs(n)
			if err != nil {
				return false, err
			}
			if _, stale, _ := d.refuse(rec, str(n.Name), []provider.Request{req}); stale != nil {
				return false, stale
			}
		}
		n.Properties.EnableIPForwarding = to.Ptr(enabled)
		return true, nil
	}, func(first, now *armnetwork.Interface) bool { return forwarding(first) == forwarding(now) })
	if err != nil {
		return fmt.Errorf("azure: set forwarding of %s to %t: %w", name, enabled, err)
	}
	return nil
}

// Describe finds the NIC of the resource group holding the address, from
// one list of the group's NICs.
func (d *Driver) Describe(ctx context.Context, addr netip.Addr) (provider.Observation, error) {
	if !addr.IsValid() {
		return provider.Observation{}, errors.New("azure: describe: invalid address")
	}
	nics, err := d.list(ctx)
	if err != nil {
		return provider.Observation{}, err
	}
	obs := provider.Observation{Address: addr}
	for _, n := range nics {
		if config(n, addr) < 0 {
			continue
		}
		if obs.NIC != "" {
			return provider.Observation{Address: addr}, fmt.Errorf("azure: ARM reports %s on 2 NICs (%s, %s), which it never should", addr, obs.NIC, str(n.Name))
		}
		obs.NIC, obs.Forwarding = str(n.Name), forwarding(n)
	}
	return obs, nil
}

// isCode reports whether err is ARM's answer with the status and, when
// code is not empty, the error code.
func isCode(err error, status int, code string) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status && (code == "" || strings.EqualFold(re.ErrorCode, code))
}

// mapError sorts an SDK error into the contract's kinds, keeping ARM's
// status, code and message (and the *azcore.ResponseError for errors.As).
func mapError(call string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("azure: %s: %w", call, err)
	}
	if errors.Is(err, gate.ErrNotReady) {
		return fmt.Errorf("azure: %s: %w", call, err)
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		what := fmt.Sprintf("%d %s", re.StatusCode, re.ErrorCode)
		switch {
		case re.StatusCode == http.StatusNotFound && (re.ErrorCode == "ResourceNotFound" || re.ErrorCode == "NotFound"):
			return fmt.Errorf("azure: %s: %w: %s: %w", call, provider.ErrUnknownNIC, what, err)
		case re.StatusCode == http.StatusTooManyRequests:
			return fmt.Errorf("azure: %s: %w: %s: %w", call, provider.ErrThrottled, what, err)
		case re.StatusCode >= 500:
			return fmt.Errorf("azure: %s: %w: %s: %w", call, provider.ErrUnavailable, what, err)
		}
		return fmt.Errorf("azure: %s: %s: %w", call, what, err)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("azure: %s: %w: %w", call, provider.ErrUnavailable, err)
	}
	return fmt.Errorf("azure: %s: %w", call, err)
}

var _ provider.Provider = (*Driver)(nil)

// str reads an optional string of the SDK's models.
func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
