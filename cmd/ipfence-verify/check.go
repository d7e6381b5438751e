package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/verify/follow"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/isolation"
	"github.com/ipfence/ipfence/verify/lincheck"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
	"github.com/ipfence/ipfence/verify/workload"
)

// checkNames lists every --model value: the linearizability models, the
// transactional workloads, and the Jepsen workload checkers.
func checkNames() []string {
	names := model.Names()
	names = append(names, isolation.ListAppend, isolation.RWRegister)
	return append(names, workload.Names()...)
}

// fileCheck checks one parsed history and says how it went: the verdict,
// the object --json prints, the line printed otherwise, and what to do
// after (write a page or drawings).
// phase is told what the check is doing, for a timeout's message;
// "searching" means the work honours the deadline itself.
type fileCheck func(ctx context.Context, file string, data []byte, format history.Format, warn io.Writer, phase func(string)) (v linear.Verdict, asJSON any, summary string, after func() error, err error)

// streamCheck is a fileCheck that reads the file itself, as it checks,
// within lim, instead of being handed its bytes.
type streamCheck func(ctx context.Context, file string, r io.Reader, lim history.Limits, format history.Format, warn io.Writer, phase func(string)) (v linear.Verdict, asJSON any, summary string, after func() error, err error)

// warnTorn says that file's last line, line, was cut short, and how many
// events before it are checked.
func warnTorn(w io.Writer, file string, line int, events int64) {
	fmt.Fprintf(w, "ipfence-verify check: warning: %s:%d: the last line is cut short (its writer stopped mid-line); checking the %d events before it\n",
		file, line, events)
}

