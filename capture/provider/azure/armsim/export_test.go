package armsim

import "time"

// Wait is one wait of a call's latency on a test's timer: its length,
// and the channel that ends it.
type Wait struct {
	D    time.Duration
	Fire chan time.Time
}

// HandTimers makes s wait out its latencies on timers the test fires,
// and returns where each wait arrives as it begins.
func HandTimers(s *Server) <-chan Wait {
	waits := make(chan Wait, 16)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = func(d time.Duration) (<-chan time.Time, func() bool) {
		w := Wait{D: d, Fire: make(chan time.Time, 1)}
		waits <- w
		return w.Fire, func() bool { return true }
	}
	return waits
}
