package control

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ipfence/ipfence/verify/netfault"
)

// NftNet cuts links between nodes with nftables, run on each node through
// its remote (as root: the node needs sudo unless it logs in as root),
// with the same table and rules as netfault.Netns. After each partition
// and heal it probes every ordered pair of nodes with a TCP connection to
// the peer's SSH port, from the first node: a cut link must time out, an
// open one must connect (or be refused, which is an answer too).
type NftNet struct {
	nodes   []string
	remotes map[string]Remote
	ips     map[string]string
	probeAt map[string]string // node → host/port to probe it at
	// ProbeTimeout bounds one probe (default 3s): the time a cut link
	// takes to be seen as cut. It includes starting the probe, which on a
	// loaded machine can take a good part of a second.
	ProbeTimeout time.Duration
	// Ledger receives every confirmation.
	Ledger *Ledger
	// ConfirmWithin bounds each check (default 30s).
	ConfirmWithin time.Duration
}

// NewNftNet returns the network of nodes, each with an IPv4 address (its
// packets' source address as the others see it) and a remote.
func NewNftNet(nodes []Node, remotes map[string]Remote, ledger *Ledger) (*NftNet, error) {
	n := &NftNet{remotes: remotes, ips: map[string]string{}, probeAt: map[string]string{}, ProbeTimeout: 3 * time.Second, Ledger: ledger}
	if n.Ledger == nil {
		n.Ledger = &Ledger{}
	}
	for _, node := range nodes {
		a, err := netip.ParseAddr(node.Address)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("control: node %s: partitions need an IPv4 address, not %q", node.Name, node.Address)
		}
		if remotes[node.Name] == nil {
			return nil, fmt.Errorf("control: node %s has no remote", node.Name)
		}
		n.nodes = append(n.nodes, node.Name)
		n.ips[node.Name] = a.String()
		port := node.Port
		if port == 0 {
			port = 22
		}
		n.probeAt[node.Name] = a.String() + "/" + strconv.Itoa(port)
	}
	return n, nil
}