// parseHistory parses a file's contents within a bound on the memory the
// events take, warning about a torn last line. It returns the events'
// estimated memory too.
func parseHistory(file string, data []byte, format history.Format, maxParsed int64, warn io.Writer) (*history.History, int64, error) {
	start := time.Now()
	h, size, err := history.ParseLimited(file, data, format, maxParsed)
	if err != nil {
		return nil, 0, err
	}
	slog.Debug("read history", "file", file, "format", h.Format, "events", len(h.Events), "took", time.Since(start))
	if h.TornLine > 0 {
		warnTorn(warn, file, h.TornLine, int64(len(h.Events)))
	}
	return h, size, nil
}

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs, level := cli.FlagSet("check", "check [--model M] [--consistency C] [--format F] [--initial V] [--timeout D] [--json] [--html FILE] [--dot DIR] FILE...", stderr)
	modelName := fs.String("model", "cas-register", "model to check against: "+strings.Join(checkNames(), ", "))
	formatName := fs.String("format", "", "history format: "+formatNames()+" (default: detected from content)")
	initial := fs.String("initial", "", "initial register value as an EDN or JSON literal, such as 0 or \"x\" (default nil: absent)")
	timeout := fs.Duration("timeout", 0, "give up with verdict unknown after this long per file, such as 30s, counted from\nthe first byte: opening, reading, parsing and checking (default: no limit)")
	asJSON := fs.Bool("json", false, "print one JSON object per file instead of a line of text")
	htmlOut := fs.String("html", "", "write a self-contained HTML page of the history and its linearization to FILE\n(with several inputs, one page each, named FILE-<input name>.html)")
	whole := fs.Bool("no-partition", false, "check kv and multi-register histories as one object with one state instead of\nsplitting them by key (kv still lets the search use the keys' independence)")
	maxMem := fs.String("max-memory", "4GiB", "give up with verdict unknown when the search (its tables and the model's\nstates) needs more memory than this; it also bounds the input: files of at most\na sixteenth of it, lines of at most a quarter of that (exit 3 beyond)")
	consistency := fs.String("consistency", "strict-serializable", "list-append and rw-register: the consistency model the history must satisfy,\none of: "+wrap(isolation.Models(), 72))
	dotDir := fs.String("dot", "", "list-append and rw-register: write one Graphviz file per cycle found into DIR")
	seqKeys := fs.Bool("sequential-keys", false, "rw-register: assume each key's versions follow process order")
	linKeys := fs.Bool("linearizable-keys", false, "rw-register: assume each key's versions follow real-time order")
	bankTotal := fs.Int64("bank-total", 0, "bank: the total every read must sum to (default: the first read's sum)")
	negative := fs.Bool("allow-negative-balances", false, "bank: accept negative balances")
	groupSize := fs.Int("group-size", 0, "long-fork: the number of keys each read reads (default: any)")
	followFlag := fs.Bool("follow", false, "check one JSON Lines FILE while it is being written, as lines arrive, until its\nend marker {\"end\":true} (which ipfence's harness appends) or --idle without growth")
	idle := fs.Duration("idle", 0, "with --follow: end when the file has not grown for this long, such as 10s\n(default: wait for the end marker)")
	files, code, ok := cli.Parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence-verify check: "+format+"\n", a...)
		return cli.ExitError
	}
	if len(files) == 0 {
		fs.Usage()
		return usageErr("no history files given")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var format history.Format
	var err error
	if *formatName != "" {
		if format, err = history.ParseFormat(*formatName); err != nil {
			return usageErr("--format: %v", err)
		}
	}
	if *timeout < 0 {
		return usageErr("--timeout: %s is negative", *timeout)
	}
	if *idle < 0 {
		return usageErr("--idle: %s is negative", *idle)
	}
	if set["idle"] && !*followFlag {
		return usageErr("--idle applies only with --follow")
	}
	if *followFlag {
		switch {
		case len(files) != 1:
			return usageErr("--follow takes one file, not %d", len(files))
		case format != "" && format != history.JSONL:
			return usageErr("--follow reads JSON Lines only, not --format %s", format)
		case slices.Contains(workload.Names(), *modelName):
			return usageErr("--follow checks linearizability and transactional models; %s has no online form", *modelName)
		case set["html"]:
			return usageErr("--html does not apply with --follow")
		}
	}
	// Flags that belong to one family of models are refused with another,
	// rather than silently ignored.
	only := func(family string, flags ...string) int {
		for _, f := range flags {
			if set[f] {
				return usageErr("--%s does not apply to --model %s (it is for %s)", f, *modelName, family)
			}
		}
		return 0
	}
	maxBytes, err := parseBytes(*maxMem)
	if err != nil {
		return usageErr("--max-memory: %v", err)
	}
	// The parsed events may take half the bound; the search the rest.
	maxParsed := maxBytes / 2
	var check fileCheck
	var stream streamCheck
	// follower makes the online checker of --follow, and what to print
	// once it has finished.
	var follower func(file string) (follow.Checker, func() (any, string, func() error))
	transactional := *modelName == isolation.ListAppend || *modelName == isolation.RWRegister
	switch {
	case transactional:
		if c := only("linearizability models", "initial", "html", "no-partition"); c != 0 {
			return c
		}
		if c := only("bank and long-fork", "bank-total", "allow-negative-balances", "group-size"); c != 0 {
			return c
		}
		if err := isolation.ValidModel(*consistency); err != nil {
			return usageErr("--consistency: %v", err)
		}
		if *modelName == isolation.ListAppend {
			if c := only("rw-register", "sequential-keys", "linearizable-keys"); c != 0 {
				return c
			}
		}
		opt := isolation.Options{Workload: *modelName, Consistency: *consistency, SequentialKeys: *seqKeys, LinearizableKeys: *linKeys}
		stream = isolationCheck(opt, *dotDir)
		follower = func(file string) (follow.Checker, func() (any, string, func() error)) {
			c, _ := follow.NewTransactional(opt) // the options were checked above
			return c, func() (any, string, func() error) {
				var after func() error
				if *dotDir != "" {
					after = func() error { return writeDOT(*dotDir, file, c.Result) }
				}
				return isolationResult{File: file, Result: c.Result}, c.Result.Summary(file) + explainIsolation(c.Result), after
			}
		}
	case slices.Contains(workload.Names(), *modelName):
		if c := only("linearizability models", "initial", "html", "no-partition"); c != 0 {
			return c
		}
		if c := only("list-append and rw-register", "consistency", "dot", "sequential-keys", "linearizable-keys"); c != 0 {
			return c
		}
		if *groupSize < 0 {
			return usageErr("--group-size: %d is negative", *groupSize)
		}
		opt := workload.Options{BankTotal: *bankTotal, BankAllowNegative: *negative, LongForkGroupSize: *groupSize}
		check = workloadCheck(*modelName, opt, maxParsed)
	default:
		m, err := model.Lookup(*modelName)
		if err != nil {
			return usageErr("--model: unknown model %q; valid models: %s", *modelName, strings.Join(checkNames(), ", "))
		}
		if c := only("list-append and rw-register", "consistency", "dot", "sequential-keys", "linearizable-keys"); c != 0 {
			return c
		}
		if c := only("bank and long-fork", "bank-total", "allow-negative-balances", "group-size"); c != 0 {
			return c
		}
		// The deadline comes with the context, from the first byte.
		opt := lincheck.Options{Model: m, Unpartitioned: *whole}
		if *initial != "" {
			v, err := history.ParseValue(*initial)
			if err != nil {
				return usageErr("--initial: %v", err)
			}
			opt.Initial, opt.HasInitial = v, true
		}
		if opt.MaxMemory, err = parseBytes(*maxMem); err != nil {
			return usageErr("--max-memory: %v", err)
		}
		slog.Debug("bounds", "max_memory", opt.MaxMemory)
		check = linearCheck(opt, *htmlOut, len(files), maxParsed)
		if *htmlOut == "" {
			// No page to draw: the events need not be kept.
			stream = linearStream(opt, maxParsed)
		}
		follower = func(file string) (follow.Checker, func() (any, string, func() error)) {
			c := follow.NewLinear(file, opt)
			c.Early = func(r *lincheck.Report, events int) {
				fmt.Fprintf(stderr, "ipfence-verify check: %s: the first %d events are already not linearizable; checking on to the end\n", file, events)
			}
			return c, func() (any, string, func() error) { return c.Report, c.Report.Summary(), nil }
		}
	}

	lim := inputLimits(maxBytes)
	ownProcess := stdout == io.Writer(os.Stdout)
	if ownProcess {
		// The process's own command: the collector is told the bound
		// too, so that garbage does not double the memory the checker
		// accounts. (Not in tests that call runCheck side by side: the
		// limit and the collector's goal are one per process.)
		debug.SetMemoryLimit(maxBytes)
	}
	exit := cli.ExitValid
	sawInvalid, sawUnknown := false, false
	for _, file := range files {
		if ownProcess && transactional {
			debug.SetGCPercent(transactionalGC(file))
		}
		var o *fileOutcome
		if *followFlag {
			o = followFile(file, *timeout, *idle, lim, follower)
		} else {
			o = checkFile(file, *timeout, lim, *modelName, format, check, stream)
		}
		stderr.Write(o.warn.Bytes())
		if o.err != nil {
			fmt.Fprintf(stderr, "ipfence-verify check: %v\n", o.err)
			var le *history.LimitError
			if errors.As(o.err, &le) {
				if le.Parsed {
					fmt.Fprintf(stderr, "ipfence-verify check: (--max-memory %s leaves half, %s, to the parsed history; raise it to read more)\n",
						*maxMem, history.Size(maxParsed))
				} else {
					fmt.Fprintf(stderr, "ipfence-verify check: (--max-memory %s bounds the input to %s and each line to %s; raise it to read more)\n",
						*maxMem, history.Size(lim.MaxBytes), history.Size(lim.MaxLine))
				}
			}
			exit = cli.ExitError
			continue
		}
		if *asJSON {
			b, err := json.Marshal(o.obj)
			if err != nil {
				fmt.Fprintf(stderr, "ipfence-verify check: %s: encoding the result: %v\n", file, err)
				exit = cli.ExitError
				continue
			}
			fmt.Fprintf(stdout, "%s\n", b)
		} else {
			fmt.Fprintln(stdout, o.summary)
		}
		if o.after != nil {
			if err := o.after(); err != nil {
				fmt.Fprintf(stderr, "ipfence-verify check: %v\n", err)
				exit = cli.ExitError
			}
		}
		switch o.v {
		case linear.False:
			sawInvalid = true
		case linear.Unknown:
			sawUnknown = true
		}
	}
	if hwm, ok := peakRSS(); ok {
		slog.Debug("memory", "peak_rss", hwm, "max_memory", maxBytes)
	}
	switch {
	case exit == cli.ExitError:
		return cli.ExitError
	case sawInvalid:
		return cli.ExitInvalid
	case sawUnknown:
		return cli.ExitUnknown
	}
	return cli.ExitValid
}

