package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/memory"
)

func TestFaultsLatencyAndDraw(t *testing.T) {
	f := Faults{
		Latency:       Duration(100 * time.Millisecond),
		ActionLatency: map[string]Duration{actAssign: 0, actDescribe: Duration(time.Second)},
		Errors: map[string][]ErrorRate{
			actAssign: {{Code: CodeThrottled, Rate: 0.25}, {Code: CodeInternal, Rate: 0.5}},
			AnyAction: {{Code: CodeUnavailable, Rate: 1}},
		},
	}
	for action, want := range map[string]time.Duration{actAssign: 0, actDescribe: time.Second, actUnassign: 100 * time.Millisecond} {
		if got := f.latency(action); got != want {
			t.Errorf("latency(%s) = %v, want %v", action, got, want)
		}
	}
	// The draw splits [0,1) in the order of the rates: [0,0.25) throttles,
	// [0.25,0.75) fails internally, the rest passes.
	for x, want := range map[float64]string{0: CodeThrottled, 0.2499: CodeThrottled, 0.25: CodeInternal, 0.7499: CodeInternal, 0.75: "", 0.99: ""} {
		if got := f.draw(actAssign, rand1(x)); got != want {
			t.Errorf("draw(%s) at %v = %q, want %q", actAssign, x, got, want)
		}
	}
	if got := f.draw(actModify, rand1(0.999)); got != CodeUnavailable {
		t.Errorf("draw(%s) = %q, want %s from %q", actModify, got, CodeUnavailable, AnyAction)
	}
	if got := (Faults{}).draw(actModify, nil); got != "" {
		t.Errorf("no rates: draw = %q, want none (and no number drawn)", got)
	}
}

func TestFaultsValidate(t *testing.T) {
	cases := []struct {
		f    Faults
		want string
	}{
		{Faults{Latency: -1}, "latency: -1ns is negative"},
		{Faults{RemapDelay: -1}, "remapDelay: -1ns is negative"},
		{Faults{ActionLatency: map[string]Duration{"RunInstances": 1}}, `actionLatency: "RunInstances" is not an action the simulator serves`},
		{Faults{ActionLatency: map[string]Duration{actAssign: -1}}, "actionLatency[AssignPrivateIpAddresses]: -1ns is negative"},
		{Faults{Errors: map[string][]ErrorRate{"RunInstances": nil}}, `errors: "RunInstances" is neither "*" nor an action`},
		{Faults{Errors: map[string][]ErrorRate{actAssign: {{Code: "Throttling", Rate: 0.1}}}}, `errors[AssignPrivateIpAddresses][0].code: "Throttling" is not one of RequestLimitExceeded, InternalError, Unavailable`},
		{Faults{Errors: map[string][]ErrorRate{AnyAction: {{Code: CodeInternal, Rate: 1.5}}}}, "errors[*][0].rate: 1.5 is not between 0 and 1"},
		{Faults{Errors: map[string][]ErrorRate{AnyAction: {{Code: CodeInternal, Rate: 0.6}, {Code: CodeThrottled, Rate: 0.6}}}}, "errors[*]: the rates add up to 1.2, more than 1"},
	}
	for _, tc := range cases {
		if err := tc.f.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("validate(%+v) = %v, want %q", tc.f, err, tc.want)
		}
	}
	ok := Faults{Errors: map[string][]ErrorRate{AnyAction: {{Code: CodeInternal, Rate: 0.1}, {Code: CodeThrottled, Rate: 0.2}, {Code: CodeUnavailable, Rate: 0.7}}}}
	if err := ok.validate(); err != nil {
		t.Errorf("rates adding up to 1 = %v, want nil", err)
	}
}

// rand1 is a source whose first Float64 is x.
func rand1(x float64) *randFloat { return &randFloat{x} }

type randFloat struct{ x float64 }

func (r *randFloat) Float64() float64 { return r.x }

