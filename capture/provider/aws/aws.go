// Package aws is the provider driver for Amazon EC2: secondary private IPs
// on ENIs, and the source/dest check as forwarding. It speaks through the
// real SDK (aws-sdk-go-v2), with credentials and region from the standard
// chain (an instance profile in production) and an endpoint override for
// ipfence's simulator.
//
// Fencing rules: an acquire is never retried by the SDK, because a delayed
// retry of an old acquire could take the address back from a newer holder;
// reads are retried with backoff; after an acquire the driver describes the
// address until it is visible on the NIC or a deadline passes, since EC2
// remaps asynchronously. A change is sent only if the readiness check its
// context carries (gate.WithReady) passes as the request's last step
// before the send, after the driver's own looks: a node paused in between
// rechecks when it wakes. The epoch and idempotency key travel in the
// X-Ipfence-Epoch and X-Ipfence-Idempotency-Key headers: EC2 ignores them,
// the simulator records them.
package aws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ipfence/ipfence/capture/gate"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/callbudget"
)

// Header names carrying the fencing token to the simulator, and the
// address a forwarding change is made for (EC2's call names only the NIC).
const (
	HeaderEpoch          = "X-Ipfence-Epoch"
	HeaderIdempotencyKey = "X-Ipfence-Idempotency-Key"
	HeaderAddress        = "X-Ipfence-Address"
	// HeaderLineRevision carries the etcd revision of the epoch record
	// the node confirmed before the call (provider.Request.LineRevision),
	// a list as HeaderEpoch for a batch; absent off the etcd line.
	HeaderLineRevision = "X-Ipfence-Line-Revision"
)

// Options configure a driver.
type Options struct {
	// Region is the EC2 region; empty means the standard chain's.
	Region string
	// Endpoint overrides EC2's endpoint, such as the simulator's URL.
	Endpoint string
	// Credentials override the standard chain (tests use static ones).
	Credentials awssdk.CredentialsProvider
	// VisibleTimeout bounds the wait for an acquire to become visible;
	// 0 means 10 seconds.
	VisibleTimeout time.Duration
	// PollInterval is the pause between looks; 0 means 100 ms.
	PollInterval time.Duration
	// ReadAttempts is how many times a read is tried; 0 means 5.
	ReadAttempts int
	// MaxBackoff caps the pause between read attempts; 0 means 2 seconds.
	MaxBackoff time.Duration
	// Budget paces the calls (every attempt, the SDK's read retries too,
	// takes a token first) and pauses them when EC2 answers
	// RequestLimitExceeded; nil sends every call at once. The daemon
	// always gives one (callbudget.EC2 unless configured).
	Budget *callbudget.Budget
}

// Driver is an EC2 provider.
type Driver struct {
	client *ec2.Client
	opts   Options
}

// New builds a driver.
func New(ctx context.Context, o Options) (*Driver, error) {
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
	var loads []func(*config.LoadOptions) error
	if o.Region != "" {
		loads = append(loads, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		loads = append(loads, config.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	client := ec2.NewFromConfig(cfg, func(eo *ec2.Options) {
		if o.Endpoint != "" {
			eo.BaseEndpoint = awssdk.String(o.Endpoint)
		}
		eo.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = o.ReadAttempts
			so.MaxBackoff = o.MaxBackoff
		})
		eo.HTTPClient = plainBodies{eo.HTTPClient}
		if o.Budget != nil {
			eo.APIOptions = append(eo.APIOptions, budgeted(o.Budget))
		}
	})
	return &Driver{client: client, opts: o}, nil
}

// plainBodies hands net/http each request body as a plain reader. The
// SDK closes a request's body as soon as the response headers arrive, and
// its body wrapper's WriteTo answers io.EOF once closed; net/http's write
// loop, still making its last check that the body holds nothing more,
// takes that EOF as a failed write and closes the connection under the
// response being read. A read then fails to decode although EC2 answered:
// a retried describe (an extra call, seen in the call-count tests under
// load) or, worse, a mutation reported failed that EC2 applied. Hidden
// behind a plain Read, a closed body ends the check cleanly.
type plainBodies struct{ next awssdk.HTTPClient }

func (c plainBodies) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = plainBody{req.Body}
	}
	return c.next.Do(req)
}

// plainBody is a request body with only Read and Close.
type plainBody struct{ rc io.ReadCloser }