// transactionalGC is the collector's goal (GOGC) for a transactional
// check of file. Its memory is nearly all live and grows as it reads
// (transactions, then edges): at the default goal of twice the live heap,
// 10M transactions peaked at 8.2 GB of RSS; at one and a half times, 6.8
// GB, for a tenth more CPU. A million took 0.8 GB at twice and 0.6 GB at
// one and a half, but 5.0 s rather than 5.7 s: a file under largeInput
// (or of unknown size) keeps the default.
func transactionalGC(file string) int {
	if st, err := os.Stat(file); err == nil && st.Mode().IsRegular() && st.Size() >= largeInput {
		return 50
	}
	return 100
}

// largeInput is the size from which a transactional check's collector
// keeps the heap tighter (see transactionalGC).
const largeInput = 1 << 30

// peakRSS is the process's peak resident memory in bytes (VmHWM, which
// exec resets, unlike the rusage of a child that the parent's memory
// inflates), where /proc says it.
func peakRSS() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// inputLimits derives the input's bounds from --max-memory. A parsed event
// takes several times its text (Go values, the search's tables), so the
// input may use a sixteenth of the budget and a line a quarter of that:
// with the default 4GiB, 256MiB files and 64MiB lines.
func inputLimits(maxMem int64) history.Limits {
	b := max(maxMem/16, 1)
	return history.Limits{MaxBytes: b, MaxLine: max(b/4, 1)}
}

