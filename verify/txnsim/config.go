package txnsim

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// DBs names the simulated databases, in the order help text lists them.
// The package documentation says what each one guarantees.
var DBs = []string{"serializable", "ssi", "si", "read-committed", "prefix"}

// Workloads names the workloads.
var Workloads = []string{"list-append", "rw-register"}

// Defaults for the Config fields whose zero value means "the default".
const (
	DefaultConcurrency     = 10
	DefaultKeys            = 10
	DefaultMaxTxnLen       = 4
	DefaultMaxWritesPerKey = 32
)

// Upper bounds, so that a mistyped flag fails validation instead of
// allocating gigabytes; every realistic test sits far below them.
const (
	MaxConcurrency     = 1 << 16
	MaxKeys            = 1 << 20
	MaxMaxTxnLen       = 1 << 10
	MaxMaxWritesPerKey = 1 << 20
)

// Config describes one simulated run. Zero values of Concurrency, Keys,
// MaxTxnLen and MaxWritesPerKey mean their defaults; DB and Workload must be
// set.
type Config struct {
	// DB is the simulated database: one of DBs.
	DB string
	// Workload is one of Workloads.
	Workload string
	// Ops is the number of transactions, so the history holds 2·Ops events.
	Ops int
	// Concurrency is the number of logical processes running at once.
	Concurrency int
	// Keys is the number of active keys at a time; a key retires after
	// MaxWritesPerKey writes and a fresh key takes its place.
	Keys int
	// MaxTxnLen bounds the micro-ops per transaction; each transaction has
	// between 1 and MaxTxnLen, uniformly.
	MaxTxnLen int
	// MaxWritesPerKey is how many appends (or writes) a key is handed
	// before it retires.
	MaxWritesPerKey int
	// InfoRate is the probability, in [0, 1], that a completion is info
	// (indeterminate) rather than ok or fail.
	InfoRate float64
	// Seed fixes every random choice: the same Config gives the same bytes.
	Seed uint64
}

type level uint8

const (
	serializable level = iota
	ssi
	si
	readCommitted
	prefix
)

func parseDB(s string) (level, bool) {
	for i, n := range DBs {
		if n == s {
			return level(i), true
		}
	}
	return 0, false
}

func parseWorkload(s string) (appendWL, ok bool) {
	switch s {
	case "list-append":
		return true, true
	case "rw-register":
		return false, true
	}
	return false, false
}

// Validate reports every field that is out of range, each error naming the
// field and what it accepts.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("txnsim: "+format, args...))
	}
	if _, ok := parseDB(c.DB); !ok {
		bad("DB %q is not a simulated database; valid: %s", c.DB, strings.Join(DBs, ", "))
	}
	if _, ok := parseWorkload(c.Workload); !ok {
		bad("Workload %q is not a workload; valid: %s", c.Workload, strings.Join(Workloads, ", "))
	}
	if c.Ops < 0 {
		bad("Ops is %d; valid: 0 or more", c.Ops)
	}
	bounded := func(name string, v, hi, def int) {
		if v < 0 || v > hi {
			bad("%s is %d; valid: 1 to %d, or 0 for the default %d", name, v, hi, def)
		}
	}
	bounded("Concurrency", c.Concurrency, MaxConcurrency, DefaultConcurrency)
	bounded("Keys", c.Keys, MaxKeys, DefaultKeys)
	bounded("MaxTxnLen", c.MaxTxnLen, MaxMaxTxnLen, DefaultMaxTxnLen)
	bounded("MaxWritesPerKey", c.MaxWritesPerKey, MaxMaxWritesPerKey, DefaultMaxWritesPerKey)
	if math.IsNaN(c.InfoRate) || c.InfoRate < 0 || c.InfoRate > 1 {
		bad("InfoRate is %v; valid: 0 to 1", c.InfoRate)
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields that have defaults.
func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Concurrency, DefaultConcurrency)
	def(&c.Keys, DefaultKeys)
	def(&c.MaxTxnLen, DefaultMaxTxnLen)
	def(&c.MaxWritesPerKey, DefaultMaxWritesPerKey)
	return c
}
