package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/lincheck"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/model"
)

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs, level := flagSet("check", "check [--model M] [--format F] [--initial V] [--timeout D] [--json] [--html FILE] FILE...", stderr)
	modelName := fs.String("model", "cas-register", "model to check against: "+strings.Join(model.Names(), ", "))
	formatName := fs.String("format", "", "history format: "+formatNames()+" (default: detected from content)")
	initial := fs.String("initial", "", "initial register value as an EDN or JSON literal, such as 0 or \"x\" (default nil: absent)")
	timeout := fs.Duration("timeout", 0, "give up with verdict unknown after this long per file, such as 30s (default: no limit)")
	asJSON := fs.Bool("json", false, "print one JSON object per file instead of a line of text")
	htmlOut := fs.String("html", "", "write a self-contained HTML page of the history and its linearization to FILE\n(with several inputs, one page each, named FILE-<input name>.html)")
	whole := fs.Bool("no-partition", false, "check kv and multi-register histories as one object with one state instead of\nsplitting them by key (kv still lets the search use the keys' independence)")
	maxMem := fs.String("max-memory", "4GiB", "give up with verdict unknown when the search needs more memory than this")
	files, code, ok := parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence check: "+format+"\n", a...)
		return exitError
	}
	if len(files) == 0 {
		fs.Usage()
		return usageErr("no history files given")
	}
	m, err := model.Lookup(*modelName)
	if err != nil {
		return usageErr("--model: %v", err)
	}
	var format history.Format
	if *formatName != "" {
		if format, err = history.ParseFormat(*formatName); err != nil {
			return usageErr("--format: %v", err)
		}
	}
	opt := lincheck.Options{Model: m, Timeout: *timeout, Unpartitioned: *whole}
	if *initial != "" {
		v, err := history.ParseValue(*initial)
		if err != nil {
			return usageErr("--initial: %v", err)
		}
		opt.Initial, opt.HasInitial = v, true
	}
	if *timeout < 0 {
		return usageErr("--timeout: %s is negative", *timeout)
	}
	if opt.MaxMemory, err = parseBytes(*maxMem); err != nil {
		return usageErr("--max-memory: %v", err)
	}

	exit := exitValid
	sawInvalid, sawUnknown := false, false
	for _, file := range files {
		start := time.Now()
		h, err := history.ReadFile(file, format)
		if err != nil {
			fmt.Fprintf(stderr, "ipfence check: %v\n", err)
			exit = exitError
			continue
		}
		slog.Debug("read history", "file", file, "format", h.Format, "events", len(h.Events), "took", time.Since(start))
		if h.TornLine > 0 {
			fmt.Fprintf(stderr, "ipfence check: warning: %s:%d: the last line is cut short (its writer stopped mid-line); checking the %d events before it\n",
				file, h.TornLine, len(h.Events))
		}
		r, err := lincheck.Check(context.Background(), file, h, opt)
		if err != nil {
			fmt.Fprintf(stderr, "ipfence check: %v\n", err)
			exit = exitError
			continue
		}
		slog.Debug("checked", "file", file, "valid", r.Valid, "reason", r.Reason, "ops", r.Ops,
			"partitions", r.Partitions, "configs", r.Configs, "took", time.Duration(r.CheckNS))
		if *asJSON {
			b, err := json.Marshal(r)
			if err != nil {
				fmt.Fprintf(stderr, "ipfence check: %s: encoding the result: %v\n", file, err)
				exit = exitError
				continue
			}
			fmt.Fprintf(stdout, "%s\n", b)
		} else {
			fmt.Fprintln(stdout, r.Summary())
		}
		if *htmlOut != "" {
			path := htmlPath(*htmlOut, file, len(files))
			if err := writeHTML(path, r); err != nil {
				fmt.Fprintf(stderr, "ipfence check: %v\n", err)
				exit = exitError
			}
		}
		switch r.Valid {
		case linear.False:
			sawInvalid = true
		case linear.Unknown:
			sawUnknown = true
		}
	}
	switch {
	case exit == exitError:
		return exitError
	case sawInvalid:
		return exitInvalid
	case sawUnknown:
		return exitUnknown
	}
	return exitValid
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
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	num, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a positive size such as 4GiB, 512MiB or 1048576", s)
	}
	return n * mult, nil
}
