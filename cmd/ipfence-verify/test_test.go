package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/jepsen/capturesuite"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/lincheck"
	"github.com/ipfence/ipfence/verify/linear"
)

func TestTestUsage(t *testing.T) {
	store := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"test"}, "name the test to run first: capture, etcd"},
		{[]string{"test", "--seed", "3", "capture"}, "name the test to run first: capture, etcd"},
		{[]string{"test", "zookeeper"}, `unknown test "zookeeper"; the tests are: capture, etcd`},
		{[]string{"test", "capture", "extra"}, `unexpected argument "extra"`},
		{[]string{"test", "capture", "--net", "tunnel"}, `--net: "tunnel" is not proxy or netns`},
		{[]string{"test", "capture", "--nemesis", "pause,meteor", "--store", store}, `--nemesis: unknown fault "meteor"; valid: partition,pause,kill,clock,provider,wipe,corrupt,disk,hostile`},
		{[]string{"test", "capture", "--nodes", "1", "--store", store}, "--nodes must be from 2 to 9, not 1"},
		{[]string{"test", "capture", "--nodes", "0", "--store", store}, "--nodes must be from 2 to 9, not 0"},
		{[]string{"test", "capture", "--time-limit", "3s", "--store", store}, "--time-limit must be at least 10s"},
		{[]string{"test", "capture", "--concurrency", "-2", "--store", store}, "--concurrency must be from 1 to 1000, not -2"},
		{[]string{"test", "capture", "--seed", "x"}, `ipfence-verify test capture: --seed: "x" is not a whole number`},
		{[]string{"test", "capture", "--provider", "gcp"}, `--provider: "gcp" is not one of aws, azure, oci, cloud (another name for aws) or onprem`},
		{[]string{"test", "capture", "--provider", "onprem"}, "--provider onprem needs --net netns"},
		{[]string{"test", "capture", "--cloud-latency", "slow", "--store", store}, `ipfence-verify test: --cloud-latency: "slow" is not one of none, realistic`},
		{[]string{"test", "capture", "--provider", "azure", "--cloud-latency", "", "--store", store}, `ipfence-verify test: --cloud-latency: "" is not one of none, realistic`},
		{[]string{"test", "capture", "--provider", "onprem", "--net", "netns", "--cloud-latency", "realistic", "--store", store}, "--cloud-latency realistic: --provider onprem has no cloud simulator to pace"},
		{[]string{"test", "capture", "--epochs", "zookeeper", "--store", store}, `ipfence-verify test: --epochs: "zookeeper" is not one of federation, etcd`},
		{[]string{"test", "capture", "--epochs", "etcd", "--net", "netns", "--store", store}, "--epochs etcd: not built for --net netns in the cloud dialects yet"},
		{[]string{"test", "capture", "--epochs", "etcd", "--provider", "azure", "--net", "netns", "--store", store}, "--epochs etcd: not built for --net netns in the cloud dialects yet"},
		{[]string{"test", "capture", "--spare-etcd", "--store", store}, `ipfence-verify test: --spare-etcd: only with --epochs etcd (the line is federation)`},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(c.args...)
		if code != cli.ExitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 3 and %q", c.args, code, stderr, c.want)
		}
	}
	// Nothing was run: the store holds no run.
	if entries, _ := os.ReadDir(store); len(entries) != 0 {
		t.Errorf("a refused command left %d entries in the store", len(entries))
	}
}

