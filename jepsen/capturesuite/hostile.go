package capturesuite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/federation"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/nemesis"
)

// The hostile nemesis is a buggy or hostile peer (issue 14): it holds the
// federation's secret, signs as a member and sends one node events no
// member makes — counters at 2^64−1 and 2^63 or far ahead, forged and
// non-member origins, drains of non-members, keys no pool has, a batch
// from one member signed by another, a signed request sent twice — and
// replays real events it pulled from another node. Each event goes in a
// batch of its own; the node must refuse every forged one (400, or 403 for
// the forged sender, 401 for the resent request) and count it in
// ipfence_federation_refused_events_total. The "hostile" checker reports
// what was sent and refused and the counters' increase, and is invalid
// when a node took an event it must refuse; what the events would have
// done is the fence's and single-holder's to find.

// hostileGroups are what one attack sends: epoch records out of bounds or
// too far ahead, Lamport times and seqs out of bounds, origins and
// subjects that are no member's or forged (with a batch signed by another
// member and a signed request sent twice), and real events replayed. Each
// attack is one group, so that one that would stop everything (a Lamport
// clock at its top, were it taken) does not hide what another does.
var hostileGroups = []string{"epochs", "clocks", "origins", "replays"}

// hostileChoice draws the node to attack, the member to sign as and the
// group of events.
func hostileChoice(nodes []string) nemesis.Choose {
	return func(r *gen.Rand) any {
		t := r.IntN(len(nodes))
		s := (t + 1 + r.IntN(len(nodes)-1)) % len(nodes)
		return map[string]any{"node": nodes[t], "sender": nodes[s], "events": hostileGroups[r.IntN(len(hostileGroups))]}
	}
}

// hostileLog is what the hostile nemesis sent and what came back.
type hostileLog struct {
	mu       sync.Mutex
	attacks  int
	sent     int            // forged events and requests that must be refused
	refused  int            // of those, refused
	accepted []string       // of those, taken: findings
	replayed int            // real events replayed
	applied  int            // of those, applied (the node had not had them)
	counted  map[string]int // increase of the refusal counters, by reason
	errors   []string       // requests that got no answer (a node down)
}

// forged is one event or request the node must refuse.
type forged struct {
	class string
	from  string // the batch's sender; signer signs as it unless set
	as    string // the name the request is signed with, when not from
	ev    federation.Event
}

func hostileFault(c *cluster, log *hostileLog) nemesis.Fault {
	return nemesis.Fault{
		Start: func(ctx context.Context, v any) (string, error) {
			target, sender := nodeArg(v), stringArg(v, "sender")
			if !slices.Contains(c.nodes, target) || !slices.Contains(c.nodes, sender) || target == sender {
				return "", fmt.Errorf("hostile: node %q and sender %q must be two nodes of %v", target, sender, c.nodes)
			}
			group := stringArg(v, "events")
			if !slices.Contains(hostileGroups, group) {
				return "", fmt.Errorf("hostile: events %q is not one of %s", group, strings.Join(hostileGroups, ", "))
			}
			return c.attack(ctx, log, target, sender, group)
		},
		Stop: func(context.Context) (string, error) { return "nothing to undo", nil },
	}
}