// fileOutcome is how one file's check went.
type fileOutcome struct {
	v       linear.Verdict
	obj     any
	summary string
	after   func() error
	err     error
	warn    bytes.Buffer
}

// timeoutResult is the --json object of a file whose time ran out before
// its checker could answer.
type timeoutResult struct {
	File   string         `json:"file"`
	Model  string         `json:"model"`
	Valid  linear.Verdict `json:"valid"`
	Reason string         `json:"reason"`
	Detail string         `json:"detail"`
}

// checkContext is the context of one file's check: --timeout's deadline,
// or none when it is 0.
func checkContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(context.Background(), timeout)
	}
	return context.WithCancel(context.Background())
}

// checkFile opens, reads and checks one file within its timeout, which
// runs from the first byte: opening a FIFO, reading it, parsing and
// checking all count. The work runs in a goroutine; the searches stop
// themselves at the deadline, but a parse or a workload checker cannot be
// interrupted, so the answer is given without them when the time is up.
func checkFile(file string, timeout time.Duration, lim history.Limits, modelName string, format history.Format, check fileCheck, stream streamCheck) *fileOutcome {
	ctx, cancel := checkContext(timeout)
	defer cancel()
	out := &fileOutcome{}
	var phase atomic.Value // what the work is doing: "opening", "reading", ...
	phase.Store("opening")
	done := make(chan *fileOutcome, 1)
	go func() {
		o := &fileOutcome{}
		defer func() { done <- o }()
		f, err := history.OpenInput(ctx, file)
		if err != nil {
			o.err = err
			return
		}
		if stream != nil {
			o.v, o.obj, o.summary, o.after, o.err = stream(ctx, file, f, lim, format, &o.warn, func(p string) { phase.Store(p) })
			f.Close()
			return
		}
		phase.Store("reading")
		data, err := history.ReadInput(ctx, file, f, lim)
		f.Close()
		if err != nil {
			o.err = err
			return
		}
		o.v, o.obj, o.summary, o.after, o.err = check(ctx, file, data, format, &o.warn, func(p string) { phase.Store(p) })
	}()
	select {
	case o := <-done:
		out = o
	case <-ctx.Done():
		if p := phase.Load(); p == "opening" || p == "reading" || p == "searching" {
			// These honour the deadline themselves and say how far they
			// got.
			out = <-done
			break
		}
		select {
		case o := <-done:
			out = o
		default:
			detail := fmt.Sprintf("timed out after %s while %s the history", timeout, phase.Load())
			out.v = linear.Unknown
			out.obj = timeoutResult{File: file, Model: modelName, Valid: linear.Unknown, Reason: linear.ReasonTimeout, Detail: detail}
			out.summary = fmt.Sprintf("%s: unknown (%s): %s", file, modelName, detail)
			return out
		}
	}
	var re *history.ReadError
	if errors.As(out.err, &re) && errors.Is(re.Err, context.DeadlineExceeded) {
		detail := fmt.Sprintf("timed out after %s while reading the history, after %d bytes (on line %d)", timeout, re.Bytes, re.Line)
		if re.Line == 0 {
			detail = fmt.Sprintf("timed out after %s while opening the history (a FIFO that no writer opened)", timeout)
		}
		return &fileOutcome{v: linear.Unknown, warn: out.warn,
			obj:     timeoutResult{File: file, Model: modelName, Valid: linear.Unknown, Reason: linear.ReasonTimeout, Detail: detail},
			summary: fmt.Sprintf("%s: unknown (%s): %s", file, modelName, detail)}
	}
	return out
}

