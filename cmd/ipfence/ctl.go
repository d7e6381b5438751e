package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/daemon"
	"github.com/ipfence/ipfence/internal/jsonhttp"
)

func runCtl(args []string, stdout, stderr io.Writer) int {
	fs, level := flagSet("ctl", "ctl --endpoint URL --token-file FILE [--json] status|actions|approve KEY|reject KEY|drain NODE|undrain NODE", stderr)
	endpoint := fs.String("endpoint", "", "the node's API, such as http://127.0.0.1:7001")
	tokenFile := fs.String("token-file", "", "the operator's secret (federation.operator_secret_file; without one, the cluster's shared secret), to sign requests")
	asJSON := fs.Bool("json", false, "print JSON for programs instead of tables")
	state := fs.String("state", "", "actions: only rows in this state")
	kind := fs.String("kind", "", "actions: only rows of this kind")
	pool := fs.String("pool", "", "actions: only rows of this pool")
	creds := addCtlCredentials(fs) // ctlcreds.go
	pos, code, ok := parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence ctl: "+format+"\n", a...)
		return exitError
	}
	bad := func(format string, a ...any) int { return usageError(stderr, "ctl", format, a...) }
	if *endpoint == "" || !creds.given(*tokenFile) {
		return bad("--endpoint and --token-file are required (under mutual TLS, --cert, --key and --ca may stand in for --token-file)")
	}
	if _, err := url.Parse(*endpoint); err != nil {
		return fail("--endpoint: %v", err)
	}
	tr, err := creds.transport(*tokenFile, *endpoint)
	if err != nil {
		return fail("%v", err)
	}
	if len(pos) == 0 {
		return bad("no command: want status, actions, approve KEY, reject KEY, drain NODE or undrain NODE")
	}
	c := &ctlClient{base: strings.TrimSuffix(*endpoint, "/"), http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: tr,
	}}
	need := func(n int) bool { return len(pos) == n+1 }
	var out any
	switch pos[0] {
	case "status":
		var st daemon.Status
		err = c.do(http.MethodGet, "/v1/status", nil, &st)
		out = st
		if err == nil && !*asJSON {
			printStatus(stdout, st)
			return exitValid
		}
	case "actions":
		q := url.Values{}
		for k, v := range map[string]string{"state": *state, "kind": *kind, "pool": *pool} {
			if v != "" {
				q.Set(k, v)
			}
		}
		var rows []capture.Row
		err = c.do(http.MethodGet, "/v1/actions?"+q.Encode(), nil, &rows)
		out = rows
		if err == nil && !*asJSON {
			printRows(stdout, rows)
			return exitValid
		}
	case "approve", "reject":
		if !need(1) {
			return fail("%s takes one idempotency key", pos[0])
		}
		var row capture.Row
		err = c.do(http.MethodPost, "/v1/actions/"+pos[0], map[string]string{"key": pos[1]}, &row)
		out = row
	case "drain", "undrain":
		if !need(1) {
			return fail("%s takes one node name", pos[0])
		}
		var res map[string]any
		err = c.do(http.MethodPost, "/v1/members/"+url.PathEscape(pos[1])+"/"+pos[0], nil, &res)
		out = res
	default:
		return fail("unknown command %q: want status, actions, approve, reject, drain or undrain", pos[0])
	}
	if err != nil {
		return fail("%v", err)
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Fprintf(stdout, "%s\n", b)
	return exitValid
}

type ctlClient struct {
	base string
	http *http.Client
}

// do calls the API; an answer other than 200 is an error carrying the
// node's message.
func (c *ctlClient) do(method, path string, body, out any) error {
	err := jsonhttp.Do(context.Background(), c.http, method, c.base+path, body, out)
	var se *jsonhttp.StatusError
	if errors.As(err, &se) {
		return fmt.Errorf("%s %s: %s: %s", method, path, se.Status, se.Message)
	}
	return err
}

func printStatus(w io.Writer, st daemon.Status) {
	fmt.Fprintf(w, "node %s, last pass %s", st.Node, st.LastPass.Format(time.RFC3339))
	if st.PassError != "" {
		fmt.Fprintf(w, " (error: %s)", st.PassError)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tHEARD\tSTALE\tDRAINED\tHEARTBEAT AGE")
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%.0fms\n", m.Node, m.Heard, m.Stale, m.Drained, m.AgeMilli)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ADDRESS\tPOOL\tDESIRED\tEPOCH\tHOLDER\tHELD HERE\tPROVIDER")
	for _, a := range st.Addresses {
		prov := a.ProviderHolder
		if prov == "" {
			prov = a.ProviderNIC
		}
		if a.ProviderError != "" {
			prov = "error: " + a.ProviderError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%v\t%s\n", a.Address, a.Pool, a.DesiredHolder, a.Epoch, a.Holder, a.HeldHere, prov)
	}
	tw.Flush()
}

func printRows(w io.Writer, rows []capture.Row) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tSTATE\tKIND\tADDRESS\tTARGET\tHOLDER\tEPOCH\tKEY\tREASON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Seq, r.State, r.Kind, r.Address, r.Target, r.Holder, r.Epoch, r.IdempotencyKey, r.Reason)
	}
	tw.Flush()
}
