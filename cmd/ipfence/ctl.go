package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/internal/jsonhttp"
)

func runCtl(args []string, stdout, stderr io.Writer) int {
	fs, level := cli.FlagSet("ctl", "ctl --endpoint URL --token-file FILE [--json] status|actions|approve ID|reject ID|drain NODE|undrain NODE", stderr)
	endpoint := fs.String("endpoint", "", "the node's API, such as http://127.0.0.1:7001")
	tokenFile := fs.String("token-file", "", "the operator's secret (federation.operator_secret_file; without one, the cluster's shared secret), to sign requests")
	asJSON := fs.Bool("json", false, "print JSON for programs instead of tables")
	state := fs.String("state", "", "actions: only rows in this state")
	kind := fs.String("kind", "", "actions: only rows of this kind")
	pool := fs.String("pool", "", "actions: only rows of this pool")
	creds := addCtlCredentials(fs) // ctlcreds.go
	pos, code, ok := cli.Parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence ctl: "+format+"\n", a...)
		return cli.ExitError
	}
	bad := func(format string, a ...any) int { return cli.UsageError(stderr, "ctl", format, a...) }
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
		return bad("no command: want status, actions, approve ID, reject ID, drain NODE or undrain NODE")
	}
	switch pos[0] {
	case "status", "actions":
		if len(pos) != 1 {
			return bad("%s takes no argument, not %q", pos[0], pos[1])
		}
	case "approve", "reject":
		if len(pos) != 2 {
			return bad("%s takes one action: its id from 'ipfence ctl actions', or a unique prefix of its idempotency key", pos[0])
		}
	case "drain", "undrain":
		if len(pos) != 2 {
			return bad("%s takes one node name", pos[0])
		}
	default:
		msg := fmt.Sprintf("unknown command %q", pos[0])
		if s := cli.Suggest(pos[0], ctlCommands); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		return bad("%s: want status, actions, approve, reject, drain or undrain", msg)
	}
	c := &ctlClient{base: strings.TrimSuffix(*endpoint, "/"), http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: tr,
	}}
	var out any
	switch pos[0] {
	case "status":
		var st daemon.Status
		if err := c.do(http.MethodGet, "/v1/status", nil, &st); err != nil {
			return fail("%v", err)
		}
		clampAges(&st)
		if !*asJSON {
			printStatus(stdout, st, time.Now())
			return cli.ExitValid
		}
		out = st
	case "actions":
		q := url.Values{}
		for k, v := range map[string]string{"state": *state, "kind": *kind, "pool": *pool} {
			if v != "" {
				q.Set(k, v)
			}
		}
		var rows []capture.Row
		if err := c.do(http.MethodGet, "/v1/actions?"+q.Encode(), nil, &rows); err != nil {
			return fail("%v", err)
		}
		if !*asJSON {
			printRows(stdout, rows)
			return cli.ExitValid
		}
		out = rows
	case "approve", "reject":
		var rows []capture.Row
		if err := c.do(http.MethodGet, "/v1/actions", nil, &rows); err != nil {
			return fail("%v", err)
		}
		key, err := resolveAction(rows, pos[1], pos[0] == "reject")
		if err != nil {
			fmt.Fprintf(stderr, "ipfence ctl: %s: %v\n", pos[0], err)
			return cli.ExitError
		}
		var row capture.Row
		if err := c.do(http.MethodPost, "/v1/actions/"+pos[0], map[string]string{"key": key}, &row); err != nil {
			return fail("%v", err)
		}
		if !*asJSON {
			verb := map[string]string{"approve": "approved", "reject": "rejected"}[pos[0]]
			fmt.Fprintf(stdout, "%s %s: %s %s on %s (pool %s, epoch %d); it is now %s\n",
				verb, shortID(key, idLen), row.Kind, row.Address, row.Target, row.Key.Pool, row.Epoch, row.State)
			return cli.ExitValid
		}
		out = row
	case "drain", "undrain":
		var res struct {
			Node   string `json:"node"`
			Intent string `json:"intent"`
			Event  string `json:"event"`
		}
		if err := c.do(http.MethodPost, "/v1/members/"+url.PathEscape(pos[1])+"/"+pos[0], nil, &res); err != nil {
			return fail("%v", err)
		}
		if !*asJSON {
			if pos[0] == "drain" {
				fmt.Fprintf(stdout, "drained %s: it gives up its addresses to the next members by priority, and takes none until 'ipfence ctl undrain %s' (event %s)\n", res.Node, res.Node, res.Event)
			} else {
				fmt.Fprintf(stdout, "undrained %s: it may hold addresses again, and takes back by priority those it is preferred for (event %s)\n", res.Node, res.Event)
			}
			return cli.ExitValid
		}
		out = res
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Fprintf(stdout, "%s\n", b)
	return cli.ExitValid
}

