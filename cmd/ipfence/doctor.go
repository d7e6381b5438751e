package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ipfence/ipfence/capture/provider/onprem/arpwatch"
	"github.com/ipfence/ipfence/internal/cli"
)

// doctorResult is what doctor --json prints.
type doctorResult struct {
	Address    string   `json:"address"`
	Interface  string   `json:"interface"`
	Responders []string `json:"responders"`
	SplitBrain bool     `json:"split_brain"`
}

// runDoctor asks the LAN who answers ARP for an on-premises mobile address.
// Exactly one responder is the healthy state; more than one is a split
// brain (two hosts proxy-answer, and neighbours split between them); none
// means nobody holds the address. The verdict is the exit code, as check's
// is: 0 one responder, 1 split brain, 2 none, 3 a usage or system error.
func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs, level := cli.FlagSet("doctor", "doctor --address A --interface I [--count N] [--timeout D] [--json]", stderr)
	address := fs.String("address", "", "the IPv4 address to ask about (required)")
	iface := fs.String("interface", "", "the interface to ask on: one on the address's LAN, with an IPv4 address (required)")
	count := fs.Int("count", 3, "ARP requests to send, 100ms apart")
	timeout := fs.Duration("timeout", time.Second, "how long to wait for replies after the last request")
	asJSON := fs.Bool("json", false, `print {"address","interface","responders","split_brain"} instead of a line of text`)
	pos, code, ok := cli.Parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	usageErr := func(format string, a ...any) int { return cli.UsageError(stderr, "doctor", format, a...) }
	switch {
	case len(pos) > 0:
		return usageErr("unexpected argument %q: doctor takes flags only", pos[0])
	case *address == "":
		return usageErr("--address is required")
	case *iface == "":
		return usageErr("--interface is required")
	case *count < 1:
		return usageErr("--count: %d: want at least 1", *count)
	case *timeout <= 0:
		return usageErr("--timeout: %s: want a positive duration", *timeout)
	}
	addr, err := netip.ParseAddr(*address)
	if err != nil || !addr.Is4() {
		return usageErr("--address: %q is not an IPv4 address", *address)
	}
	// Checked here too, so that the message names the flag; the probe
	// explains the other ways an interface is unusable.
	if _, err := net.InterfaceByName(*iface); err != nil {
		return usageErr("--interface: no interface %q on this host", *iface)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	macs, err := arpwatch.Probe(ctx, *iface, addr, arpwatch.ProbeOptions{Count: *count, Timeout: *timeout})
	if err != nil {
		fmt.Fprintf(stderr, "ipfence doctor: %v\n", err)
		return cli.ExitError
	}
	res := doctorResult{Address: addr.String(), Interface: *iface, Responders: []string{}, SplitBrain: len(macs) > 1}
	for _, m := range macs {
		res.Responders = append(res.Responders, m.String())
	}
	if *asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		switch len(macs) {
		case 0:
			fmt.Fprintf(stdout, "no responder for %s on %s\n", addr, *iface)
		case 1:
			fmt.Fprintf(stdout, "1 responder: %s\n", res.Responders[0])
		default:
			fmt.Fprintf(stdout, "SPLIT BRAIN: %d responders for %s on %s: %s\n", len(macs), addr, *iface, strings.Join(res.Responders, ", "))
		}
	}
	switch len(macs) {
	case 0:
		return cli.ExitUnknown
	case 1:
		return cli.ExitValid
	}
	return cli.ExitInvalid
}