// Partition cuts exactly the grudge's links, heals the others, and
// confirms it by probes.
func (n *NftNet) Partition(ctx context.Context, g netfault.Grudge) error {
	for _, node := range g.Nodes() {
		if _, ok := n.ips[node]; !ok {
			return fmt.Errorf("control: grudge %s names node %q, not one of %v", g, node, n.nodes)
		}
	}
	var errs []error
	for _, b := range n.nodes {
		var from []string
		for _, a := range n.nodes {
			if g.Cuts(a, b) {
				from = append(from, n.ips[a])
			}
		}
		script := netfault.NftScript(from)
		res, err := n.remotes[b].Run(ctx, Cmd{Line: "nft -f -", Stdin: strings.NewReader(script)})
		if err == nil && (res.Exit != 0 || res.Signal != "") {
			err = &ExitError{Node: b, Line: "nft -f - (partition)", Result: res}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	fault := "partition"
	if len(g.Nodes()) == 0 {
		fault = "heal"
	}
	if err := n.confirm(ctx, fault, g); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Heal removes every cut and confirms every link open.
func (n *NftNet) Heal(ctx context.Context) error { return n.Partition(ctx, nil) }

// probeLine probes the targets (host/port) at once from one node and
// prints one line per target: the target and 0 when it connected (or was
// refused: the peer's RST came back, so the link is open), else the
// status of the attempt (124: timed out). bash's /dev/tcp is the one TCP
// client every Debian node has. One command per node rather than per pair
// keeps the number of SSH sessions down: on a loaded machine each costs
// more than the connection it makes.
func (n *NftNet) probeLine(targets []string) string {
	secs := strconv.FormatFloat(n.ProbeTimeout.Seconds(), 'f', 3, 64)
	var b strings.Builder
	b.WriteString(`command -v bash >/dev/null || { echo "probing needs bash" >&2; exit 127; }; for t in`)
	for _, t := range targets {
		b.WriteString(" " + Quote(t))
	}
	fmt.Fprintf(&b, `; do ( out=$(timeout %s bash -c "exec 3<>/dev/tcp/$t" 2>&1); st=$?; case "$out" in *refused*) st=0;; esac; echo "$t $st" ) & done; wait`, secs)
	return b.String()
}

// confirm probes every ordered pair and compares with g. A connection is
// proof that a link is open, so a cut link that connects fails at once. A
// probe that times out is only what a cut looks like: on a loaded machine
// an open link's probe may time out too, so open links that did are probed
// again until they connect or ConfirmWithin has passed.
func (n *NftNet) confirm(ctx context.Context, fault string, g netfault.Grudge) error {
	deadline := time.Now().Add(within(n.ConfirmWithin))
	c := Confirmation{Fault: fault, Target: g.String()}
	var pairs [][2]string
	for _, a := range n.nodes {
		for _, b := range n.nodes {
			if a != b {
				pairs = append(pairs, [2]string{a, b})
			}
		}
	}
	found := map[[2]string]string{}
	pending := pairs
	fail := func(format string, a ...any) error {
		c.Detail = n.detail(pairs, found)
		n.Ledger.Add(c)
		return fmt.Errorf("control: %s %s: %w: %s", fault, g, ErrNotConfirmed, fmt.Sprintf(format, a...))
	}
	for {
		c.Checks++
		reached, why, err := n.probe(ctx, pending)
		if err != nil {
			return fail("probing: %v", err)
		}
		var again, wrong [][2]string
		for i, p := range pending {
			cut := g.Cuts(p[0], p[1]) || g.Cuts(p[1], p[0])
			switch {
			case reached[i] && cut:
				found[p] = "reached"
				wrong = append(wrong, p)
			case reached[i]:
				found[p] = "reached"
			case cut:
				found[p] = "cut"
			default:
				found[p] = "cut"
				if why[i] != "" {
					found[p] = "cut (" + clip(why[i]) + ")"
				}
				again = append(again, p)
			}
		}
		if len(wrong) > 0 {
			return fail("%s", n.detail(wrong, found))
		}
		if len(again) == 0 {
			c.Confirmed = true
			c.Detail = n.detail(pairs, found)
			n.Ledger.Add(c)
			return nil
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return fail("%s, after %d rounds of probes", n.detail(again, found), c.Checks)
		}
		pending = again
		select {
		case <-ctx.Done():
		case <-time.After(pollEvery):
		}
	}
}

func (n *NftNet) detail(pairs [][2]string, found map[[2]string]string) string {
	var parts []string
	for _, p := range pairs {
		parts = append(parts, p[0]+"→"+p[1]+" "+found[p])
	}
	return strings.Join(parts, ", ")
}

// probe probes the pairs at once, one command per source node, and says
// whether each connected and, when one did not, the attempt's status.
func (n *NftNet) probe(ctx context.Context, pairs [][2]string) ([]bool, []string, error) {
	reached := make([]bool, len(pairs))
	why := make([]string, len(pairs))
	bySource := map[string][]int{}
	var sources []string
	for i, p := range pairs {
		if bySource[p[0]] == nil {
			sources = append(sources, p[0])
		}
		bySource[p[0]] = append(bySource[p[0]], i)
	}
	errs := make([]error, len(sources))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for si, src := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var targets []string
			for _, i := range bySource[src] {
				targets = append(targets, n.probeAt[pairs[i][1]])
			}
			res, err := n.remotes[src].Run(ctx, Cmd{Line: n.probeLine(targets)})
			if err == nil && res.Exit != 0 {
				err = &ExitError{Node: src, Line: "probe of " + strings.Join(targets, " "), Result: res}
			}
			if err != nil {
				errs[si] = err
				return
			}
			status := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				if t, st, ok := strings.Cut(line, " "); ok {
					status[t] = st
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, i := range bySource[src] {
				st, ok := status[n.probeAt[pairs[i][1]]]
				switch {
				case !ok:
					errs[si] = fmt.Errorf("control: %s: probe of %s printed nothing: %q", src, pairs[i][1], res.Stdout)
				case st == "0":
					reached[i] = true
				case st == "124":
				default:
					why[i] = "status " + st
				}
			}
		}()
	}
	wg.Wait()
	return reached, why, errors.Join(errs...)
}
