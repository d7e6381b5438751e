package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ipfence/ipfence/capture/config"
	"github.com/ipfence/ipfence/capture/daemon"
)

func runServe(args []string, stdout, stderr io.Writer) int {
	fs, level := flagSet("serve", "serve --config FILE [--test-endpoints] [--unsafe-disable-fence]", stderr)
	path := fs.String("config", "", "the node's YAML configuration file")
	testEndpoints := fs.Bool("test-endpoints", false, "serve /v1/test/ endpoints that break the node on purpose (clock offset), for the harness; never in production")
	unfenced := fs.Bool("unsafe-disable-fence", false, "turn the gate into a no-op: the planted bug the harness must catch; never in production")
	pos, code, ok := parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence serve: "+format+"\n", a...)
		return exitError
	}
	if len(pos) > 0 {
		return fail("unexpected argument %q", pos[0])
	}
	if *path == "" {
		fs.Usage()
		return fail("--config is required")
	}
	cfg, err := config.Load(*path)
	if err != nil {
		// Every problem the file has, each with its line.
		var joined interface{ Unwrap() []error }
		if errors.As(err, &joined) {
			for _, e := range joined.Unwrap() {
				fmt.Fprintf(stderr, "ipfence serve: %v\n", e)
			}
			return exitError
		}
		return fail("%v", err)
	}
	if *unfenced {
		slog.Warn("the fence is disabled: stale actions will execute (--unsafe-disable-fence)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := daemon.New(ctx, cfg, daemon.Options{Logger: slog.Default(), TestEndpoints: *testEndpoints, UnsafeDisableFence: *unfenced})
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", d.Addr())
	if err := d.Run(ctx); err != nil {
		return fail("%v", err)
	}
	return exitValid
}
