package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ipfence/ipfence/capture/cloudsim"
)

// shutdownGrace bounds how long cloudsim waits for calls in flight after a
// signal before it exits anyway.
const shutdownGrace = 5 * time.Second

func runCloudsim(args []string, stdout, stderr io.Writer) int {
	fs, level := flagSet("cloudsim", "cloudsim [--listen ADDR] --nics ID,ID,... [--subnet CIDR] [--state DIR] [--seed N]", stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve the EC2 Query API and the admin API on (port 0: any free port)")
	nics := fs.String("nics", "", "comma-separated NIC ids, such as eni-a,eni-b,eni-c\n(may be left out when --state holds a saved model)")
	subnet := fs.String("subnet", "", "IPv4 subnet of the NICs, /16 to /28 (default 10.0.0.0/24, or the saved model's)")
	stateDir := fs.String("state", "", "directory to save the model in after every change, and to load it from on start")
	seed := fs.Uint64("seed", 1, "seed of the random numbers that decide which calls an injected error rate fails")
	pos, code, ok := parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence cloudsim: "+format+"\n", a...)
		return exitError
	}
	if len(pos) > 0 {
		return usageErr("unexpected argument %q", pos[0])
	}
	c := cloudsim.Config{StateDir: *stateDir, Seed: *seed, Logger: slog.Default()}
	if *nics != "" {
		c.NICs = strings.Split(*nics, ",")
	}
	if *subnet != "" {
		p, err := netip.ParsePrefix(*subnet)
		if err != nil {
			return usageErr("--subnet: %q is not a prefix such as 10.0.0.0/24", *subnet)
		}
		c.Subnet = p
	}
	sim, err := cloudsim.New(c)
	if err != nil {
		var ce *cloudsim.ConfigError
		if errors.As(err, &ce) {
			flagName := map[string]string{"NICs": "--nics", "Subnet": "--subnet", "StateDir": "--state"}[ce.Field]
			return usageErr("%s: %v", flagName, ce.Err)
		}
		return usageErr("%v", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return usageErr("--listen: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{
		Handler: sim,
		// Calls held by a pause or a latency end with the signal, so
		// that shutting down never waits for a resume.
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	slog.Info("cloudsim ready", "address", ln.Addr().String(), "nics", len(sim.NICs()), "state", *stateDir, "seed", *seed)

	select {
	case err := <-served:
		return usageErr("serving: %v", err)
	case <-ctx.Done():
	}
	slog.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		slog.Warn("shutdown", "error", err)
	}
	return exitValid
}
