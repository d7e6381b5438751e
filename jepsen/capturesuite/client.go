package capturesuite

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/ipfence/ipfence/internal/jsonhttp"
	"github.com/ipfence/ipfence/verify/harness"
)

// opTimeout bounds one client operation: past it the operation is info.
const opTimeout = 3 * time.Second

// intentOpTimeout bounds a drain or undrain: longer than the 4 s a node
// takes at most to read a majority and see its intent held (then it
// answers 503), so that the node's answer, not the client's patience,
// decides the outcome.
const intentOpTimeout = 6 * time.Second

// client runs the capture workload's operations for one process:
//
//	read     {"address": A} → {"address": A, "holder": NIC or nil}: where the
//	         provider says A is, through the cloud's API (its SDK and the
//	         driver the nodes use: EC2's DescribeNetworkInterfaces, ARM's
//	         list of NICs, OCI's ListPrivateIps and GetVnic)
//	drain    {"node": N}, sent to the client's node: N must give up its
//	         addresses
//	undrain  {"node": N}, likewise: N may take them back
//	status   the client's node's view: {"node", "stale": [...], "drained": [...]}
type client struct {
	c    *cluster
	node string
	read reader
}

func (cl *client) Open(ctx context.Context, node string) (harness.Client, error) {
	d, err := cl.c.openReader(ctx, node)
	if err != nil {
		return nil, err
	}
	return &client{c: cl.c, node: node, read: d}, nil
}

func (cl *client) Setup(context.Context) error    { return nil }
func (cl *client) Teardown(context.Context) error { return nil }
func (cl *client) Close(context.Context) error    { return nil }

func (cl *client) Invoke(ctx context.Context, op harness.Op) harness.Completion {
	limit := opTimeout
	if op.F == "drain" || op.F == "undrain" {
		limit = intentOpTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	switch op.F {
	case "read":
		a, _ := op.Value.(map[string]any)["address"].(string)
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return harness.Fail(op.Value, fmt.Sprintf("bad address %q", a))
		}
		obs, err := cl.read.Describe(ctx, addr)
		if err != nil {
			// A read changes nothing, so a failed one certainly did not
			// happen.
			return harness.Fail(op.Value, err.Error())
		}
		var holder any
		if obs.NIC != "" {
			holder = obs.NIC
		}
		return harness.OK(map[string]any{"address": a, "holder": holder})
	case "drain", "undrain":
		n, _ := op.Value.(map[string]any)["node"].(string)
		if !slices.Contains(cl.c.nodes, n) {
			return harness.Fail(op.Value, fmt.Sprintf("no node %q", n))
		}
		err := cl.c.post(ctx, cl.node, "/v1/members/"+n+"/"+op.F, nil)
		var refused *jsonhttp.StatusError
		switch {
		case err == nil:
			return harness.OK(op.Value)
		case errors.Is(err, syscall.ECONNREFUSED):
			// Nothing listened: the request never reached a node.
			return harness.Fail(op.Value, err.Error())
		case errors.As(err, &refused) && refused.Code >= 400 && refused.Code < 500:
			// The node refused it: not recorded.
			return harness.Fail(op.Value, err.Error())
		}
		return harness.Info(op.Value, err.Error())
	case "status":
		st, err := cl.c.status(ctx, cl.node)
		if err != nil {
			return harness.Fail(op.Value, err.Error())
		}
		stale, drained := []any{}, []any{}
		for _, m := range st.Members {
			if m.Stale {
				stale = append(stale, m.Node)
			}
			if m.Drained {
				drained = append(drained, m.Node)
			}
		}
		return harness.OK(map[string]any{"node": st.Node, "stale": stale, "drained": drained})
	}
	return harness.Fail(op.Value, "unknown operation "+op.F)
}