func (b plainBody) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b plainBody) Close() error               { return b.rc.Close() }

// budgeted makes every attempt of a call wait for a token of the driver's
// budget, as the first step of the attempt after the retry loop and
// before signing and the readiness check (which must stay the last step
// before the send: a long wait must not come between them), and tells the
// budget how EC2 answered. A call whose context ends while it waits is not
// sent and fails with the context's error. Describe* actions are reads,
// the rest writes, as EC2's own buckets divide them.
func budgeted(b *callbudget.Budget) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("IpfenceBudgetCall",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				return next.HandleInitialize(callbudget.Call(ctx), in)
			}), middleware.Before); err != nil {
			return err
		}
		return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("IpfenceBudget",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				class := callbudget.Write
				if strings.HasPrefix(awsmiddleware.GetOperationName(ctx), "Describe") {
					class = callbudget.Read
				}
				if err := b.Wait(ctx, class); err != nil {
					return middleware.FinalizeOutput{}, middleware.Metadata{}, err
				}
				out, md, err := next.HandleFinalize(ctx, in)
				var api smithy.APIError
				if errors.As(err, &api) && throttleCodes[api.ErrorCode()] {
					b.Throttled(class, 0)
				} else if err == nil || errors.As(err, &api) {
					b.Answered(class)
				}
				return out, md, err
			}), "Retry", middleware.After)
	}
}

// throttleCodes are EC2's answers that it throttles the account.
var throttleCodes = map[string]bool{"RequestLimitExceeded": true, "Throttling": true, "ThrottlingException": true}

// readyCheck asks the readiness check the call's context carries (see
// gate.WithReady) as the last step before the request is sent: after the
// driver's own looks, after signing, after any pause of the process. A
// node paused between the executor's check and the send wakes here, finds
// its pass too old or its epoch records moved on, and sends nothing.
func readyCheck(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("IpfenceReady",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if err := gate.Ready(ctx); err != nil {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, err
			}
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// mutation makes a call that is tried once, asks readiness right before
// it is sent, and carries the fencing token.
func mutation(req provider.Request) func(*ec2.Options) {
	return func(eo *ec2.Options) {
		eo.RetryMaxAttempts = 1
		eo.APIOptions = append(eo.APIOptions, readyCheck,
			smithyhttp.SetHeaderValue(HeaderEpoch, strconv.FormatUint(uint64(req.Epoch), 10)),
			smithyhttp.SetHeaderValue(HeaderIdempotencyKey, req.IdempotencyKey))
		if req.Address.IsValid() {
			eo.APIOptions = append(eo.APIOptions, smithyhttp.SetHeaderValue(HeaderAddress, req.Address.String()))
		}
		if rev := provider.LineRevisions(req); rev != "" {
			eo.APIOptions = append(eo.APIOptions, smithyhttp.SetHeaderValue(HeaderLineRevision, rev))
		}
	}
}

// Assign puts the address on the NIC (AssignPrivateIpAddresses) and waits
// until the change is visible or the deadline passes. It looks first, so
// that it knows the holder before: the wait ends when the address shows on
// this NIC, or on a NIC that is neither (another node moved it after this
// call took effect). An acquire that is acknowledged but not yet visible at
// the deadline is still a success: EC2 finishes it.
func (d *Driver) Assign(ctx context.Context, req provider.Request, reassign bool) error {
	before, err := d.Describe(ctx, req.Address)
	if err != nil {
		return err
	}
	_, err = d.client.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: awssdk.String(req.NIC),
		PrivateIpAddresses: []string{req.Address.String()},
		AllowReassignment:  awssdk.Bool(reassign),
	}, mutation(req))
	if err != nil {
		return mapError("AssignPrivateIpAddresses", err)
	}
	if before.NIC == req.NIC {
		return nil
	}
	deadline := time.Now().Add(d.opts.VisibleTimeout)
	for {
		obs, err := d.Describe(ctx, req.Address)
		if err == nil && obs.NIC != before.NIC {
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

// notAssigned is how EC2 says an unassign named an address the NIC does
// not hold: for the contract, a release that has nothing to do.
const notAssigned = "not assigned to interface"

// Unassign takes the address off the NIC (UnassignPrivateIpAddresses).
func (d *Driver) Unassign(ctx context.Context, req provider.Request) error {
	_, err := d.client.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: awssdk.String(req.NIC),
		PrivateIpAddresses: []string{req.Address.String()},
	}, mutation(req))
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "InvalidParameterValue" && strings.Contains(api.ErrorMessage(), notAssigned) {
		return nil
	}
	if err != nil {
		return mapError("UnassignPrivateIpAddresses", err)
	}
	return nil
}

// SetForwarding turns the NIC's source/dest check off (forwarding on) or on.
func (d *Driver) SetForwarding(ctx context.Context, req provider.Request, enabled bool) error {
	_, err := d.client.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: awssdk.String(req.NIC),
		SourceDestCheck:    &types.AttributeBooleanValue{Value: awssdk.Bool(!enabled)},
	}, mutation(req))
	if err != nil {
		return mapError("ModifyNetworkInterfaceAttribute", err)
	}
	return nil
}

