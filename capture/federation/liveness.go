package federation

import (
	"slices"
	"time"
)

// MemberState is what liveness says of one node.
type MemberState struct {
	Name string
	// Heard: a heartbeat of the node has been seen. A node never heard
	// from is not eligible, but it is not reported stale either: it has
	// not failed, it has not started.
	Heard bool
	// LastTime is its newest heartbeat's time (on its own clock).
	LastTime int64
	// Age is how far the group's time is past its newest heartbeat, never
	// below zero: a member whose newest heartbeat is ahead of the group's
	// time (the median) has just been heard, and a negative age would read
	// as nonsense on a dashboard or in ctl.
	Age time.Duration
	// Stale: lastHeartbeat + TTL + promotion hold ≤ the group's time.
	Stale bool
	// Drained: the newest intent for it is a drain.
	Drained bool
}

// Timing is what liveness depends on.
type Timing struct {
	TTL, PromotionHold time.Duration
}

// GroupTime is the cluster's time on the event stream: the median of the
// newest heartbeat times of the nodes, where a node not heard from since
// this node started counts at since (this node's first heartbeat since it
// started). Each node stamps its own heartbeats, so no single node's clock
// decides: a node whose clock (or process) stalls does not move the median,
// and so does not make the others look stale, nor itself fresh; one clock
// running ahead does not either, as long as most are right. A node that has
// heard from no majority cannot move it past since either: a node that
// restarts, or is cut off, must not find its peers stale merely because it
// has not heard them yet, or it would seize their addresses on an epoch
// line it has not caught up with. It returns since when no heartbeat has
// been seen.
func GroupTime(s *State, nodes []string, since int64) int64 {
	times := make([]int64, 0, len(nodes))
	for _, n := range nodes {
		if hb, ok := s.Heartbeat(n); ok {
			times = append(times, hb.Time)
		} else {
			times = append(times, since)
		}
	}
	if len(times) == 0 {
		return since
	}
	slices.Sort(times)
	return times[(len(times)-1)/2]
}

// Assess computes every node's liveness from the state. nodes is the whole
// cluster (this node and its peers). since is the time of this node's
// first heartbeat since it started: a node never heard from counts as stale
// only once TTL and promotion hold have passed since then on the group's
// time, which a majority must have moved (see GroupTime), so that a node
// restarting does not seize from peers it simply has not heard yet.
func Assess(s *State, nodes []string, t Timing, since int64) map[string]MemberState {
	now := GroupTime(s, nodes, since)
	out := make(map[string]MemberState, len(nodes))
	for _, n := range nodes {
		m := MemberState{Name: n, Drained: s.Drained(n)}
		wait := int64(t.TTL) + int64(t.PromotionHold)
		if hb, ok := s.Heartbeat(n); ok {
			m.Heard, m.LastTime = true, hb.Time
			m.Age = max(time.Duration(now-hb.Time), 0)
			m.Stale = hb.Time+wait <= now
		} else {
			m.Stale = since+wait <= now
		}
		out[n] = m
	}
	return out
}
