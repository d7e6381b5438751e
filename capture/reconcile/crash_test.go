package reconcile_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/policy"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/memory"
	"github.com/ipfence/ipfence/capture/reconcile"
	"github.com/ipfence/ipfence/capture/store"
)

// TestMain lets the test binary run as the crash test's child: a node's
// reconcile/execute loop, killed with SIGKILL by the parent.
func TestMain(m *testing.M) {
	if os.Getenv("IPFENCE_CRASH_CHILD") == "1" {
		crashChild()
		return
	}
	os.Exit(m.Run())
}

// crashChild runs node a's loop forever against the parent's provider,
// reading the pools from a file the parent rewrites between runs.
func crashChild() {
	st, err := store.Open(os.Getenv("IPFENCE_STATE"), store.Options{RetryAfter: 50 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pools := func() []capture.Pool {
		var ps []capture.Pool
		b, err := os.ReadFile(os.Getenv("IPFENCE_CONFIG"))
		if err == nil {
			err = json.Unmarshal(b, &ps)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return ps
	}
	loop := reconcile.New(reconcile.Config{
		Node: "a", Store: st, Pools: pools,
		Providers: map[string]provider.Provider{"aws": &memory.Client{BaseURL: os.Getenv("IPFENCE_PROVIDER")}},
		Policy:    policy.AllowAll(1000), Execute: true,
		RunningTimeout: 100 * time.Millisecond, Interval: time.Millisecond,
		OnPass: func(reconcile.Report, error) {
			if os.Getenv("IPFENCE_CRASH_PASSES") == "1" {
				fmt.Println("pass")
			}
		},
	})
	fmt.Println("ready")
	loop.Run(context.Background())
}

// effect is what a mutation did, apart from when.
type effect struct {
	call    capture.Kind
	nic     string
	address netip.Addr
	enabled bool
}

// The node's loop is killed with SIGKILL at random points, hundreds of
// times, and restarted. After every restart: no epoch went down, no
// imported intent was lost, no idempotency key reached the provider twice
// with different effects, and no mutation carried an epoch lower than one
// already applied for its key. At the end the loop settles on the desired
// state.
func TestCrashSafetySIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: it restarts a process hundreds of times")
	}
	kills := 200
	if s := os.Getenv("IPFENCE_CRASH_KILLS"); s != "" {
		kills, _ = strconv.Atoi(s)
	}
	cloud := memory.New(memory.Options{NICs: []string{"eni-a", "eni-b"}})
	srv := httptest.NewServer(memory.Handler(cloud))
	defer srv.Close()
	dir := t.TempDir()
	statePath := filepath.Join(dir, "a.db")
	configPath := filepath.Join(dir, "pools.json")
	var addrs []netip.Addr
	for i := range 5 {
		addrs = append(addrs, netip.MustParseAddr(fmt.Sprintf("10.0.0.%d", 10+i)))
	}
	writeConfig := func(drained bool) {
		pools := []capture.Pool{{
			Name: "web", Provider: "aws", Group: "g1", Addresses: addrs,
			Members: []capture.Member{{Node: "a", Priority: 1, Target: "eni-a", Drained: drained}},
		}}
		b, _ := json.Marshal(pools)
		tmp := configPath + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, configPath); err != nil {
			t.Fatal(err)
		}
	}
	// start starts the child; with passes, it prints a line after every
	// pass, which the caller must read.
	start := func(passes bool) (*exec.Cmd, *bufio.Reader, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "IPFENCE_CRASH_CHILD=1", "IPFENCE_STATE="+statePath,
			"IPFENCE_CONFIG="+configPath, "IPFENCE_PROVIDER="+srv.URL)
		if passes {
			cmd.Env = append(cmd.Env, "IPFENCE_CRASH_PASSES=1")
		}
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		rd := bufio.NewReader(out)
		line, err := rd.ReadString('\n')
		if err != nil || line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, nil, fmt.Errorf("child did not start: %q %v", line, err)
		}
		return cmd, rd, nil
	}

	r := rand.New(rand.NewPCG(20261130, 1))
	maxEpoch := map[capture.Key]capture.Epoch{}
	imported := map[string]bool{}
	effects := map[string]effect{}
	checked := 0 // mutations already checked
	high := map[netip.Addr]capture.Epoch{}
	drained := false
	writeConfig(drained)

	check := func(round int) {
		st, err := store.Open(statePath, store.Options{})
		if err != nil {
			t.Fatalf("round %d: reopening the state: %v", round, err)
		}
		defer st.Close()
		ep, err := st.Epochs()
		if err != nil {
			t.Fatal(err)
		}
		for k, rec := range ep {
			if rec.Epoch < maxEpoch[k] {
				t.Fatalf("round %d: epoch of %s went down from %d to %d", round, k, maxEpoch[k], rec.Epoch)
			}
			maxEpoch[k] = rec.Epoch
		}
		rows, err := st.Rows(store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		present := map[string]bool{}
		for _, row := range rows {
			present[row.IdempotencyKey] = true
		}
		for k := range imported {
			if !present[k] {
				t.Fatalf("round %d: imported row %s was lost", round, k)
			}
		}
		for k := range present {
			imported[k] = true
		}
		ms := cloud.Mutations()
		for i, m := range ms[checked:] {
			e := effect{m.Call, m.NIC, m.Address, m.Enabled}
			if prev, ok := effects[m.IdempotencyKey]; ok && prev != e {
				t.Fatalf("round %d: key %s reached the provider twice with different effects: %+v then %+v", round, m.IdempotencyKey, prev, e)
			}
			effects[m.IdempotencyKey] = e
			if m.Epoch < high[m.Address] {
				t.Fatalf("round %d: mutation %d carries epoch %d after %d for %s", round, checked+i, m.Epoch, high[m.Address], m.Address)
			}
			high[m.Address] = m.Epoch
		}
		checked = len(ms)
	}

	// The kill lands at a random moment in a window of 15 ms after the
	// start. On a loaded machine (a race-detector suite beside a CPU hog)
	// a process may never get as far as the provider in 15 ms, and then
	// the kills test nothing: the window doubles after every round in
	// which no mutation has reached the provider yet, up to 500 ms, so the
	// kills land in the middle of the work whatever the machine's speed.
	window := 15 * time.Millisecond
	for round := range kills {
		if r.IntN(3) == 0 {
			drained = !drained
			writeConfig(drained)
		}
		cmd, _, err := start(false)
		if err != nil {
			t.Fatal(err)
		}
		if len(effects) == 0 && round > 0 {
			window = min(2*window, 500*time.Millisecond)
		}
		time.Sleep(time.Duration(r.Int64N(int64(window))))
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		check(round)
	}

	// Settle: the loop, left alone, brings the provider to the desired
	// state, and finishes every row.
	cmd, out, err := start(true)
	if err != nil {
		t.Fatal(err)
	}
	var passes atomic.Int64
	go func() {
		for {
			if _, err := out.ReadString('\n'); err != nil {
				return
			}
			passes.Add(1)
		}
	}()
	want := "eni-a"
	if drained {
		want = ""
	}
	deadline := time.Now().Add(30 * time.Second)
	settled := func() bool {
		for _, a := range addrs {
			if cloud.Holder(a) != want {
				return false
			}
		}
		return cloud.Forwarding("eni-a") == !drained
	}
	for !settled() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// Let the pass in flight finish its bookkeeping, and a whole pass
	// after it, begun with the provider settled; then stop.
	deadline = time.Now().Add(30 * time.Second)
	for seen := passes.Load(); passes.Load() < seen+2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			t.Fatalf("the loop did not complete two passes in 30 s once the provider was settled (%d passes in all)", passes.Load())
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	check(kills)
	if !settled() {
		t.Fatalf("after %d kills the provider did not settle on %q", kills, want)
	}
	if len(effects) == 0 {
		t.Fatal("no mutation ever reached the provider: the kills came too early to test anything")
	}
	t.Logf("%d kills, %d distinct idempotency keys applied, %d mutations, %d rows", kills, len(effects), checked, len(imported))
}