// batchStamp makes a call carrying several actions, each with its own
// fencing token: the headers carry comma-separated lists, one entry per
// address in the call's order (the simulator records each address with
// its own; EC2 ignores them).
func batchStamp(reqs []provider.Request) func(*ec2.Options) {
	epochs := make([]string, len(reqs))
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		epochs[i] = strconv.FormatUint(uint64(r.Epoch), 10)
		keys[i] = r.IdempotencyKey
	}
	revs := provider.LineRevisions(reqs...)
	return func(eo *ec2.Options) {
		eo.RetryMaxAttempts = 1
		eo.APIOptions = append(eo.APIOptions, readyCheck,
			smithyhttp.SetHeaderValue(HeaderEpoch, strings.Join(epochs, ",")),
			smithyhttp.SetHeaderValue(HeaderIdempotencyKey, strings.Join(keys, ",")))
		if revs != "" {
			eo.APIOptions = append(eo.APIOptions, smithyhttp.SetHeaderValue(HeaderLineRevision, revs))
		}
	}
}

func addresses(reqs []provider.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.Address.String()
	}
	return out
}

// AssignMany puts every address of reqs on nic in one
// AssignPrivateIpAddresses call, and waits, as Assign does, until each
// has left the NIC it was on before (or the deadline passes).
func (d *Driver) AssignMany(ctx context.Context, nic string, reqs []provider.Request, reassign bool) error {
	if len(reqs) == 1 {
		return d.Assign(ctx, reqs[0], reassign)
	}
	addrs := make([]netip.Addr, len(reqs))
	for i, r := range reqs {
		addrs[i] = r.Address
	}
	before, err := d.DescribeMany(ctx, addrs)
	if err != nil {
		return err
	}
	_, err = d.client.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: awssdk.String(nic),
		PrivateIpAddresses: addresses(reqs),
		AllowReassignment:  awssdk.Bool(reassign),
	}, batchStamp(reqs))
	if err != nil {
		return mapError("AssignPrivateIpAddresses", err)
	}
	var moving []netip.Addr
	for _, a := range addrs {
		if before[a].NIC != nic {
			moving = append(moving, a)
		}
	}
	deadline := time.Now().Add(d.opts.VisibleTimeout)
	for len(moving) > 0 {
		now, err := d.DescribeMany(ctx, moving)
		if err == nil {
			moving = slices.DeleteFunc(moving, func(a netip.Addr) bool { return now[a].NIC != before[a].NIC })
		}
		if len(moving) == 0 || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.opts.PollInterval):
		}
	}
	return nil
}

// UnassignMany takes every address of reqs off nic in one
// UnassignPrivateIpAddresses call. EC2 refuses the whole call when one
// address is not on the NIC; the addresses are then released one by one,
// each as Unassign does.
func (d *Driver) UnassignMany(ctx context.Context, nic string, reqs []provider.Request) error {
	if len(reqs) == 1 {
		return d.Unassign(ctx, reqs[0])
	}
	_, err := d.client.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: awssdk.String(nic),
		PrivateIpAddresses: addresses(reqs),
	}, batchStamp(reqs))
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "InvalidParameterValue" && strings.Contains(api.ErrorMessage(), notAssigned) {
		var errs []error
		for _, r := range reqs {
			errs = append(errs, d.Unassign(ctx, r))
		}
		return errors.Join(errs...)
	}
	if err != nil {
		return mapError("UnassignPrivateIpAddresses", err)
	}
	return nil
}

// describeChunk is how many addresses one DescribeNetworkInterfaces
// filter names: each call answers with the NICs holding any of them,
// each NIC with all its addresses, so fewer, larger filters parse less.
const describeChunk = 1000

