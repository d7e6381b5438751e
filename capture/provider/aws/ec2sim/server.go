package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/memory"
	"github.com/ipfence/ipfence/internal/simfault"
)

// maxBody bounds a request body: a Query API call is a few hundred bytes,
// and the admin API's largest document is a set of faults.
const maxBody = 1 << 20

// Config configures a Server.
type Config struct {
	// NICs are the ids of the simulated NICs, each attached to its own
	// instance. They may be omitted when StateDir holds a saved model; if
	// given, they must be the saved model's.
	NICs []string
	// Subnet holds every NIC's addresses; the zero value means the saved
	// model's, or DefaultSubnet. It must be IPv4, from /16 to /28.
	Subnet netip.Prefix
	// StateDir, when set, is where the model is saved (in StateFile) after
	// every change and loaded from on start.
	StateDir string
	// Seed seeds the random numbers that decide which calls an injected
	// error rate fails, and the jitter of Latency's waits.
	Seed uint64
	// Latency is EC2's own pace (see Realistic), in force under whatever
	// faults are injected, which add to it; the zero value answers at
	// once.
	Latency simfault.Profile
	// Clock gives mutation times and decides when asynchronous changes
	// become visible; nil means time.Now. Injected latency is real time.
	Clock func() time.Time
	// Logger receives a line per applied mutation (info) and per refused
	// call (debug); nil discards them.
	Logger *slog.Logger
}

// Server is the simulator. It is an http.Handler serving the EC2 Query API
// at / and the admin API under /admin/ (see ServeHTTP), and it is safe for
// concurrent use.
//
// Every Query API call and admin change runs under one lock, with the
// model's clock frozen at one reading for the whole call: a call is checked
// and applied at one instant, whole or not at all.
type Server struct {
	log       *slog.Logger
	clock     func() time.Time
	seed      uint64
	statePath string // "" when nothing is saved
	subnetID  string
	vpcID     string
	mux       *http.ServeMux
	requests  atomic.Uint64
	// waiting counts the Query API calls held by a pause.
	waiting atomic.Int64

	mu sync.Mutex
	// now is the instant of the call in progress: the provider's clock.
	now    time.Time
	m      *model
	faults Faults
	rng    *rand.Rand
	// pace is the latency profile, and jitter the source of its waits.
	pace   simfault.Profile
	jitter *rand.Rand
	// resume is closed when the Query API resumes; nil while it runs.
	resume chan struct{}
	// timer starts the wait of an injected latency, returning what fires
	// when it is over and what stops it: a real timer, or a test's timer
	// that it fires by hand.
	timer func(time.Duration) (<-chan time.Time, func() bool)
}

// realTimer is the timer of injected latencies: real time.
func realTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// State is what GET /admin/state shows: the model as visible now, the
// changes acknowledged and not yet visible, and the faults.
type State struct {
	Subnet netip.Prefix `json:"subnet"`
	NICs   []NICState   `json:"nics"`
	// Pending are the mutations acknowledged and not yet visible, in the
	// order they will apply.
	Pending []memory.Queued `json:"pending"`
	Faults  Faults          `json:"faults"`
	// Paused is true while Query API calls wait for a resume.
	Paused bool `json:"paused"`
	// Waiting counts the calls held by the pause now: a call whose caller
	// gave up is no longer counted, and will never apply.
	Waiting int `json:"waiting"`
}

// ConfigError is New's error about one field of the Config, so that a
// command can name the flag that set it.
type ConfigError struct {
	// Field is the Config field at fault: "NICs", "Subnet" or "StateDir"
	// (which covers a saved model that cannot be read or disagrees with
	// the other fields).
	Field string
	Err   error
}