// followFile checks file as it is written (--follow): the verdict comes
// once the end marker is read, or the file has been idle for idle, and is
// printed as a check of the finished file prints it.
func followFile(file string, timeout, idle time.Duration, lim history.Limits, mk func(string) (follow.Checker, func() (any, string, func() error))) *fileOutcome {
	ctx, cancel := checkContext(timeout)
	defer cancel()
	o := &fileOutcome{}
	c, show := mk(file)
	v, end, err := follow.Check(ctx, file, history.FollowOptions{Idle: idle, MaxLine: int(lim.MaxLine)}, c)
	if errors.Is(err, context.DeadlineExceeded) {
		detail := fmt.Sprintf("timed out after %s following the history, after %d events (%d lines)", timeout, end.Events, end.Lines)
		return &fileOutcome{v: linear.Unknown, obj: timeoutResult{File: file, Valid: linear.Unknown, Reason: linear.ReasonTimeout, Detail: detail},
			summary: fmt.Sprintf("%s: unknown: %s", file, detail)}
	}
	if err != nil {
		o.err = err
		return o
	}
	if !end.Marker {
		fmt.Fprintf(&o.warn, "ipfence-verify check: warning: %s: no end marker; the file has not grown for %s, checking the %d events read\n", file, idle, end.Events)
	}
	if end.TornLine > 0 {
		warnTorn(&o.warn, file, end.TornLine, end.Events)
	}
	o.v = v
	o.obj, o.summary, o.after = show()
	return o
}

// linearCheck checks linearizability.
func linearCheck(opt lincheck.Options, htmlOut string, inputs int, maxParsed int64) fileCheck {
	return func(ctx context.Context, file string, data []byte, format history.Format, warn io.Writer, phase func(string)) (linear.Verdict, any, string, func() error, error) {
		phase("parsing")
		h, size, err := parseHistory(file, data, format, maxParsed, warn)
		if err != nil {
			return 0, nil, "", nil, err
		}
		// The parsed history shares the memory bound with the search.
		opt.MaxMemory -= size
		data = nil
		phase("searching")
		r, err := lincheck.Check(ctx, file, h, opt)
		if err != nil {
			return 0, nil, "", nil, err
		}
		slog.Debug("checked", "file", file, "valid", r.Valid, "reason", r.Reason, "ops", r.Ops,
			"partitions", r.Partitions, "configs", r.Configs, "took", time.Duration(r.CheckNS))
		var after func() error
		if htmlOut != "" {
			after = func() error { return writeHTML(htmlPath(htmlOut, file, inputs), r) }
		}
		return r.Valid, r, r.Summary(), after, nil
	}
}

// linearStream checks a history for linearizability as it reads it:
// only its operations are held, not the file or its events (the page of
// --html needs the events, and takes linearCheck's way).
func linearStream(opt lincheck.Options, maxParsed int64) streamCheck {
	return func(ctx context.Context, file string, in io.Reader, lim history.Limits, format history.Format, warn io.Writer, phase func(string)) (linear.Verdict, any, string, func() error, error) {
		phase("searching")
		d := history.NewDecoder(ctx, file, in, format, lim)
		defer d.Close()
		d.LimitParsed(maxParsed)
		d.Parallel()
		start := time.Now()
		r, err := lincheck.CheckDecoder(ctx, file, d, opt)
		if err != nil {
			return 0, nil, "", nil, err
		}
		f, _ := d.Format()
		slog.Debug("read history", "file", file, "format", f, "events", d.Events(), "took", time.Since(start)-time.Duration(r.CheckNS))
		slog.Debug("checked", "file", file, "events", d.Events(), "valid", r.Valid, "reason", r.Reason, "ops", r.Ops,
			"partitions", r.Partitions, "configs", r.Configs, "took", time.Duration(r.CheckNS))
		if t := d.TornLine(); t > 0 {
			warnTorn(warn, file, t, d.Events())
		}
		return r.Valid, r, r.Summary(), nil, nil
	}
}

