package etcdsuite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ipfence/ipfence/verify/control"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/nemesis"
)

// The etcd faults of the seed, made through etcd's own APIs, each one
// confirmed the way the control layer confirms its own (control.Ledger):
//
//	leader, move:  MoveLeader from the leader to a follower; confirmed when
//	               the follower's status names itself leader
//	leader, pause: SIGSTOP to whichever member leads; confirmed when the
//	               kernel reports the process stopped, and its SIGCONT at
//	               the heal when it no longer does
//	member:        MemberRemove of a member, then its process stopped and
//	               its data wiped; confirmed when a remaining member's list
//	               lacks it. The heal is MemberAdd and a start on a fresh
//	               data folder with --initial-cluster-state existing;
//	               confirmed when the member is in the list under its name
//	               and answers a linearizable read

// Bounds of the etcd faults. Like control's own, they only cover a loaded
// machine: an election takes about a second, a member joins in a few.
const (
	// leaderWait bounds finding the leader, moving it, and seeing it moved.
	leaderWait = 30 * time.Second
	// reconfigWait bounds a membership change and its confirmation:
	// etcd refuses one while a member it needs is unhealthy, which a
	// member restarted a moment ago can be.
	reconfigWait = 30 * time.Second
	// joinWait bounds a member's return: it starts empty, receives the
	// data from the leader, and must then serve.
	joinWait = 60 * time.Second
	// callTimeout bounds one call to one member.
	callTimeout = 2 * time.Second
)

// members is what the etcd faults need of a cluster: the loopback one and
// the one on remote nodes.
type members interface {
	dial(node string) (*clientv3.Client, error)
	// peerURL is the peer URL node's member advertises.
	peerURL(node string) string
	// proc is node's process as the control layer reaches it: where to
	// signal it and which process it is.
	proc(ctx context.Context, node string) (control.Remote, control.Proc, error)
	// stopWiped stops node's process and removes its data folder.
	stopWiped(ctx context.Context, node string) error
	// rejoin starts node on a fresh data folder as a member joining the
	// existing cluster initial ("n1=URL,n2=URL,..."), its member ID id.
	rejoin(ctx context.Context, node, initial string, id uint64) error
	// waitReady waits until node answers a linearizable read.
	waitReady(ctx context.Context, node string) error
}

// rejoinArgs is a member's command line for joining the existing cluster
// initial on a fresh data folder: args with --initial-cluster and
// --initial-cluster-state replaced. args is left as it is.
func rejoinArgs(args []string, initial string) ([]string, error) {
	out := slices.Clone(args)
	for _, f := range [][2]string{{"--initial-cluster", initial}, {"--initial-cluster-state", "existing"}} {
		i := slices.Index(out, f[0])
		if i < 0 || i+1 >= len(out) {
			return nil, fmt.Errorf("the member's command line has no %s to change: %q", f[0], args)
		}
		out[i+1] = f[1]
	}
	return out, nil
}

// LeaderVariants are the two ways the leader fault takes the leadership.
var LeaderVariants = []string{"move", "pause"}

// leaderChoice draws a leader fault: a variant, and which follower a move
// goes to (pick modulo the followers, who are known only when it starts).
func leaderChoice(r *gen.Rand) any {
	return map[string]any{"variant": LeaderVariants[r.IntN(len(LeaderVariants))], "pick": int64(r.IntN(1 << 30))}
}

// status is one member's view: its own ID, the leader's, the raft term.
type status struct{ id, leader, term uint64 }