// outcomes makes one assign per address to eni-a, each followed by a
// Describe (which draws nothing), and renders each assign's outcome: ok or
// the injected code.
func (e *env) outcomes(first, n int) []string {
	e.t.Helper()
	var out []string
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, 0, 0, byte(first + i)})
		err := e.assign("eni-a", false, a)
		var api smithy.APIError
		switch {
		case err == nil:
			out = append(out, "ok")
		case errors.As(err, &api):
			out = append(out, api.ErrorCode())
		default:
			e.t.Fatal(err)
		}
		if _, err := e.ec2.DescribeNetworkInterfaces(e.t.Context(), &ec2.DescribeNetworkInterfacesInput{}); err != nil {
			e.t.Fatalf("Describe, which has no error rate: %v", err)
		}
	}
	return out
}

func TestErrorRates(t *testing.T) {
	e := newEnv(t, Config{Seed: 1})
	faults := Faults{Errors: map[string][]ErrorRate{actAssign: {{Code: CodeThrottled, Rate: 0.3}, {Code: CodeInternal, Rate: 0.2}}}}
	adminDo(t, e.srv.URL, http.MethodPut, "/admin/faults", faults, nil)
	got := e.outcomes(10, 16)
	// Which calls fail is a function of the seed and the calls: this is
	// the sequence for seed 1.
	want := strings.Fields(seed1Outcomes)
	if !slices.Equal(got, want) {
		t.Fatalf("outcomes with seed 1 = %q, want %q", got, want)
	}
	// A failed call changed nothing: eni-a holds exactly the addresses
	// of the calls that succeeded.
	var held []string
	for i, o := range got {
		if o == "ok" {
			held = append(held, fmt.Sprintf("10.0.0.%d", 10+i))
		}
	}
	if p := placement(e.s)[0]; p != "eni-a:"+strings.Join(held, ",")+" check=true" {
		t.Fatalf("eni-a = %q, want exactly %v", p, held)
	}
	if n := len(e.s.Mutations()); n != len(held) {
		t.Fatalf("%d mutations, want %d", n, len(held))
	}

	// Setting the faults again starts the numbers again from the seed.
	adminDo(t, e.srv.URL, http.MethodPut, "/admin/faults", faults, nil)
	if again := e.outcomes(40, 16); !slices.Equal(again, want) {
		t.Fatalf("outcomes after setting the faults again = %q, want %q", again, want)
	}
	// Another seed, another sequence.
	other := newEnv(t, Config{Seed: 2})
	adminDo(t, other.srv.URL, http.MethodPut, "/admin/faults", faults, nil)
	if o := other.outcomes(10, 16); slices.Equal(o, want) {
		t.Fatalf("seed 2 gives seed 1's outcomes %q", o)
	}

	// The statuses of each injected code, and AnyAction.
	for code, status := range map[string]int{CodeThrottled: 503, CodeInternal: 500, CodeUnavailable: 503} {
		adminDo(t, e.srv.URL, http.MethodPut, "/admin/faults", Faults{Errors: map[string][]ErrorRate{AnyAction: {{Code: code, Rate: 1}}}}, nil)
		_, err := e.ec2.DescribeNetworkInterfaceAttribute(t.Context(), &ec2.DescribeNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String("eni-a"), Attribute: types.NetworkInterfaceAttributeSourceDestCheck,
		})
		expectAPIError(t, err, status, code, injectedError(code).message)
	}
	adminDo(t, e.srv.URL, http.MethodPost, "/admin/reset", nil, nil)
	if err := e.assign("eni-a", false, ip9); err != nil {
		t.Fatalf("assign after reset = %v", err)
	}
}

// seed1Outcomes is what TestErrorRates's sixteen assigns get with seed 1
// (the first numbers drawn are 0.238, 0.501, 0.050, 0.489, 0.750, …: below
// 0.3 throttles, 0.3 to 0.5 fails internally, 0.5 and above passes).
const seed1Outcomes = `
	RequestLimitExceeded ok RequestLimitExceeded InternalError
	ok ok RequestLimitExceeded RequestLimitExceeded
	ok RequestLimitExceeded RequestLimitExceeded InternalError
	InternalError RequestLimitExceeded InternalError RequestLimitExceeded`