// attack sends target the forged events as sender, then replays real ones.
func (c *cluster) attack(ctx context.Context, log *hostileLog, target, sender, group string) (string, error) {
	before, err := c.refusedCounters(ctx, target)
	if err != nil {
		log.add(func(l *hostileLog) { l.errors = append(l.errors, fmt.Sprintf("%s: metrics: %v", target, err)) })
		return target + " unreachable", nil
	}
	// What the target holds: the highest seq of each origin, and the
	// epoch lines, so that the counters are plausible but for the one
	// each event breaks.
	recs, err := c.records(ctx, target, sender)
	if err != nil {
		log.add(func(l *hostileLog) { l.errors = append(l.errors, fmt.Sprintf("%s: records: %v", target, err)) })
		return target + " unreachable", nil
	}
	seqs, epochs := map[string]uint64{}, map[string]capture.EpochRecord{}
	for _, e := range recs.Events {
		seqs[e.Origin] = max(seqs[e.Origin], e.Seq)
		if e.Kind == federation.Epoch && e.Record != nil && e.Record.Epoch >= epochs[e.Subject].Epoch {
			epochs[e.Subject] = *e.Record
		}
	}
	other := ""
	for _, n := range c.nodes {
		if n != target && n != sender {
			other = n
		}
	}
	key := capture.Key{Pool: "web", Address: c.addrs[0], Domain: capture.CloudDomain("sim", "g1", "")}.String()
	// The records at 2^63 and far ahead name a holder other than the
	// line's: adopted, they would make every node bump at once.
	holder := c.nodes[0]
	if epochs[key].Holder == holder {
		holder = c.nodes[len(c.nodes)-1]
	}
	now := time.Now().UnixNano()
	const top, half = ^uint64(0), uint64(1) << 63
	seq := seqs[sender] + 1000
	lam := recs.Lamport + 1
	ev := func(origin string, seq, lamport uint64, kind federation.Kind, subject string, rec *capture.EpochRecord) federation.Event {
		return federation.Event{Origin: origin, Seq: seq, Lamport: lamport, Time: now, Kind: kind, Subject: subject, Record: rec}
	}
	unknownKey := capture.Key{Pool: "web", Address: netip.MustParseAddr("10.9.9.9"), Domain: capture.CloudDomain("sim", "g1", "")}.String()
	groups := map[string][]forged{}
	// An epoch record at 2^64−1 for every address, naming the line's own
	// holder: taken, the holder would act at that epoch and the next
	// change of holder would wrap to 0.
	for i, a := range c.addrs {
		k := capture.Key{Pool: "web", Address: a, Domain: capture.CloudDomain("sim", "g1", "")}.String()
		h := epochs[k].Holder
		if h == "" {
			h = holder
		}
		groups["epochs"] = append(groups["epochs"], forged{class: "epoch 2^64-1 for " + a.String(),
			ev: ev(sender, seq+100+uint64(i), lam, federation.Epoch, k, &capture.EpochRecord{Epoch: capture.Epoch(top), Holder: h})})
	}
	groups["epochs"] = append(groups["epochs"], []forged{
		{class: "epoch 2^63", ev: ev(sender, seq+1, lam, federation.Epoch, key, &capture.EpochRecord{Epoch: capture.Epoch(half), Holder: holder})},
		{class: "epoch 2^33 ahead", ev: ev(sender, seq+2, lam, federation.Epoch, key, &capture.EpochRecord{Epoch: epochs[key].Epoch + 1<<33, Holder: holder})},
		{class: "unknown key", ev: ev(sender, seq+6, lam, federation.Epoch, unknownKey, &capture.EpochRecord{Epoch: 1, Holder: holder})},
	}...)
	groups["clocks"] = []forged{
		{class: "drain lamport 2^64-1", ev: ev(sender, seq+3, top, federation.Drain, other, nil)},
		{class: "undrain lamport 2^63", ev: ev(sender, seq+4, half, federation.Undrain, other, nil)},
		{class: "forged-origin heartbeat seq 2^64-1", ev: ev(other, top, lam, federation.Heartbeat, "", nil)},
		{class: "heartbeat seq 2^63", ev: ev(sender, half, lam, federation.Heartbeat, "", nil)},
	}
	groups["origins"] = []forged{
		{class: "non-member origin", ev: ev("mallory", 1, lam, federation.Drain, target, nil)},
		{class: "drain of a non-member", ev: ev(sender, seq+5, lam, federation.Drain, "ghost-1", nil)},
		{class: "target's own origin", ev: ev(target, seqs[target]+1000, lam, federation.Drain, sender, nil)},
		{class: "forged sender", as: other, ev: ev(sender, seq+7, lam, federation.Heartbeat, "", nil)},
	}
	fs := groups[group]
	var refused, accepted, errs []string
	for _, f := range fs {
		f.from = sender
		code, body, err := c.postBatch(ctx, target, f.from, f.as, []federation.Event{f.ev})
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("%s %s: %v", target, f.class, err))
		case code == http.StatusBadRequest || code == http.StatusForbidden:
			refused = append(refused, f.class)
		default:
			accepted = append(accepted, fmt.Sprintf("%s took %s from %s (%s): %d %s", target, f.class, sender, f.ev.ID(), code, strings.TrimSpace(body)))
		}
	}
	// A signed request sent twice: the second must be refused as a replay.
	resent := 0
	if group == "origins" {
		resent = 1
		if code, err := c.resend(ctx, target, sender); err != nil {
			errs = append(errs, fmt.Sprintf("%s resent request: %v", target, err))
		} else if code == http.StatusUnauthorized {
			refused = append(refused, "resent request")
		} else {
			accepted = append(accepted, fmt.Sprintf("%s took a signed request sent a second time: %d", target, code))
		}
	}
	// Real events, pulled from another node, replayed as the sender's.
	var replay []federation.Event
	if rr, err := c.records(ctx, other, sender); err == nil && group == "replays" {
		for _, e := range rr.Events {
			if e.Origin != target {
				replay = append(replay, e)
			}
		}
		replay = replay[:min(len(replay), 64)]
	}
	applied := 0
	if len(replay) > 0 {
		code, body, err := c.postBatch(ctx, target, sender, "", replay)
		if err == nil && code == http.StatusOK {
			var res struct{ Applied int }
			_ = json.Unmarshal([]byte(body), &res)
			applied = res.Applied
		} else if err != nil {
			errs = append(errs, fmt.Sprintf("%s replay: %v", target, err))
		}
	}
	after, err := c.refusedCounters(ctx, target)
	counted := map[string]int{}
	if err == nil {
		for r, v := range after {
			if d := v - before[r]; d > 0 {
				counted[r] = d
			}
		}
	}
	log.add(func(l *hostileLog) {
		l.attacks++
		l.sent += len(fs) + resent
		l.refused += len(refused)
		l.accepted = append(l.accepted, accepted...)
		l.replayed += len(replay)
		l.applied += applied
		l.errors = append(l.errors, errs...)
		if l.counted == nil {
			l.counted = map[string]int{}
		}
		for r, d := range counted {
			l.counted[r] += d
		}
	})
	return fmt.Sprintf("%s as %s, %s: %d of %d forged refused, %d real events replayed (%d applied); refusals counted %v",
		target, sender, group, len(refused), len(fs)+resent, len(replay), applied, counted), nil
}