// statusOf asks node's member for its status.
func statusOf(ctx context.Context, m members, node string) (status, error) {
	cl, err := m.dial(node)
	if err != nil {
		return status{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := cl.Status(ctx, cl.Endpoints()[0])
	if err != nil {
		return status{}, err
	}
	return status{id: resp.Header.MemberId, leader: resp.Leader, term: resp.RaftTerm}, nil
}

// findLeader asks every member for its status until one says it leads,
// and returns it, every answer, and the last error.
func findLeader(ctx context.Context, m members, nodes []string) (string, map[string]status, error) {
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	var last error
	for {
		seen := map[string]status{}
		for _, n := range nodes {
			st, err := statusOf(ctx, m, n)
			if err != nil {
				last = fmt.Errorf("status of %s: %w", n, err)
				continue
			}
			seen[n] = st
		}
		for _, n := range nodes {
			if st, ok := seen[n]; ok && st.leader == st.id && st.id != 0 {
				return n, seen, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", seen, fmt.Errorf("no member says it leads after %v (%v)", leaderWait, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leaderFault takes the leadership from the leader: {"variant": "move",
// "pick": N} moves it to a follower; {"variant": "pause"} pauses the
// leader until the stop. Every move and pause is confirmed into l.
func leaderFault(m members, nodes []string, l *control.Ledger) nemesis.Fault {
	var mu sync.Mutex
	paused := map[string]bool{}
	return nemesis.Fault{
		Start: func(ctx context.Context, v any) (string, error) {
			variant, pick := leaderValue(v)
			switch variant {
			case "move":
				return moveLeader(ctx, m, nodes, pick, l)
			case "pause":
				leader, _, err := findLeader(ctx, m, nodes)
				if err != nil {
					l.Add(control.Confirmation{Fault: "pause-leader", Target: "?", Detail: err.Error()})
					return "pause the leader", err
				}
				// Marked before the signal, so that the stop continues a
				// pause whose start was cut short.
				mu.Lock()
				paused[leader] = true
				mu.Unlock()
				return "paused leader " + leader, signalMember(ctx, m, leader, "STOP", control.Stopped, l, "pause-leader")
			}
			return "", fmt.Errorf("leader fault variant %q is not one of %s", variant, strings.Join(LeaderVariants, ", "))
		},
		Stop: func(ctx context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			if len(paused) == 0 {
				return "nothing paused", nil
			}
			var errs []error
			var done []string
			for _, n := range slices.Sorted(maps.Keys(paused)) {
				if err := signalMember(ctx, m, n, "CONT", control.Running, l, "resume-leader"); err != nil {
					errs = append(errs, fmt.Errorf("resuming %s: %w", n, err))
					continue
				}
				done = append(done, n)
				delete(paused, n)
			}
			return "resumed " + strings.Join(done, ","), errors.Join(errs...)
		},
	}
}

// leaderValue reads a leader fault's value.
func leaderValue(v any) (variant string, pick int64) {
	mv, _ := v.(map[string]any)
	variant, _ = mv["variant"].(string)
	switch p := mv["pick"].(type) {
	case int64:
		pick = p
	case int:
		pick = int64(p)
	}
	return variant, pick
}

// signalMember signals node's process and confirms its state (control's
// SignalConfirmed), recording it in l as fault.
func signalMember(ctx context.Context, m members, node, sig string, want control.State, l *control.Ledger, fault string) error {
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	r, p, err := m.proc(ctx, node)
	if errors.Is(err, control.ErrGone) && want != control.Stopped {
		// Gone (killed meanwhile): not stopped either.
		l.Add(control.Confirmation{Fault: fault, Target: node, Confirmed: true, Detail: "already gone"})
		return nil
	}
	if err != nil {
		l.Add(control.Confirmation{Fault: fault, Target: node, Detail: err.Error()})
		return err
	}
	return control.SignalConfirmed(ctx, r, p, sig, want, l, fault, node)
}

// moveLeader moves the leadership to the follower pick names (modulo the
// followers that answered) and confirms that the follower leads. A move
// the leader refuses (it lost the leadership meanwhile, the follower
// lags) is tried again with the leader of the moment, within leaderWait.
func moveLeader(ctx context.Context, m members, nodes []string, pick int64, l *control.Ledger) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	c := control.Confirmation{Fault: "move-leader", Target: "?"}
	desc := "move the leadership"
	var last error
	for {
		c.Checks++
		leader, seen, err := findLeader(ctx, m, nodes)
		if err == nil {
			var followers []string
			for _, n := range nodes {
				if _, ok := seen[n]; ok && n != leader {
					followers = append(followers, n)
				}
			}
			if len(followers) == 0 {
				err = fmt.Errorf("leader %s has no follower that answers", leader)
			} else {
				target := followers[pick%int64(len(followers))]
				c.Target, desc = target, fmt.Sprintf("moved the leadership from %s to %s", leader, target)
				if err = move(ctx, m, leader, seen[target].id); err == nil {
					// The move returns once the leader handed over; the
					// follower's own status must say it leads.
					var st status
					if st, err = statusOf(ctx, m, target); err == nil && st.leader == st.id {
						c.Confirmed, c.Detail = true, fmt.Sprintf("%s leads at term %d (was %s at term %d)", target, st.term, leader, seen[leader].term)
						l.Add(c)
						return desc, nil
					} else if err == nil {
						err = fmt.Errorf("%s's status names %x as leader, not itself", target, st.leader)
					}
				}
			}
		}
		last = err
		select {
		case <-ctx.Done():
			c.Detail = fmt.Sprintf("not moved after %d tries: %v", c.Checks, last)
			l.Add(c)
			return desc, fmt.Errorf("moving the leadership: %w: %v", control.ErrNotConfirmed, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// move asks leader's member to hand the leadership to member id.
func move(ctx context.Context, m members, leader string, id uint64) error {
	cl, err := m.dial(leader)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*electionMS*time.Millisecond+callTimeout)
	defer cancel()
	_, err = cl.MoveLeader(ctx, id)
	return err
}

// memberFault removes the member {"node": N} names from the cluster,
// stops it and wipes its data; the stop adds it back as a new member on
// a fresh data folder. Removals and additions are confirmed into l.
func memberFault(m members, nodes []string, l *control.Ledger) nemesis.Fault {
	var mu sync.Mutex
	out := map[string]bool{}
	return nemesis.Fault{
		Start: func(ctx context.Context, v any) (string, error) {
			mv, _ := v.(map[string]any)
			node, _ := mv["node"].(string)
			if !slices.Contains(nodes, node) {
				return "", fmt.Errorf("the member fault needs one of the nodes %v, not %q", nodes, node)
			}
			mu.Lock()
			out[node] = true
			mu.Unlock()
			return removeMember(ctx, m, nodes, node, l)
		},
		Stop: func(ctx context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			if len(out) == 0 {
				return "no member out", nil
			}
			var errs []error
			var done []string
			for _, n := range slices.Sorted(maps.Keys(out)) {
				if err := addMember(ctx, m, nodes, n, l); err != nil {
					errs = append(errs, fmt.Errorf("adding %s back: %w", n, err))
					continue
				}
				done = append(done, n)
				delete(out, n)
			}
			return "added back " + strings.Join(done, ","), errors.Join(errs...)
		},
	}
}

// onOthers calls f with a client of each member but node in turn, until
// one call succeeds or ctx ends, and returns which member answered.
func onOthers(ctx context.Context, m members, nodes []string, node string, f func(context.Context, *clientv3.Client) error) (string, error) {
	var last error
	for {
		for _, n := range nodes {
			if n == node {
				continue
			}
			cl, err := m.dial(n)
			if err != nil {
				last = err
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 2*callTimeout)
			err = f(cctx, cl)
			cancel()
			cl.Close()
			if err == nil {
				return n, nil
			}
			last = fmt.Errorf("%s: %w", n, err)
		}
		select {
		case <-ctx.Done():
			return "", last
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// memberOf finds node's member in a member list by its peer URL (a member
// added and not started yet has no name).
func memberOf(m members, list *clientv3.MemberListResponse, node string) (uint64, bool) {
	for _, mem := range list.Members {
		if slices.Contains(mem.PeerURLs, m.peerURL(node)) {
			return mem.ID, true
		}
	}
	return 0, false
}

// removeMember removes node's member, confirms a remaining member's list
// lacks it, then stops its process and wipes its data.
func removeMember(ctx context.Context, m members, nodes []string, node string, l *control.Ledger) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, reconfigWait)
	defer cancel()
	c := control.Confirmation{Fault: "remove-member", Target: node}
	fail := func(err error) (string, error) {
		c.Detail = err.Error()
		l.Add(c)
		return "remove " + node, err
	}
	var id uint64
	_, err := onOthers(ctx, m, nodes, node, func(ctx context.Context, cl *clientv3.Client) error {
		list, err := cl.MemberList(ctx)
		if err != nil {
			return err
		}
		now, ok := memberOf(m, list, node)
		switch {
		case !ok && id != 0:
			// An earlier try whose answer was lost removed it.
			return nil
		case !ok:
			return fmt.Errorf("%s is not in the member list", node)
		}
		id = now
		_, err = cl.MemberRemove(ctx, id)
		return err
	})
	if err != nil {
		return fail(fmt.Errorf("removing %s: %w", node, err))
	}
	var left int
	asked, err := onOthers(ctx, m, nodes, node, func(ctx context.Context, cl *clientv3.Client) error {
		c.Checks++
		list, err := cl.MemberList(ctx)
		if err != nil {
			return err
		}
		if _, in := memberOf(m, list, node); in {
			return fmt.Errorf("%s is still in the member list", node)
		}
		left = len(list.Members)
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("%w: %v", control.ErrNotConfirmed, err))
	}
	c.Confirmed, c.Detail = true, fmt.Sprintf("%s's member list lacks %s (id %x): %d members", asked, node, id, left)
	l.Add(c)
	desc := fmt.Sprintf("removed %s (id %x), stopped it, wiped its data", node, id)
	if err := m.stopWiped(ctx, node); err != nil {
		return desc, fmt.Errorf("stopping %s after its removal: %w", node, err)
	}
	return desc, nil
}

// addMember adds node back, unless it is still a member, starts it on a
// fresh data folder as a member of the existing cluster, and confirms it
// is in the list under its name and serves.
func addMember(ctx context.Context, m members, nodes []string, node string, l *control.Ledger) error {
	rctx, cancel := context.WithTimeout(ctx, reconfigWait)
	defer cancel()
	c := control.Confirmation{Fault: "add-member", Target: node}
	fail := func(err error) error {
		c.Detail = err.Error()
		l.Add(c)
		return err
	}
	var id uint64
	var initial []string
	_, err := onOthers(rctx, m, nodes, node, func(ctx context.Context, cl *clientv3.Client) error {
		list, err := cl.MemberList(ctx)
		if err != nil {
			return err
		}
		mems := list.Members
		var in bool
		if id, in = memberOf(m, list, node); !in {
			resp, err := cl.MemberAdd(ctx, []string{m.peerURL(node)})
			if err != nil {
				return err
			}
			id, mems = resp.Member.ID, resp.Members
		}
		initial = initial[:0]
		for _, mem := range mems {
			for _, n := range nodes {
				if slices.Contains(mem.PeerURLs, m.peerURL(n)) {
					initial = append(initial, n+"="+m.peerURL(n))
				}
			}
		}
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("adding %s: %w", node, err))
	}
	jctx, cancel := context.WithTimeout(ctx, joinWait)
	defer cancel()
	if err := m.rejoin(jctx, node, strings.Join(initial, ","), id); err != nil {
		return fail(fmt.Errorf("starting %s as a member again: %w", node, err))
	}
	if err := m.waitReady(jctx, node); err != nil {
		return fail(fmt.Errorf("%w: %v", control.ErrNotConfirmed, err))
	}
	// It serves; its own list must name it: a started member publishes
	// its name through raft.
	var n int
	for {
		c.Checks++
		cl, err := m.dial(node)
		if err == nil {
			var list *clientv3.MemberListResponse
			cctx, ccancel := context.WithTimeout(jctx, callTimeout)
			list, err = cl.MemberList(cctx)
			ccancel()
			cl.Close()
			if err == nil {
				for _, mem := range list.Members {
					if mem.ID == id && mem.Name == node {
						n = len(list.Members)
					}
				}
			}
		}
		if n > 0 {
			break
		}
		select {
		case <-jctx.Done():
			return fail(fmt.Errorf("%w: %s serves but its member list does not name it as member %x (%v)", control.ErrNotConfirmed, node, id, err))
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.Confirmed, c.Detail = true, fmt.Sprintf("%s is member %x again, serves a linearizable read: %d members", node, id, n)
	l.Add(c)
	return nil
}

// hexID is a member ID as etcd's peers name it in their requests.
func hexID(id uint64) string { return strconv.FormatUint(id, 16) }