// ctlCommands are ctl's commands, for "did you mean".
var ctlCommands = []string{"status", "actions", "approve", "reject", "drain", "undrain"}

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

// idLen is how many hex digits of an action's id the tables show, as git
// shows seven of a commit's hash.
const idLen = 7

// shortID is an action's id: the first n hex digits of the SHA-256 of its
// idempotency key. Keys are long and share long prefixes (pool, provider,
// target); a hash prefix tells rows apart in a few characters.
func shortID(key string, n int) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:n]
}

// resolveAction finds the one journal row arg names: its whole
// idempotency key, a prefix of its id (four hex digits at least), or a
// unique prefix of its key. Among several matches, the rows the decision
// can apply to (pending ones; approved ones too for a rejection) are
// chosen; more than one of those is ambiguous, and the error lists them.
func resolveAction(rows []capture.Row, arg string, reject bool) (string, error) {
	var matches, open []capture.Row
	for _, r := range rows {
		if r.IdempotencyKey == arg {
			return arg, nil
		}
		idMatch := len(arg) >= 4 && strings.HasPrefix(shortID(r.IdempotencyKey, 64), strings.ToLower(arg))
		if idMatch || strings.HasPrefix(r.IdempotencyKey, arg) {
			matches = append(matches, r)
			if r.State == capture.Pending || reject && r.State == capture.Approved {
				open = append(open, r)
			}
		}
	}
	want := "pending"
	if reject {
		want = "pending or approved"
	}
	switch {
	case len(open) == 1:
		return open[0].IdempotencyKey, nil
	case len(open) > 1:
		return "", fmt.Errorf("%q is ambiguous: it matches %d %s actions; give more of the id or the key:\n%s", arg, len(open), want, candidates(open))
	case len(matches) > 0:
		return "", fmt.Errorf("%q matches no %s action, only these:\n%s", arg, want, candidates(matches))
	}
	var waiting []capture.Row
	for _, r := range rows {
		if r.State == capture.Pending || reject && r.State == capture.Approved {
			waiting = append(waiting, r)
		}
	}
	if len(waiting) == 0 {
		return "", fmt.Errorf("no action matches %q, and no action is %s", arg, want)
	}
	return "", fmt.Errorf("no action matches %q; the %s actions are:\n%s", arg, want, candidates(waiting))
}

// candidates lists rows, at most ten, one a line, for an error.
func candidates(rows []capture.Row) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for i, r := range rows {
		if i == 10 {
			fmt.Fprintf(tw, "  … and %d more\n", len(rows)-10)
			break
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\tepoch %d\t%s\n", shortID(r.IdempotencyKey, idLen), r.State, r.Kind, r.Address, r.Target, r.Epoch, r.IdempotencyKey)
	}
	tw.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

// clampAges makes every heartbeat age at least zero. The node computes an
// age as the group's time (the median of the members' newest heartbeats)
// less the member's newest heartbeat, which is negative for a member ahead
// of the median: that member is as fresh as can be, and its age is zero.
func clampAges(st *daemon.Status) {
	for i := range st.Members {
		st.Members[i].AgeMilli = max(st.Members[i].AgeMilli, 0)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// age renders a heartbeat age: never below zero, milliseconds under a
// second, tenths of a second above.
func age(ms float64) string {
	d := time.Duration(ms * float64(time.Millisecond))
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func printStatus(w io.Writer, st daemon.Status, now time.Time) {
	fmt.Fprintf(w, "node %s, last pass %s", st.Node, st.LastPass.Format(time.RFC3339))
	if !st.LastPass.IsZero() {
		fmt.Fprintf(w, " (%s ago)", age(float64(now.Sub(st.LastPass))/float64(time.Millisecond)))
	}
	if st.PassError != "" {
		fmt.Fprintf(w, " (error: %s)", st.PassError)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tHEARD\tSTALE\tDRAINED\tHEARTBEAT AGE")
	for _, m := range st.Members {
		a := "never"
		if m.Heard {
			a = age(m.AgeMilli)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Node, yesNo(m.Heard), yesNo(m.Stale), yesNo(m.Drained), a)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", a.Address, a.Pool, cli.OrDash(a.DesiredHolder), a.Epoch, cli.OrDash(a.Holder), yesNo(a.HeldHere), cli.OrDash(prov))
	}
	tw.Flush()
}

func printRows(w io.Writer, rows []capture.Row) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no actions")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSEQ\tSTATE\tKIND\tPOOL\tADDRESS\tTARGET\tHOLDER\tEPOCH\tREASON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", shortID(r.IdempotencyKey, idLen), r.Seq, r.State, r.Kind,
			cli.OrDash(r.Key.Pool), r.Address, r.Target, cli.OrDash(r.Holder), r.Epoch, cli.OrDash(r.Reason))
	}
	tw.Flush()
}