func TestLatency(t *testing.T) {
	e := newEnv(t, Config{Clock: time.Now})
	adminDo(t, e.srv.URL, http.MethodPut, "/admin/faults", Faults{
		Latency:       Duration(150 * time.Millisecond),
		ActionLatency: map[string]Duration{actAssign: Duration(300 * time.Millisecond), actDescribe: 0},
	}, nil)
	start := time.Now()
	if err := e.unassign("eni-a", ip7); err == nil {
		t.Fatal("unassign of a free address succeeded")
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("unassign answered after %v, want the default latency 150ms first", d)
	}

	// From here the test ends each latency by hand, so that it knows a
	// call is waiting out its latency, however slow the machine.
	waits := handTimers(e.s)

	// The latency comes before the change: while the assign waits, the
	// address is not placed.
	done := make(chan error, 1)
	go func() { done <- e.assign("eni-a", false, ip7) }()
	w := nextWait(t, waits)
	if w.d != 300*time.Millisecond {
		t.Fatalf("assign waits %v, want its action's latency 300ms", w.d)
	}
	if p := placement(e.s)[0]; p != "eni-a: check=true" {
		t.Fatalf("while the assign waits out its latency eni-a = %q, want nothing yet", p)
	}
	w.fire <- time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := placement(e.s)[0]; p != "eni-a:10.0.0.7 check=true" {
		t.Fatalf("after the assign eni-a = %q", p)
	}

	// A caller that gives up during the latency changes nothing, ever.
	before := fingerprint(t, e.s)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		_, err := e.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
			NetworkInterfaceId: aws.String("eni-b"), PrivateIpAddresses: []string{"10.0.0.8"},
		})
		done <- err
	}()
	w = nextWait(t, waits)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("assign given up during its latency = %v, want the cancellation", err)
	}
	select {
	case <-w.stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the simulator never noticed that the caller of the waiting assign gave up")
	}
	// The latency ends too, and the server finishes every call (Close
	// waits for them): still nothing changed.
	w.fire <- time.Now()
	e.srv.Close()
	if after := fingerprint(t, e.s); after != before {
		t.Fatalf("an abandoned call changed the simulator:\n%s\n%s", before, after)
	}
}