// DescribeMany reports where each address is, with one
// DescribeNetworkInterfaces call (paginated) per 1,000 addresses rather
// than one per address.
func (d *Driver) DescribeMany(ctx context.Context, addrs []netip.Addr) (map[netip.Addr]provider.Observation, error) {
	out := make(map[netip.Addr]provider.Observation, len(addrs))
	want := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		out[a] = provider.Observation{Address: a}
		want[a] = true
	}
	for start := 0; start < len(addrs); start += describeChunk {
		chunk := addrs[start:min(start+describeChunk, len(addrs))]
		vals := make([]string, len(chunk))
		for i, a := range chunk {
			vals[i] = a.String()
		}
		pages := ec2.NewDescribeNetworkInterfacesPaginator(d.client, &ec2.DescribeNetworkInterfacesInput{
			Filters: []types.Filter{{Name: awssdk.String("addresses.private-ip-address"), Values: vals}},
		})
		seen := map[netip.Addr]string{}
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, mapError("DescribeNetworkInterfaces", err)
			}
			for _, n := range page.NetworkInterfaces {
				id := awssdk.ToString(n.NetworkInterfaceId)
				for _, ip := range n.PrivateIpAddresses {
					a, err := netip.ParseAddr(awssdk.ToString(ip.PrivateIpAddress))
					if err != nil || !want[a] {
						continue
					}
					if other, dup := seen[a]; dup && other != id {
						return nil, fmt.Errorf("EC2 reports %s on 2 NICs (%s, %s), which it never should", a, other, id)
					}
					seen[a] = id
					out[a] = provider.Observation{Address: a, NIC: id, Forwarding: !awssdk.ToBool(n.SourceDestCheck)}
				}
			}
		}
	}
	return out, nil
}

// Describe finds the NIC holding the address (DescribeNetworkInterfaces by
// addresses.private-ip-address).
func (d *Driver) Describe(ctx context.Context, addr netip.Addr) (provider.Observation, error) {
	out, err := d.client.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{{Name: awssdk.String("addresses.private-ip-address"), Values: []string{addr.String()}}},
	})
	if err != nil {
		return provider.Observation{}, mapError("DescribeNetworkInterfaces", err)
	}
	obs := provider.Observation{Address: addr}
	switch len(out.NetworkInterfaces) {
	case 0:
		return obs, nil
	case 1:
	default:
		var ids []string
		for _, n := range out.NetworkInterfaces {
			ids = append(ids, awssdk.ToString(n.NetworkInterfaceId))
		}
		return obs, fmt.Errorf("EC2 reports %s on %d NICs (%s), which it never should", addr, len(ids), strings.Join(ids, ", "))
	}
	n := out.NetworkInterfaces[0]
	obs.NIC = awssdk.ToString(n.NetworkInterfaceId)
	obs.Forwarding = !awssdk.ToBool(n.SourceDestCheck)
	return obs, nil
}

// mapError sorts an SDK error into the contract's kinds: not found,
// conflict, throttled and transient (unavailable) are sentinel errors; the
// rest are permanent and keep EC2's code and message.
func mapError(call string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, gate.ErrNotReady) {
		return fmt.Errorf("%s: %w", call, err)
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		kind := error(nil)
		if throttleCodes[api.ErrorCode()] {
			kind = provider.ErrThrottled
		}
		switch api.ErrorCode() {
		case "InvalidNetworkInterfaceID.NotFound", "InvalidNetworkInterfaceID.Malformed":
			kind = provider.ErrUnknownNIC
		case "InvalidIPAddress.InUse":
			kind = provider.ErrAssignedElsewhere
		case "InternalError", "InternalFailure", "Unavailable", "ServiceUnavailable":
			kind = provider.ErrUnavailable
		}
		if kind == nil {
			var re *awshttp.ResponseError
			if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
				kind = provider.ErrUnavailable
			}
		}
		if kind != nil {
			return fmt.Errorf("%s: %w: %s: %s", call, kind, api.ErrorCode(), api.ErrorMessage())
		}
		return fmt.Errorf("%s: %s: %s", call, api.ErrorCode(), api.ErrorMessage())
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
		return fmt.Errorf("%s: %w: %v", call, provider.ErrUnavailable, err)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("%s: %w: %v", call, provider.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", call, err)
}