func (e *ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// New builds a simulator: from the model saved in c.StateDir when there is
// one, else fresh from c. A saved model that cannot be read, or that
// disagrees with c's NICs or subnet, is an error naming the file. Errors
// about the Config are *ConfigError.
func New(c Config) (*Server, error) {
	if err := c.Latency.Validate(actions); err != nil {
		return nil, &ConfigError{"Latency", fmt.Errorf("cloudsim: %w", err)}
	}
	s := &Server{log: c.Logger, clock: c.Clock, seed: c.Seed, timer: realTimer,
		pace: c.Latency.Clone(), jitter: simfault.NewJitter(c.Seed)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	var saved *stateFile
	if c.StateDir != "" {
		if err := os.MkdirAll(c.StateDir, 0o755); err != nil {
			return nil, &ConfigError{"StateDir", fmt.Errorf("cloudsim: state directory: %w", err)}
		}
		s.statePath = filepath.Join(c.StateDir, StateFile)
		var err error
		if saved, err = readState(s.statePath); err != nil {
			return nil, &ConfigError{"StateDir", err}
		}
	}
	if saved != nil {
		if err := agrees(c, saved); err != nil {
			return nil, &ConfigError{"StateDir", fmt.Errorf("cloudsim: state file %s: %w", s.statePath, err)}
		}
		m, err := saved.restore(s.frozen)
		if err != nil {
			return nil, &ConfigError{"StateDir", fmt.Errorf("cloudsim: state file %s: %w", s.statePath, err)}
		}
		s.m, s.faults = m, saved.Faults
		if saved.Paused {
			s.resume = make(chan struct{})
		}
		s.log.Info("loaded state", "file", s.statePath, "nics", len(m.nics), "mutations", len(saved.Provider.Mutations))
	} else {
		subnet := c.Subnet
		if !subnet.IsValid() {
			subnet = DefaultSubnet
		}
		if err := checkSubnet(subnet); err != nil {
			return nil, &ConfigError{"Subnet", fmt.Errorf("cloudsim: %w", err)}
		}
		if len(c.NICs) == 0 {
			return nil, &ConfigError{"NICs", errors.New("cloudsim: no NICs")}
		}
		if err := checkNICIDs(c.NICs, subnet); err != nil {
			return nil, &ConfigError{"NICs", fmt.Errorf("cloudsim: %w", err)}
		}
		p := memory.New(memory.Options{NICs: c.NICs, Clock: s.frozen})
		s.m = newModel(subnet, newNICs(c.NICs, subnet), p)
	}
	s.rng = newRNG(s.seed)
	s.subnetID = fmt.Sprintf("subnet-0%016x", hash64("subnet:"+s.m.subnet.String()))
	s.vpcID = fmt.Sprintf("vpc-0%016x", hash64("vpc:"+s.m.subnet.String()))
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.serveQuery)
	s.mux.HandleFunc("POST /{$}", s.serveQuery)
	s.adminRoutes(s.mux)
	if s.statePath != "" && saved == nil {
		// Save at once, so that an unwritable directory is an error now
		// rather than at the first call.
		s.mu.Lock()
		s.now = s.clock()
		err := s.saveLocked()
		s.mu.Unlock()
		if err != nil {
			return nil, &ConfigError{"StateDir", err}
		}
	}
	return s, nil
}

// agrees checks that a saved model is the one c asks for.
func agrees(c Config, saved *stateFile) error {
	if c.Subnet.IsValid() && c.Subnet != saved.Subnet {
		return fmt.Errorf("it holds subnet %s, not %s", saved.Subnet, c.Subnet)
	}
	if len(c.NICs) > 0 {
		want := slices.Sorted(slices.Values(c.NICs))
		var got []string
		for _, n := range saved.NICs {
			got = append(got, n.ID)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("it holds NICs %v, not %v", got, want)
		}
	}
	return nil
}

// newRNG gives the random numbers of injected error rates. A fresh one is
// made from the seed whenever the faults change, so that which calls fail
// depends on the seed, the faults and the calls since, not on earlier runs.
func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

// frozen is the provider's clock: the instant of the call in progress. The
// provider reads it only while the Server holds its lock.
func (s *Server) frozen() time.Time { return s.now }

// ServeHTTP serves the EC2 Query API at / (see the package documentation
// of the actions, parameters and errors) and the admin API, JSON in and
// out, without authentication:
//
//	GET  /admin/state      the model now: State
//	GET  /admin/mutations  the record, every applied mutation in order:
//	                       [{"time":"2026-01-02T03:04:05.123456789Z","mono":81234567890123,
//	                         "call":"assign-secondary-ip",
//	                         "nic":"eni-b","address":"10.0.0.7","epoch":3,"idempotencyKey":"k",
//	                         "from":"eni-a","enabled":false}]
//	                       (mono: the time on CLOCK_MONOTONIC, in nanoseconds)
//	GET  /admin/latency    the latency profile (Config.Latency), durations as strings
//	GET  /admin/faults     the faults: Faults
//	PUT  /admin/faults     replace the faults with the body's (a Faults; unknown fields,
//	                       actions and codes are refused with 400); answers the faults
//	POST /admin/pause      make Query API calls wait until resumed; answers State
//	POST /admin/resume     let them go on; answers State
//	POST /admin/reset      clear every fault and resume; answers State
//	POST /admin/flush      make every pending mutation visible now; answers State
//
// An admin error is a status (400 bad input, 500 the change was made but
// could not be saved) and {"error":"message"}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// requestID numbers the calls in the shape of EC2's request ids.
func (s *Server) requestID() string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", s.requests.Add(1))
}