// isolationResult is the --json object of a transactional check.
type isolationResult struct {
	File string `json:"file"`
	*isolation.Result
}

// isolationCheck checks a transactional history against a consistency
// model, as it reads it: only the transactions' compact form is held,
// not the file or its parsed events.
func isolationCheck(opt isolation.Options, dotDir string) streamCheck {
	return func(ctx context.Context, file string, in io.Reader, lim history.Limits, format history.Format, warn io.Writer, phase func(string)) (linear.Verdict, any, string, func() error, error) {
		// The reading stops at the deadline (ReadError), the cycle
		// searches stop themselves; the rest is linear in the input,
		// which --max-memory bounds.
		phase("searching")
		d := history.NewDecoder(ctx, file, in, format, lim)
		defer d.Close()
		start := time.Now()
		r, err := isolation.CheckDecoder(ctx, d, opt)
		if err != nil {
			var ie *history.InputError
			var le *history.LimitError
			var re *history.ReadError
			if errors.As(err, &ie) || errors.As(err, &le) || errors.As(err, &re) {
				return 0, nil, "", nil, err
			}
			return 0, nil, "", nil, fmt.Errorf("%s: %w", file, err)
		}
		slog.Debug("checked", "file", file, "events", d.Events(), "txns", r.Txns, "took", time.Since(start))
		if t := d.TornLine(); t > 0 {
			warnTorn(warn, file, t, d.Events())
		}
		var after func() error
		if dotDir != "" {
			after = func() error { return writeDOT(dotDir, file, r) }
		}
		return r.Valid, isolationResult{File: file, Result: r}, r.Summary(file) + explainIsolation(r), after, nil
	}
}

// shownPerType is how many examples of each anomaly type the text output
// explains; --json has every example the checker kept.
const shownPerType = 3

// explainIsolation says in words, as Elle does, what each anomaly found
// is: the transactions involved, named by the index of the event that
// completed them (the operation as it stands in the file), and for a
// cycle each dependency in turn and why it holds. It is "" for a valid
// history.
func explainIsolation(r *isolation.Result) string {
	var b strings.Builder
	section := func(types []string, examples map[string][]isolation.Anomaly, title string) {
		for _, typ := range types {
			list := examples[typ]
			if len(list) == 0 {
				continue
			}
			n := max(r.Counts[typ], len(list))
			fmt.Fprintf(&b, "\n  %s%s (%d found", title, typ, n)
			if n > shownPerType {
				fmt.Fprintf(&b, ", %d shown", shownPerType)
			}
			b.WriteString("):")
			for i, a := range list[:min(len(list), shownPerType)] {
				if len(list) > 1 {
					fmt.Fprintf(&b, "\n    #%d", i+1)
				}
				explainAnomaly(&b, a)
			}
		}
	}
	section(r.AnomalyTypes, r.Anomalies, "")
	var assumed []string
	for t := range r.Assumptions {
		assumed = append(assumed, t)
	}
	slices.Sort(assumed)
	section(assumed, r.Assumptions, "broken assumption: ")
	if b.Len() > 0 {
		b.WriteString("\n  (--json prints every example kept; --dot DIR draws each cycle)")
	}
	return b.String()
}