func TestAsyncRemap(t *testing.T) {
	e := newEnv(t, Config{})
	adminDo(t, e.srv.URL, http.MethodPut, "/admin/faults", map[string]any{"remapDelay": "5s"}, nil)
	if _, err := e.ec2.AssignPrivateIpAddresses(t.Context(), &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String("eni-a"), PrivateIpAddresses: []string{"10.0.0.7"},
	}, headers("2", "k2")); err != nil {
		t.Fatalf("assign = %v", err)
	}
	e.clock.Advance(time.Second)
	if _, err := e.ec2.ModifyNetworkInterfaceAttribute(t.Context(), &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String("eni-a"), SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(false)},
	}, headers("2", "k2f")); err != nil {
		t.Fatalf("modify = %v", err)
	}
	describe := func() []string {
		t.Helper()
		out, err := e.ec2.DescribeNetworkInterfaces(t.Context(), &ec2.DescribeNetworkInterfacesInput{
			Filters: []types.Filter{{Name: aws.String("addresses.private-ip-address"), Values: []string{"10.0.0.7"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return nicIDsOf(out.NetworkInterfaces)
	}
	if got := describe(); len(got) != 0 {
		t.Fatalf("right after the assign, 10.0.0.7 is on %v, want nowhere yet", got)
	}
	var st State
	adminDo(t, e.srv.URL, http.MethodGet, "/admin/state", nil, &st)
	wantPending := []memory.Queued{
		{At: t0.Add(5 * time.Second), Call: capture.Assign, NIC: "eni-a", Address: ip7, Epoch: 2, IdempotencyKey: "k2"},
		{At: t0.Add(6 * time.Second), Call: capture.EnableForwarding, NIC: "eni-a", Epoch: 2, IdempotencyKey: "k2f"},
	}
	if len(st.Pending) != 2 || !st.Pending[0].At.Equal(wantPending[0].At) || !st.Pending[1].At.Equal(wantPending[1].At) ||
		st.Pending[0].IdempotencyKey != "k2" || st.Pending[1].Call != capture.EnableForwarding || len(e.s.Mutations()) != 0 {
		t.Fatalf("pending = %+v, want %+v and no mutation yet", st.Pending, wantPending)
	}

	e.clock.Advance(3999 * time.Millisecond) // t0+4.999s
	if got := describe(); len(got) != 0 {
		t.Fatalf("1ms before the apply time 10.0.0.7 is on %v", got)
	}
	e.clock.Advance(time.Millisecond) // t0+5s
	if got := describe(); !slices.Equal(got, []string{"eni-a"}) {
		t.Fatalf("at the apply time 10.0.0.7 is on %v, want eni-a", got)
	}
	if got := placement(e.s)[0]; got != "eni-a:10.0.0.7 check=true" {
		t.Fatalf("eni-a = %q: its check turns off at +6s", got)
	}
	// Flush makes the rest visible now, stamped with the present.
	e.clock.Advance(500 * time.Millisecond)
	adminDo(t, e.srv.URL, http.MethodPost, "/admin/flush", nil, &st)
	if len(st.Pending) != 0 || st.NICs[0].SourceDestCheck {
		t.Fatalf("after flush: %+v, want nothing pending and eni-a's check off", st)
	}
	want := []provider.Mutation{
		{Time: t0.Add(5 * time.Second), Call: capture.Assign, NIC: "eni-a", Address: ip7, Epoch: 2, IdempotencyKey: "k2"},
		{Time: t0.Add(5500 * time.Millisecond), Call: capture.EnableForwarding, NIC: "eni-a", Epoch: 2, IdempotencyKey: "k2f", Enabled: true},
	}
	if got := e.s.Mutations(); !slices.Equal(got, want) {
		t.Fatalf("mutations = %+v, want %+v", got, want)
	}
}

func TestPauseResume(t *testing.T) {
	e := newEnv(t, Config{})
	var st State
	adminDo(t, e.srv.URL, http.MethodPost, "/admin/pause", nil, &st)
	if !st.Paused {
		t.Fatal("state after pause: not paused")
	}
	done := make(chan error, 1)
	go func() { done <- e.assign("eni-a", false, ip7) }()
	e.waitFor(1)
	select {
	case err := <-done:
		t.Fatalf("an assign finished while paused: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	// The admin API stays up, and nothing has changed.
	adminDo(t, e.srv.URL, http.MethodGet, "/admin/state", nil, &st)
	if !st.Paused || st.Waiting != 1 || len(st.NICs[0].SecondaryIPs) != 0 {
		t.Fatalf("state while paused = %+v, want paused, one call waiting, nothing placed", st)
	}
	// A caller that gives up while paused changes nothing.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := func() error {
		_, err := e.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
			NetworkInterfaceId: aws.String("eni-b"), PrivateIpAddresses: []string{"10.0.0.8"},
		})
		return err
	}(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("assign with a deadline while paused = %v, want the deadline", err)
	}
	// Once the simulator has noticed that the caller left, only the
	// first call waits.
	e.waitFor(1)

	adminDo(t, e.srv.URL, http.MethodPost, "/admin/resume", nil, &st)
	if err := <-done; err != nil {
		t.Fatalf("the paused assign after resume = %v", err)
	}
	if got, want := placement(e.s), []string{"eni-a:10.0.0.7 check=true", "eni-b: check=true", "eni-c: check=true"}; !slices.Equal(got, want) {
		t.Fatalf("placement = %q, want %q (the abandoned assign to eni-b never applied)", got, want)
	}

	// Reset resumes too, and clears the faults.
	adminDo(t, e.srv.URL, http.MethodPut, "/admin/faults", Faults{Latency: Duration(time.Hour)}, nil)
	adminDo(t, e.srv.URL, http.MethodPost, "/admin/pause", nil, nil)
	adminDo(t, e.srv.URL, http.MethodPost, "/admin/reset", nil, &st)
	if st.Paused || st.Faults.Latency != 0 {
		t.Fatalf("state after reset = %+v, want running without faults", st)
	}
	if err := e.assign("eni-a", false, ip8); err != nil {
		t.Fatalf("assign after reset = %v", err)
	}
}

// waitFor waits until n Query API calls are held by the pause.
func (e *env) waitFor(n int) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.s.State().Waiting != n {
		if time.Now().After(deadline) {
			e.t.Fatalf("%d calls waiting after 10s, want %d", e.s.State().Waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAdminFaultsAPI(t *testing.T) {
	e := newEnv(t, Config{})
	put := `{"latency":"20ms","actionLatency":{"AssignPrivateIpAddresses":"1s"},` +
		`"errors":{"*":[{"code":"Unavailable","rate":0.5}]},"remapDelay":"3s"}`
	var got Faults
	adminDo(t, e.srv.URL, http.MethodPut, "/admin/faults", put, &got)
	adminDo(t, e.srv.URL, http.MethodGet, "/admin/faults", nil, &got)
	want := Faults{
		Latency: Duration(20 * time.Millisecond), ActionLatency: map[string]Duration{actAssign: Duration(time.Second)},
		Errors: map[string][]ErrorRate{AnyAction: {{Code: CodeUnavailable, Rate: 0.5}}}, RemapDelay: Duration(3 * time.Second),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("GET /admin/faults = %+v, want %+v", got, want)
	}
	for body, msg := range map[string]string{
		`{"latency":"5 parsecs"}`:                                `duration \"5 parsecs\": want a number with a unit`,
		`{"latencyy":"5s"}`:                                      `faults: json: unknown field \"latencyy\"`,
		`{"errors":{"RunInstances":[]}}`:                         `errors: \"RunInstances\" is neither`,
		`{"errors":{"*":[{"code":"InternalError","rate":2}]}}`:   "errors[*][0].rate: 2 is not between 0 and 1",
		`{"remapDelay":"-1s"}`:                                   "remapDelay: -1s is negative",
		`{} {}`:                                                  "trailing data",
		`{"actionLatency":{"DescribeNetworkInterfaces":"-5ms"}}`: "actionLatency[DescribeNetworkInterfaces]: -5ms is negative",
		`{"errors":{"*":[{"code":"RequestLimitExceeded","rate":-0}, {"code":"Boom","rate":0}]}}`: `errors[*][1].code: \"Boom\"`,
	} {
		status, raw := adminRaw(t, e.srv.URL, http.MethodPut, "/admin/faults", body)
		if status != http.StatusBadRequest || !strings.Contains(raw, msg) {
			t.Errorf("PUT /admin/faults %s = %d %s, want 400 with %q", body, status, raw, msg)
		}
	}
	adminDo(t, e.srv.URL, http.MethodGet, "/admin/faults", nil, &got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("refused PUTs changed the faults to %+v", got)
	}
	if status, _ := adminRaw(t, e.srv.URL, http.MethodGet, "/admin/pause", nil); status != http.StatusMethodNotAllowed {
		t.Fatalf("GET /admin/pause = %d, want 405", status)
	}
}

// TestEndedContextAnswersUnavailable: a call whose context ends while it is
// held by a pause or a latency (the server shutting down) is answered 503
// Unavailable and changes nothing, never with an empty 200 that an SDK
// would read as success.
func TestEndedContextAnswersUnavailable(t *testing.T) {
	for _, hold := range []string{"pause", "latency"} {
		t.Run(hold, func(t *testing.T) {
			e := newEnv(t, Config{})
			if hold == "pause" {
				if err := e.s.Pause(); err != nil {
					t.Fatal(err)
				}
			} else if err := e.s.SetFaults(Faults{Latency: Duration(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			before := fingerprint(t, e.s)
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/",
				strings.NewReader("Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-a&PrivateIpAddress.1=10.0.0.7"))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Signature=0")
			w := httptest.NewRecorder()
			e.s.ServeHTTP(w, r)
			if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "<Code>Unavailable</Code>") {
				t.Fatalf("answer = %d %s, want 503 Unavailable", w.Code, w.Body.String())
			}
			if after := fingerprint(t, e.s); after != before {
				t.Fatalf("the call changed the simulator:\n%s\n%s", before, after)
			}
		})
	}
}
