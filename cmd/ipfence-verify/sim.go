package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/verify/regsim"
	"github.com/ipfence/ipfence/verify/txnsim"
)

func runSim(args []string, stdout, stderr io.Writer) int {
	fs, level := cli.FlagSet("sim", "sim --db DB --workload W [--ops N] [--concurrency C] [--keys K] [--seed S] [--out FILE]", stderr)
	db := fs.String("db", "", "simulated database: "+strings.Join(txnsim.DBs, ", ")+
		"\n(with --workload cas-register: serializable, a linearizable store, or prefix, one with stale reads)")
	workload := fs.String("workload", "list-append", "workload: "+strings.Join(txnsim.Workloads, ", ")+
		", or cas-register (independent compare-and-set registers, one per key)")
	ops := fs.Int("ops", 1000, "number of transactions")
	conc := fs.Int("concurrency", txnsim.DefaultConcurrency, "transactions running at once")
	keys := fs.Int("keys", txnsim.DefaultKeys, "active keys at a time")
	maxLen := fs.Int("max-txn-length", txnsim.DefaultMaxTxnLen, "micro-operations per transaction, at most")
	maxWrites := fs.Int("max-writes-per-key", txnsim.DefaultMaxWritesPerKey, "writes a key takes before a fresh key replaces it")
	infoRate := fs.Float64("info-rate", 0, "probability that a transaction's outcome is indeterminate (info)")
	seed := fs.Uint64("seed", 1, "seed: the same flags give the same history, byte for byte")
	out := fs.String("out", "", "write the history to FILE instead of stdout")
	pos, code, ok := cli.Parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	bad := func(format string, a ...any) int { return cli.UsageError(stderr, "sim", format, a...) }
	if len(pos) > 0 {
		return bad("unexpected argument %q: sim takes flags only", pos[0])
	}
	if *db == "" {
		return bad("--db is required: one of %s", strings.Join(txnsim.DBs, ", "))
	}
	if !slices.Contains(txnsim.DBs, *db) {
		return bad("--db: %q is not a simulated database; valid: %s", *db, strings.Join(txnsim.DBs, ", "))
	}
	if !slices.Contains(txnsim.Workloads, *workload) && *workload != casRegister {
		return bad("--workload: %q is not a workload; valid: %s, %s", *workload, strings.Join(txnsim.Workloads, ", "), casRegister)
	}
	if *ops < 0 {
		return bad("--ops: %d is negative", *ops)
	}
	// The library reads zero as "the default"; on the command line the
	// default is already filled in, so a zero here is a mistake.
	for _, f := range []struct {
		name  string
		v, hi int
	}{{"concurrency", *conc, txnsim.MaxConcurrency}, {"keys", *keys, txnsim.MaxKeys},
		{"max-txn-length", *maxLen, txnsim.MaxMaxTxnLen}, {"max-writes-per-key", *maxWrites, txnsim.MaxMaxWritesPerKey}} {
		if f.v < 1 || f.v > f.hi {
			return bad("--%s: %d is out of range; valid: 1 to %d", f.name, f.v, f.hi)
		}
	}
	if *infoRate < 0 || *infoRate > 1 || *infoRate != *infoRate {
		return bad("--info-rate: %v is out of range; valid: 0 to 1", *infoRate)
	}
	if *workload == casRegister {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, name := range []string{"max-txn-length", "max-writes-per-key"} {
			if set[name] {
				return bad("--%s: --workload %s has no transactions", name, casRegister)
			}
		}
		stale, ok := registerDBs[*db]
		if !ok {
			return bad("--db: --workload %s simulates serializable (linearizable) or prefix (stale reads), not %s", casRegister, *db)
		}
		cfg := regsim.Config{Ops: *ops, Concurrency: *conc, Keys: *keys, InfoRate: *infoRate, StaleRate: stale, Seed: *seed}
		return writeSim(*out, stdout, stderr, func(w io.Writer) error { _, err := regsim.Write(w, cfg); return err })
	}
	cfg := txnsim.Config{DB: *db, Workload: *workload, Ops: *ops, Concurrency: *conc, Keys: *keys,
		MaxTxnLen: *maxLen, MaxWritesPerKey: *maxWrites, InfoRate: *infoRate, Seed: *seed}
	if err := cfg.Validate(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "ipfence-verify sim: %s\n", strings.TrimPrefix(line, "txnsim: "))
		}
		return cli.ExitError
	}
	return writeSim(*out, stdout, stderr, func(w io.Writer) error { _, err := txnsim.Write(w, cfg); return err })
}

// casRegister is sim's register workload, which verify/regsim simulates.
const casRegister = "cas-register"

// registerDBs maps the --db values the register workload takes to the
// share of eligible reads that are stale.
var registerDBs = map[string]float64{"serializable": 0, "prefix": 0.01}

// writeSim writes a simulated history to out (stdout when empty).
func writeSim(out string, stdout, stderr io.Writer, write func(io.Writer) error) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence-verify sim: "+format+"\n", a...)
		return cli.ExitError
	}
	w := stdout
	var f *os.File
	if out != "" {
		var err error
		if f, err = os.Create(out); err != nil {
			return fail("%v", err)
		}
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fail("%v", err)
	}
	return cli.ExitValid
}
