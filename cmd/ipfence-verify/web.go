package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/verify/storeweb"
)

func runWeb(args []string, stdout, stderr io.Writer) int {
	fs, level := cli.FlagSet("web", "web [--store DIR] [--listen ADDR]", stderr)
	store := fs.String("store", "store", "the store's folder, as `ipfence-verify test --store` wrote it")
	listen := fs.String("listen", "127.0.0.1:8080", "the address to serve on (port 0: any free port); keep it on loopback:\nthe store holds the runs' logs and configuration")
	pos, code, ok := cli.Parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence-verify web: "+format+"\n", a...)
		return cli.ExitError
	}
	if len(pos) > 0 {
		return fail("unexpected argument %q", pos[0])
	}
	srv, err := storeweb.New(*store)
	if err != nil {
		return fail("%v (run 'ipfence-verify test capture' to make one, or pass --store)", err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fail("--listen %s: %v", *listen, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	fmt.Fprintf(stdout, "serving the store %s at http://%s/ (Ctrl-C stops)\n", *store, ln.Addr())
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail("%v", err)
	}
	return cli.ExitValid
}