// waitResumed blocks while the Query API is paused; false when ctx ended
// first.
func (s *Server) waitResumed(ctx context.Context) bool {
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
		case <-ctx.Done():
			s.waiting.Add(-1)
			return false
		}
	}
}

// injected draws the fault of one call of action: the error code to fail
// it with ("" for none), the latency to wait first (the profile's, drawn,
// and the faults' on top), and the timer to wait it with.
func (s *Server) injected(action string) (string, time.Duration, func(time.Duration) (<-chan time.Time, func() bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.draw(action, s.rng), s.pace.Wait(action, s.jitter) + s.faults.latency(action), s.timer
}

// mutate runs f on the model at one instant and saves the result. Its
// changes become visible after the profile's settling time, drawn, and
// the faults' remap delay.
func (s *Server) mutate(f func(m *model) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	s.m.p.SetDelay(s.pace.SettleWait(s.jitter) + time.Duration(s.faults.RemapDelay))
	if err := f(s.m); err != nil {
		return err
	}
	return s.saveLocked()
}

// states returns the NICs as visible now.
func (s *Server) states() []NICState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	return s.m.states()
}

// State returns the model as visible now, with its pending mutations and
// faults.
func (s *Server) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked()
}

func (s *Server) stateLocked() State {
	s.now = s.clock()
	return State{
		Subnet: s.m.subnet, NICs: s.m.states(), Pending: s.m.p.Queue(),
		Faults: s.faults.clone(), Paused: s.resume != nil, Waiting: int(s.waiting.Load()),
	}
}

// Mutations implements provider.Recorder: every mutation the simulator
// applied, in order, with the epoch and idempotency key of the call.
func (s *Server) Mutations() []provider.Mutation {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	return s.m.p.Mutations()
}

// NICs returns the simulated NICs' identities, in id order.
func (s *Server) NICs() []NIC {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.m.nics)
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

// SetFaults replaces the faults. Invalid faults are refused and change
// nothing. The random numbers start again from the seed.
func (s *Server) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("cloudsim: faults: %w", err)
	}
	return s.admin(func() {
		s.faults = f.clone()
		s.m.p.SetDelay(time.Duration(f.RemapDelay))
		s.rng = newRNG(s.seed)
	})
}

// Pause makes Query API calls wait until Resume (or until their callers
// give up). The admin API goes on.
func (s *Server) Pause() error {
	return s.admin(func() {
		if s.resume == nil {
			s.resume = make(chan struct{})
		}
	})
}

// Resume lets paused and new Query API calls go on.
func (s *Server) Resume() error { return s.admin(s.resumeLocked) }

func (s *Server) resumeLocked() {
	if s.resume != nil {
		close(s.resume)
		s.resume = nil
	}
}

// Reset clears every fault and resumes the Query API. Mutations already
// pending still apply at their times.
func (s *Server) Reset() error {
	return s.admin(func() {
		s.faults = Faults{}
		s.m.p.SetDelay(0)
		s.rng = newRNG(s.seed)
		s.resumeLocked()
	})
}

// Flush makes every pending mutation visible now.
func (s *Server) Flush() error {
	return s.admin(func() { s.m.p.Flush() })
}

// admin applies an admin change and saves the result.
func (s *Server) admin(f func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.clock()
	f()
	return s.saveLocked()
}
