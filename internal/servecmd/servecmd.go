package servecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/config"
	"github.com/ipfence/ipfence/capture/daemon"
	"github.com/ipfence/ipfence/internal/cli"
)

func Run(args []string, stdout, stderr io.Writer) int {
	fs, level := cli.FlagSet("serve", "serve --config FILE [--listen-fd N] [--test-endpoints] [--unsafe-disable-fence]", stderr)
	path := fs.String("config", "", "the node's YAML configuration file")
	testEndpoints := fs.Bool("test-endpoints", false, "serve /v1/test/ endpoints that break the node on purpose (clock offset), for the harness; never in production")
	unfenced := fs.Bool("unsafe-disable-fence", false, "turn the gate into a no-op: the planted bug the harness must catch; never in production")
	listenFD := fs.Int("listen-fd", 0, "serve on the listening socket inherited as this file descriptor (3 for the first\nof the starting process's extra files) instead of binding the configuration's listen\naddress: whoever starts the node binds the port, so no port is chosen free and lost")
	rejoin := fs.String("rejoin-from", "", "after a majority of the cluster lost its state: the peers (comma-separated) whose records\nthis node, having lost its own, may act on; see the README's ipfence serve")
	floor := fs.Uint64("epoch-floor", 0, "after a majority of the cluster lost its state: take no epoch at or below this one\n(the highest the provider's history shows)")
	pos, code, ok := cli.Parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence serve: "+format+"\n", a...)
		return cli.ExitError
	}
	if len(pos) > 0 {
		return fail("unexpected argument %q", pos[0])
	}
	if *path == "" {
		fs.Usage()
		return fail("--config is required")
	}
	if *listenFD != 0 && *listenFD < 3 {
		return fail("--listen-fd must be 3 or more (0, 1 and 2 are stdin, stdout and stderr), not %d", *listenFD)
	}
	cfg, err := config.Load(*path)
	if err != nil {
		// Every problem the file has, each with its line.
		var joined interface{ Unwrap() []error }
		if errors.As(err, &joined) {
			for _, e := range joined.Unwrap() {
				fmt.Fprintf(stderr, "ipfence serve: %v\n", e)
			}
			return cli.ExitError
		}
		return fail("%v", err)
	}
	if *unfenced {
		slog.Warn("the fence is disabled: stale actions will execute (--unsafe-disable-fence)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var ln net.Listener
	if *listenFD != 0 {
		f := os.NewFile(uintptr(*listenFD), "listen-fd")
		ln, err = net.FileListener(f)
		f.Close()
		if err != nil {
			return fail("--listen-fd %d: not a listening socket: %v", *listenFD, err)
		}
	}
	var rejoinFrom []string
	if *rejoin != "" {
		rejoinFrom = strings.Split(*rejoin, ",")
	}
	d, err := daemon.New(ctx, cfg, daemon.Options{Logger: slog.Default(), TestEndpoints: *testEndpoints, UnsafeDisableFence: *unfenced, Listener: ln,
		RejoinFrom: rejoinFrom, EpochFloor: capture.Epoch(*floor)})
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", d.Addr())
	if err := d.Run(ctx); err != nil {
		return fail("%v", err)
	}
	return cli.ExitValid
}