// The main job, end to end through the binary, shortened: the summary, the
// exit status and the run's folder.
func TestTestCaptureRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 12 s capture test")
	}
	bin := binary(t)
	store := t.TempDir()
	cmd := exec.Command(bin, "test", "capture", "--time-limit", "12s", "--nemesis", "kill,pause", "--seed", "7", "--store", store)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"single holder   true", "fence           true    stale actions executed 0", "linearizable    true", "\nVALID  " + store + "/capture/"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// Not a terminal: log lines, no carriage returns.
	if strings.Contains(text, "\r") || !strings.Contains(text, "0s: ") {
		t.Errorf("progress output:\n%q", text)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(store, "capture", "latest"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Valid    any                       `json:"valid"`
		Seed     uint64                    `json:"seed"`
		Checkers map[string]map[string]any `json:"checkers"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Valid != true || res.Seed != 7 || len(res.Checkers) != 12 || res.Checkers["calls"]["counted"] != false || res.Checkers["damage"] == nil || res.Checkers["hostile"] == nil {
		t.Fatalf("results.json: %s", b)
	}
	cmdLine, _ := os.ReadFile(filepath.Join(dir, "command"))
	if got := strings.TrimSpace(string(cmdLine)); got != "ipfence-verify test capture --time-limit 12s --nemesis kill,pause --seed 7 --store "+store {
		t.Fatalf("command file %q", got)
	}
}

// --provider azure and --provider oci as a user types them, shortened:
// the nodes run the cloud's driver on the simulator's dialect, the run is
// valid under kills and the provider's faults, and with the gate off (the
// planted bug) the cloud refuses the stale actions itself.
func TestTestCaptureOnEachCloud(t *testing.T) {
	if testing.Short() {
		t.Skip("runs capture tests of 12 s and 20 s on each cloud")
	}
	bin := binary(t)
	for _, tc := range []struct{ cloud, nicPrefix string }{{"azure", "nic-n"}, {"oci", "ocid1.vnic.oc1.iad.n"}} {
		t.Run(tc.cloud, func(t *testing.T) {
			store := t.TempDir()
			out, err := exec.Command(bin, "test", "capture", "--provider", tc.cloud, "--time-limit", "12s", "--nemesis", "kill,provider", "--seed", "7", "--store", store).Output()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			text := string(out)
			for _, want := range []string{"single holder   true", "fence           true    stale actions executed 0", "linearizable    true", "calls           true    ", " writes per assign\n", "\nVALID  " + store + "/capture/"} {
				if !strings.Contains(text, want) {
					t.Errorf("output lacks %q:\n%s", want, text)
				}
			}
			dir, err := filepath.EvalSymlinks(filepath.Join(store, "capture", "latest"))
			if err != nil {
				t.Fatal(err)
			}
			if cfg, err := os.ReadFile(filepath.Join(dir, "n1.yaml")); err != nil || !strings.Contains(string(cfg), "type: "+tc.cloud+"\n") {
				t.Fatalf("n1.yaml: %v\n%s", err, cfg)
			}
			var ms []struct {
				NIC string `json:"nic"`
			}
			if b, err := os.ReadFile(filepath.Join(dir, "mutations.json")); err != nil || json.Unmarshal(b, &ms) != nil || len(ms) == 0 || !strings.HasPrefix(ms[0].NIC, tc.nicPrefix) {
				t.Fatalf("mutations.json: %v, %d entries, want the cloud's NICs (%s…)", err, len(ms), tc.nicPrefix)
			}

			// With the gate off the cloud itself refuses the zombies (the
			// epoch record in its tags, conditional writes): the fence line
			// counts them, and none executes on Azure. On OCI a stale create
			// of an address whose private IP was deleted can still execute
			// (the record went with it), so there the run may be INVALID;
			// jepsen/capturesuite's TestCaptureOCICatchesDisabledFence checks that
			// nothing else does, and TestCaptureCatchesCloudWallReverted that
			// without the wall both clouds are INVALID.
			cmd := exec.Command(bin, "test", "capture", "--provider", tc.cloud, "--unsafe-disable-fence", "--time-limit", "20s", "--nemesis", "none", "--seed", "1", "--store", store)
			out, err = cmd.Output()
			text = string(out)
			m := regexp.MustCompile(`fence +(true|false) +stale actions executed (\d+), refused by the cloud (\d+)`).FindStringSubmatch(text)
			if m == nil || m[3] == "0" {
				t.Fatalf("gate off: no stale action refused by the cloud (%v)\n%s", err, text)
			}
			var ee *exec.ExitError
			switch {
			case err == nil:
				if m[1] != "true" || m[2] != "0" || !strings.Contains(text, "\nVALID  "+store+"/capture/") {
					t.Errorf("gate off, exit 0: fence %s, %s executed\n%s", m[1], m[2], text)
				}
			case tc.cloud == "oci" && errors.As(err, &ee) && ee.ExitCode() == cli.ExitInvalid:
				t.Logf("oci, gate off: %s stale actions executed (creates of freed addresses), %s refused by the cloud", m[2], m[3])
			default:
				t.Fatalf("gate off: %v, fence %s, %s executed, %s refused by the cloud\n%s", err, m[1], m[2], m[3], text)
			}
		})
	}
}

// Ctrl-C in the middle of a fault: the harness heals, stops every process
// it started, checks what happened so far and says it was interrupted.
func TestTestCaptureInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the capture test")
	}
	bin := binary(t)
	store := t.TempDir()
	// Seed 2 pauses a node from 3 s to 7 s: the one the reads found
	// holding by then (n2 by the seed's draw before any read has). The
	// interrupt is sent once the
	// history shows the pause begun, not after a fixed delay: on a loaded
	// machine the cluster may take longer than 3 s to start.
	cmd := exec.Command(bin, "test", "capture", "--nemesis", "pause", "--seed", "2", "--store", store)
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	paused := false
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline) && !paused; time.Sleep(100 * time.Millisecond) {
		runs, _ := filepath.Glob(filepath.Join(store, "capture", "2*", "history.jsonl"))
		for _, r := range runs {
			if b, err := os.ReadFile(r); err == nil && strings.Contains(string(b), `"start-pause"`) {
				paused = true
			}
		}
	}
	if !paused {
		cmd.Process.Kill()
		t.Fatal("the pause never began within 90 s")
	}
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no exit within 90 s of SIGINT:\n%s", out.String())
	}
	// The verdict covers what happened in 5 s (stats may well find that
	// no drain succeeded yet); the run itself must not have failed.
	if code := cmd.ProcessState.ExitCode(); code == cli.ExitError || code < 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	for _, want := range []string{"single holder   true", "fence           true"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(out.String(), "(interrupted)") || !strings.Contains(out.String(), "interrupted: healing every fault") {
		t.Fatalf("output:\n%s", out.String())
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(store, "capture", "latest"))
	if err != nil {
		t.Fatal(err)
	}
	// No process of the run is left, paused or not.
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			t.Errorf("process %s is still running: %q", e.Name(), strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.Parse("history.jsonl", data, history.JSONL)
	if err != nil {
		t.Fatal(err)
	}
	var nem []string
	for _, e := range h.Events {
		if e.Process == history.Nemesis && e.Type == history.Info {
			nem = append(nem, e.F+" "+history.Show(e.Value))
		}
	}
	holder := "n2" // the seed's draw, when no read had found a holder
	for _, e := range h.Events {
		if e.Process == history.Nemesis && e.Type == history.Invoke && e.F == "start-pause" {
			break
		}
		if v, ok := e.Value.(map[string]any); ok && e.F == "read" && e.Type == history.OK {
			if h, _ := v["holder"].(string); h != "" {
				holder = strings.TrimPrefix(h, "eni-")
			}
		}
	}
	if want := `start-pause "` + holder + `"; teardown "healed"`; strings.Join(nem, "; ") != want {
		t.Fatalf("nemesis: %q, want %s (the holder the last read before the pause found)", nem, want)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "results.json"))
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil || res["interrupted"] != true {
		t.Fatalf("results.json: %v %s", err, b)
	}
}

func TestTestEtcdUsage(t *testing.T) {
	store := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"test", "etcd"}, "--workload is required: register or list-append or set"},
		{[]string{"test", "etcd", "--workload", "bank", "--store", store}, `--workload: "bank" is not one of register, list-append, set`},
		{[]string{"test", "etcd", "--workload", "register", "--nemesis", "clock", "--store", store}, `--nemesis: unknown fault "clock"; valid: partition,pause,kill,leader,member`},
		{[]string{"test", "etcd", "--workload", "register", "--nodes", "0", "--store", store}, "--nodes must be from 1 to 9, not 0"},
		{[]string{"test", "etcd", "--workload", "register", "--rate", "-5", "--store", store}, "--rate must be from 1 to 100000"},
		{[]string{"test", "etcd", "--workload", "register", "--time-limit", "2s", "--store", store}, "--time-limit must be at least 10s"},
		{[]string{"test", "etcd", "--workload", "register", "--etcd-binary", "/nonexistent/etcd", "--store", store}, "--etcd-binary /nonexistent/etcd"},
		{[]string{"test", "etcd", "--workload", "register", "extra"}, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(c.args...)
		if code != cli.ExitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 3 and %q", c.args, code, stderr, c.want)
		}
	}
	if entries, _ := os.ReadDir(store); len(entries) != 0 {
		t.Errorf("a refused command left %d entries in the store", len(entries))
	}
	// --help names the flags and says why clock faults are absent.
	code, stdout, _ := runCLI("test", "etcd", "--help")
	if code != cli.ExitValid || !strings.Contains(stdout, "--serializable-reads") || !strings.Contains(stdout, "Clock faults do not apply") {
		t.Errorf("help: exit %d\n%s", code, stdout)
	}
}

// A short etcd run through the binary: the summary, the exit status, the
// run's folder.
func TestTestEtcdRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 12 s etcd test")
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		testenv.Missing(t, "etcd (Debian package etcd-server)")
	}
	bin := binary(t)
	// A relative --store, as a user types it: the members run in the
	// run's folder, so every path they get must be absolute.
	work := t.TempDir()
	run := exec.Command(bin, "test", "etcd", "--workload", "register", "--time-limit", "12s", "--nemesis", "kill", "--seed", "5", "--store", "store")
	run.Dir = work
	out, err := run.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	store := filepath.Join(work, "store")
	for _, want := range []string{"  linearizable    true ", "\nVALID  " + store + "/etcd/"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	cmd, err := os.ReadFile(filepath.Join(store, "etcd", "latest", "command"))
	if err != nil || !strings.Contains(string(cmd), "ipfence-verify test etcd --workload register --time-limit 12s") {
		t.Errorf("command file: %v %q", err, cmd)
	}
	// The members' data is in the run's folder, not in a store nested
	// inside it.
	dir, err := filepath.EvalSymlinks(filepath.Join(store, "etcd", "latest"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "data", "n1", "member")); err != nil || !fi.IsDir() {
		t.Errorf("n1's data is not at %s/data/n1: %v", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "store")); !os.IsNotExist(err) {
		t.Errorf("a store nested in the run's folder: %v", err)
	}
}

// The README's main command as typed, on a fresh clone, with the default
// store: the store is the relative "store" in the clone, and the nodes run
// in their run's folder, so every path they are given must be absolute.
// Every other test passes an absolute temporary store. One flag is added,
// --time-limit 20s: on 2 cores under the race detector this package's
// end-to-end tests already take minutes of the 10-minute default test
// timeout, and `go run` in a fresh clone measured up to four minutes with
// the 60 s default; the 60 s schedule itself, seed 1, is run by the
// capture suite's TestCaptureDefaultIsValid, and nothing this test checks
// (paths, the store, the latest links, the verdict line, the exit status)
// depends on the run's length.
func TestMainCommandOnAFreshClone(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and runs a 20 s capture test")
	}
	testenv.Program(t, "git")
	root := testenv.RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		testenv.Missing(t, "a git checkout at %s to clone", root)
	}
	// The command is the README's, as typed.
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil || !strings.Contains(string(readme), "```sh\ngo run ./cmd/ipfence-verify test capture\n```") {
		t.Fatalf("the README's main command is not go run ./cmd/ipfence-verify test capture (%v)", err)
	}
	clone := filepath.Join(t.TempDir(), "ipfence")
	if out, err := exec.Command("git", "clone", "--quiet", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	run := exec.Command("go", "run", "./cmd/ipfence-verify", "test", "capture", "--time-limit", "20s")
	run.Dir = clone
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("go run ./cmd/ipfence-verify test capture --time-limit 20s: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	store := filepath.Join(clone, "store")
	text := string(out)
	i := strings.LastIndex(text, "\nVALID  ")
	if i < 0 {
		t.Fatalf("no VALID line:\n%s", text)
	}
	verdictDir := strings.TrimSpace(text[i+len("\nVALID  "):])
	if filepath.Dir(verdictDir) != filepath.Join(store, "capture") {
		t.Fatalf("the verdict names %s, not a run in %s", verdictDir, filepath.Join(store, "capture"))
	}
	for _, l := range []string{filepath.Join(store, "latest"), filepath.Join(store, "capture", "latest")} {
		got, err := filepath.EvalSymlinks(l)
		if err != nil {
			t.Fatal(err)
		}
		if got != verdictDir {
			t.Errorf("%s → %s, want the run the verdict names, %s", l, got, verdictDir)
		}
	}
	var res struct {
		Valid bool   `json:"valid"`
		Seed  uint64 `json:"seed"`
	}
	b, err := os.ReadFile(filepath.Join(verdictDir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil || !res.Valid || res.Seed != 1 {
		t.Fatalf("results.json: %v %s", err, b)
	}
	// The nodes read their configuration and kept their data where the
	// harness wrote it.
	for _, f := range []string{"n1.yaml", "data/n1", "logs/n1.log", "mutations.json", "timeline.html"} {
		if _, err := os.Stat(filepath.Join(verdictDir, f)); err != nil {
			t.Error(err)
		}
	}
}

// A failing run explains itself: for each false checker, its first
// findings in words, how many more there are, and the files to open.
func TestSummaryExplainsFailure(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"timeline.html", "linear.html"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stale := []string{
		"mutation 17 at 12.619s: unassign-secondary-ip 10.0.1.10 on eni-n2 at epoch 3, after epoch 4",
		"mutation 18 at 12.630s: unassign-secondary-ip 10.0.1.11 on eni-n2 at epoch 3, after epoch 4",
		"mutation 19 at 12.641s: unassign-secondary-ip 10.0.1.12 on eni-n2 at epoch 3, after epoch 4",
		"mutation 20 at 12.652s: unassign-secondary-ip 10.0.1.13 on eni-n2 at epoch 3, after epoch 4",
	}
	out := &harness.Outcome{Dir: dir, Verdict: linear.False, Ops: 2785, Duration: 60 * time.Second, Results: checker.Result{Valid: linear.False, Fields: map[string]any{
		"checkers": map[string]checker.Result{
			"single-holder": {Valid: linear.True, Fields: map[string]any{"dual_holder_ms": 0.0}},
			"fence": {Valid: linear.False, Fields: map[string]any{"stale_actions_executed": 8,
				"findings": stale, "findings_total": 8}},
			"availability": {Valid: linear.False, Fields: map[string]any{"no_holder_ms": 9281.0, "episodes": 1, "outside_faults_ms": 3900.0,
				"findings":       []string{"10.0.1.10 had no holder from 12.619s to 21.900s (9.281s: 3.9s outside fault windows); 201 reads found none, over the 10s bound"},
				"findings_total": 1}},
			"convergence": {Valid: linear.True, Fields: map[string]any{"convergence_s": 0.0}},
			"failover":    {Valid: linear.True, Fields: map[string]any{"failovers": 0}},
			"linear": {Valid: linear.False, Fields: map[string]any{"ops": 2668, "failure": &lincheck.Failure{
				Partition: "address 10.0.1.11", State: `held by "eni-n1" at epoch 3`,
				Op: lincheck.OpRef{Process: capturesuite.MutationProcess, Index: 540, Op: `unassign from "eni-n1" at epoch 2`}}}},
			"stats": {Valid: linear.True, Fields: map[string]any{}},
		}}}}
	var b strings.Builder
	printSummary(&b, out)
	want := `
2785 ops in 60.0s
  single holder   true    dual-holder time 0 ms
  fence           false   stale actions executed 8, refused by the cloud 0 (no conditional write)
  convergence     true    last move 0.0 s after the final heal
  failover        true    no failover observed
  availability    false   no holder 9281 ms in 1 period, 3900 ms outside fault windows
  linearizable    false   2668 ops, capture-owner model
  stats           true   

fence false:
  mutation 17 at 12.619s: unassign-secondary-ip 10.0.1.10 on eni-n2 at epoch 3, after epoch 4
  mutation 18 at 12.630s: unassign-secondary-ip 10.0.1.11 on eni-n2 at epoch 3, after epoch 4
  mutation 19 at 12.641s: unassign-secondary-ip 10.0.1.12 on eni-n2 at epoch 3, after epoch 4
  and 5 more
availability false:
  10.0.1.10 had no holder from 12.619s to 21.900s (9.281s: 3.9s outside fault windows); 201 reads found none, over the 10s bound
linear false:
  address 10.0.1.11: no order of the operations gets past op 540 (the provider): unassign from "eni-n1" at epoch 2, in state held by "eni-n1" at epoch 3
Open next: ` + dir + `/timeline.html, ` + dir + `/linear.html, ` + dir + `/results.json (every finding)

INVALID  ` + dir + "\n"
	if b.String() != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", b.String(), want)
	}
	// A valid run prints no findings.
	cs := out.Results.Fields["checkers"].(map[string]checker.Result)
	for _, n := range []string{"fence", "availability", "linear"} {
		r := cs[n]
		r.Valid = linear.True
		cs[n] = r
	}
	out.Verdict = linear.True
	b.Reset()
	printSummary(&b, out)
	if strings.Contains(b.String(), "Open next") || strings.Contains(b.String(), "false:") {
		t.Fatalf("valid summary:\n%s", b.String())
	}
	// A true availability checker still names its longest outage.
	cs["availability"].Fields["longest"] = "10.0.1.13 had no holder from 41.539s to 42.446s (907ms: 338ms outside fault windows); 8 reads found none"
	b.Reset()
	printSummary(&b, out)
	if !strings.Contains(b.String(), "availability    true    no holder 9281 ms in 1 period, 3900 ms outside fault windows\n                          longest: 10.0.1.13 had no holder from 41.539s") {
		t.Fatalf("valid summary:\n%s", b.String())
	}
	// --epochs etcd: the line token's counts.
	cs["line-token"] = checker.Result{Valid: linear.True, Fields: map[string]any{"tokened": 77, "node_mutations": 77, "checked": 77, "mismatches": 0, "regressions": 0}}
	b.Reset()
	printSummary(&b, out)
	if !strings.Contains(b.String(), "\n  line token      true    77 of 77 node mutations carried an etcd revision, 77 checked against etcd, 0 mismatches, 0 going down\n") {
		t.Fatalf("summary with the line token:\n%s", b.String())
	}
}

func TestConvergenceFindings(t *testing.T) {
	r := checker.Result{Valid: linear.False, Fields: map[string]any{
		"desired": map[string]string{"10.0.1.10": "n1", "10.0.1.11": "n2", "10.0.1.12": "n3"},
		"actual":  map[string]string{"10.0.1.11": "n2", "10.0.1.12": "n1"}, "waited_after_run_s": 30.11}}
	lines, total, file := findings("convergence", r)
	want := []string{
		"10.0.1.10: the nodes want it on n1, the provider shows it on no NIC, 30.1 s after the run",
		"10.0.1.12: the nodes want it on n3, the provider shows it on n1's NIC, 30.1 s after the run",
	}
	if !slices.Equal(lines, want) || total != 2 || file != "timeline.html" {
		t.Fatalf("%q %d %s", lines, total, file)
	}
}