// explainAnomaly writes one anomaly: "Let:" the transactions, "Then:" the
// cycle's steps, or the checker's explanation when it has no cycle.
func explainAnomaly(b *strings.Builder, a isolation.Anomaly) {
	seen := map[int64]bool{}
	var refs []isolation.OpRef
	add := func(r isolation.OpRef) {
		if !seen[r.Index] {
			seen[r.Index] = true
			refs = append(refs, r)
		}
	}
	for _, st := range a.Cycle {
		add(st.From)
		add(st.To)
	}
	for _, r := range a.Ops {
		add(r)
	}
	if len(refs) > 0 {
		b.WriteString("\n    Let:")
		for _, r := range refs {
			proc := "no process"
			if r.Process != nil {
				proc = "process " + r.Process.String()
			}
			inv := ""
			if r.Invoke != r.Index {
				inv = fmt.Sprintf(", invoked at index %d", r.Invoke)
			}
			fmt.Fprintf(b, "\n      T%d: %s, %s%s: %s", r.Index, proc, r.Type, inv, clip(history.Show(r.Value), 200))
		}
	}
	if len(a.Cycle) == 0 {
		fmt.Fprintf(b, "\n    %s", a.Explanation)
		return
	}
	b.WriteString("\n    Then:")
	for i, st := range a.Cycle {
		lead := ""
		if i == len(a.Cycle)-1 && i > 0 {
			lead = "However, "
		}
		end := "."
		if i == len(a.Cycle)-1 {
			end = ": a cycle."
		}
		fmt.Fprintf(b, "\n      - %sT%d < T%d, because %s%s", lead, st.From.Index, st.To.Index, st.Why, end)
	}
}

// wrap joins names with commas into lines of at most width bytes.
func wrap(names []string, width int) string {
	var b strings.Builder
	line := 0
	for i, n := range names {
		if i > 0 {
			b.WriteString(",")
			line++
			if line+1+len(n) > width {
				b.WriteString("\n")
				line = 0
			} else {
				b.WriteString(" ")
				line++
			}
		}
		b.WriteString(n)
		line += len(n)
	}
	return b.String()
}

// clip cuts s to n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// writeDOT writes one Graphviz file per cycle anomaly:
// DIR/<input>-<type>-<n>.dot.
func writeDOT(dir, file string, r *isolation.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--dot: %w", err)
	}
	base := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	for _, typ := range r.AnomalyTypes {
		for i, a := range r.Anomalies[typ] {
			dot := a.DOT()
			if dot == "" {
				continue
			}
			path := filepath.Join(dir, fmt.Sprintf("%s-%s-%d.dot", base, typ, i))
			if err := os.WriteFile(path, []byte(dot), 0o644); err != nil {
				return fmt.Errorf("--dot: %w", err)
			}
		}
	}
	return nil
}

// workloadCheck runs one of the Jepsen workload checkers.
func workloadCheck(name string, opt workload.Options, maxParsed int64) fileCheck {
	return func(_ context.Context, file string, data []byte, format history.Format, warn io.Writer, phase func(string)) (linear.Verdict, any, string, func() error, error) {
		phase("parsing")
		h, _, err := parseHistory(file, data, format, maxParsed, warn)
		if err != nil {
			return 0, nil, "", nil, err
		}
		// The workload checkers take no deadline: checkFile answers
		// unknown without them when the time is up.
		phase("checking")
		r, err := workload.Check(name, h, opt)
		if err != nil {
			return 0, nil, "", nil, fmt.Errorf("%s: %w", file, err)
		}
		obj := map[string]any{"file": file}
		b, err := json.Marshal(r)
		if err != nil {
			return 0, nil, "", nil, err
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return 0, nil, "", nil, err
		}
		obj["file"] = file
		return r.Valid, obj, file + ": " + r.Summary(), nil, nil
	}
}

func formatNames() string {
	names := make([]string, len(history.Formats))
	for i, f := range history.Formats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// htmlPath names the page for one input: the flag's value itself when there
// is one input, else the value with the input's base name inserted.
func htmlPath(flagValue, input string, inputs int) string {
	if inputs == 1 {
		return flagValue
	}
	ext := filepath.Ext(flagValue)
	base := strings.TrimSuffix(filepath.Base(input), filepath.Ext(input))
	return strings.TrimSuffix(flagValue, ext) + "-" + base + ".html"
}

func writeHTML(path string, r *lincheck.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := r.WriteHTML(f); err != nil {
		f.Close()
		return fmt.Errorf("--html %s: %w", path, err)
	}
	return f.Close()
}

// parseBytes reads a size such as 4GiB, 512MiB, 100MB or 1048576.
func parseBytes(s string) (int64, error) { return history.ParseSize(s) }