func (l *hostileLog) add(f func(*hostileLog)) {
	l.mu.Lock()
	f(l)
	l.mu.Unlock()
}

// postBatch posts events to target's federation endpoint as a batch from
// from, signed with the federation's secret as as (from when "").
func (c *cluster) postBatch(ctx context.Context, target, from, as string, events []federation.Event) (int, string, error) {
	if as == "" {
		as = from
	}
	body, err := json.Marshal(federation.Batch{From: from, Events: events})
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoints[target]+federation.Path, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	(&auth.Signer{Secret: c.secret, Node: as}).Sign(req, body)
	return c.send(req)
}

// resend signs one harmless batch (a heartbeat-free, empty batch) as
// sender, sends it, and sends the same bytes with the same headers again;
// it returns the second answer's code.
func (c *cluster) resend(ctx context.Context, target, sender string) (int, error) {
	body, _ := json.Marshal(federation.Batch{From: sender, Events: []federation.Event{}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoints[target]+federation.Path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	(&auth.Signer{Secret: c.secret, Node: sender}).Sign(req, body)
	again := req.Clone(ctx)
	again.Body = io.NopCloser(bytes.NewReader(body))
	if _, _, err := c.send(req); err != nil {
		return 0, err
	}
	code, _, err := c.send(again)
	return code, err
}

// send sends a request that is signed already.
func (c *cluster) send(req *http.Request) (int, string, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), nil
}

// records pulls node's federation records as peer as.
func (c *cluster) records(ctx context.Context, node, as string) (federation.Records, error) {
	var out federation.Records
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoints[node]+federation.RecordsPath, nil)
	if err != nil {
		return out, err
	}
	(&auth.Signer{Secret: c.secret, Node: as}).Sign(req, nil)
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("%s %s: %s", node, federation.RecordsPath, resp.Status)
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&out)
	return out, err
}

// refusedCounters reads node's ipfence_federation_refused_events_total by
// reason from its /metrics.
func (c *cluster) refusedCounters(ctx context.Context, node string) (map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoints[node]+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics: %s", node, resp.Status)
	}
	return parseRefused(io.LimitReader(resp.Body, 16<<20))
}

// parseRefused reads the refusal counters from Prometheus's text format.
func parseRefused(r io.Reader) (map[string]int, error) {
	out := map[string]int{}
	const name = `ipfence_federation_refused_events_total{reason="`
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		reason, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			return nil, fmt.Errorf("metrics: cannot read %q", sc.Text())
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: %q: %w", sc.Text(), err)
		}
		out[reason] = int(f)
	}
	return out, sc.Err()
}

// hostileChecker reports the hostile peer's attacks; a forged event a node
// took makes it invalid.
func hostileChecker(log *hostileLog) checker.Checker {
	return checker.Func(func(context.Context, *checker.Run) checker.Result {
		log.mu.Lock()
		defer log.mu.Unlock()
		valid := linear.True
		if len(log.accepted) > 0 {
			valid = linear.False
		}
		counted := map[string]int{}
		total := 0
		for r, v := range log.counted {
			counted[r] = v
			total += v
		}
		return checker.Result{Valid: valid, Fields: map[string]any{
			"attacks": log.attacks, "forged_sent": log.sent, "forged_refused": log.refused,
			"forged_accepted": len(log.accepted), "findings": first(log.accepted, 10), "findings_total": len(log.accepted),
			"replayed": log.replayed, "replayed_applied": log.applied,
			"refused_events_counted": counted, "refused_events_counted_total": total,
			"unanswered": first(log.errors, 10),
		}}
	})
}
