package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ipfence/ipfence/internal/cli"
)

func TestCloudsimBadFlags(t *testing.T) {
	corrupt := t.TempDir()
	if err := os.WriteFile(filepath.Join(corrupt, "cloudsim.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no NICs", []string{}, "ipfence-verify cloudsim: --nics: cloudsim: no NICs"},
		{"empty NIC id", []string{"--nics", "eni-a,,eni-b"}, "--nics: cloudsim: empty NIC id"},
		{"NIC twice", []string{"--nics", "eni-a,eni-a"}, `--nics: cloudsim: NIC id "eni-a" appears twice`},
		{"subnet not a prefix", []string{"--nics", "eni-a", "--subnet", "10.0.0.0"}, `--subnet: "10.0.0.0" is not a prefix such as 10.0.0.0/24`},
		{"subnet not a network", []string{"--nics", "eni-a", "--subnet", "10.0.0.9/24"}, "--subnet: cloudsim: subnet 10.0.0.9/24 is not a network address"},
		{"bad listen address", []string{"--nics", "eni-a", "--listen", "127.0.0.1:99999"}, "--listen: listen tcp: address 99999: invalid port"},
		{"bad seed", []string{"--nics", "eni-a", "--seed", "-1"}, "--seed: -1 is negative"},
		{"unknown flag", []string{"--nics", "eni-a", "--bogus"}, "--bogus: no such flag"},
		{"positional argument", []string{"--nics", "eni-a", "extra"}, `ipfence-verify cloudsim: unexpected argument "extra"`},
		{"unknown latency", []string{"--nics", "eni-a", "--latency", "fast"}, `ipfence-verify cloudsim: --latency: "fast" is not none or realistic`},
		{"empty latency", []string{"--nics", "eni-a", "--latency", ""}, `ipfence-verify cloudsim: --latency: "" is not none or realistic`},
		{"corrupt state file", []string{"--state", corrupt}, "--state: cloudsim: state file " + filepath.Join(corrupt, "cloudsim.json") + ": not a cloudsim state file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(append([]string{"cloudsim"}, tc.args...)...)
			if code != cli.ExitError || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 3 and %q", code, stdout, stderr, tc.want)
			}
		})
	}
	if code, stdout, _ := runCLI("cloudsim", "--help"); code != cli.ExitValid || !strings.Contains(stdout, "--nics string") {
		t.Fatalf("--help: exit %d, %q", code, stdout)
	}
}

// sim is a running cloudsim process.
type sim struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	stdout *bufio.Reader
	stderr strings.Builder
	ec2    *ec2.Client
}

// startSim starts the binary and waits for its ready line.
func startSim(t *testing.T, bin string, args ...string) *sim {
	t.Helper()
	// These tests check the API, not its pace: the simulator answers at
	// once (TestCloudsimLatency checks the default, realistic).
	s := &sim{t: t, cmd: exec.Command(bin, append([]string{"cloudsim", "--listen", "127.0.0.1:0", "--log-level", "info", "--latency", "none"}, args...)...)}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	s.stdout = bufio.NewReader(out)
	line := make(chan string, 1)
	go func() {
		l, _ := s.stdout.ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		url, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), "listening on ")
		if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Fatalf("first line %q, want listening on http://127.0.0.1:PORT", l)
		}
		s.url = url
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line after 30s")
	}
	s.ec2 = ec2.NewFromConfig(aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		RetryMaxAttempts: 1,
	}, func(o *ec2.Options) { o.BaseEndpoint = aws.String(s.url) })
	return s
}

// stop sends SIGTERM and returns the exit code and what else the process
// printed on stdout.
func (s *sim) stop() (int, string) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	rest, _ := io.ReadAll(s.stdout)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			s.t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		s.t.Fatalf("still running 20s after SIGTERM; stderr:\n%s", s.stderr.String())
	}
	return s.cmd.ProcessState.ExitCode(), string(rest)
}

func (s *sim) secondaries(nic string) []string {
	s.t.Helper()
	out, err := s.ec2.DescribeNetworkInterfaces(s.t.Context(), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{nic}})
	if err != nil {
		s.t.Fatalf("DescribeNetworkInterfaces: %v", err)
	}
	var ips []string
	for _, p := range out.NetworkInterfaces[0].PrivateIpAddresses {
		if !aws.ToBool(p.Primary) {
			ips = append(ips, aws.ToString(p.PrivateIpAddress))
		}
	}
	return ips
}

func TestCloudsimEndToEnd(t *testing.T) {
	bin := binary(t)
	state := t.TempDir()
	s := startSim(t, bin, "--nics", "eni-a,eni-b,eni-c", "--state", state, "--seed", "3")

	_, err := s.ec2.AssignPrivateIpAddresses(t.Context(), &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String("eni-b"), PrivateIpAddresses: []string{"10.0.0.7"}, AllowReassignment: aws.Bool(true),
	}, func(o *ec2.Options) {
		o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue("X-Ipfence-Epoch", "12"),
			smithyhttp.AddHeaderValue("X-Ipfence-Idempotency-Key", "p:aws:eni-b:assign-secondary-ip:10.0.0.7:epoch:12"))
	})
	if err != nil {
		t.Fatalf("assign through the binary: %v", err)
	}
	if got := s.secondaries("eni-b"); len(got) != 1 || got[0] != "10.0.0.7" {
		t.Fatalf("eni-b holds %v, want [10.0.0.7]", got)
	}
	resp, err := http.Get(s.url + "/admin/mutations")
	if err != nil {
		t.Fatal(err)
	}
	var ms []map[string]any
	err = json.NewDecoder(resp.Body).Decode(&ms)
	resp.Body.Close()
	if err != nil || len(ms) != 1 || ms[0]["epoch"] != 12.0 || ms[0]["idempotencyKey"] != "p:aws:eni-b:assign-secondary-ip:10.0.0.7:epoch:12" || ms[0]["nic"] != "eni-b" {
		t.Fatalf("GET /admin/mutations = %v (%v), want the assign at epoch 12", ms, err)
	}

	// A call held by a pause does not hold up the shutdown.
	if resp, err := http.Post(s.url+"/admin/pause", "application/json", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /admin/pause = %v %v", resp, err)
	}
	held := make(chan error, 1)
	go func() {
		_, err := s.ec2.ModifyNetworkInterfaceAttribute(context.Background(), &ec2.ModifyNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String("eni-b"), SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(false)},
		})
		held <- err
	}()
	time.Sleep(200 * time.Millisecond)
	code, rest := s.stop()
	if code != 0 || rest != "" {
		t.Fatalf("after SIGTERM: exit %d, more stdout %q; want 0 and nothing; stderr:\n%s", code, rest, s.stderr.String())
	}
	if err := <-held; err == nil {
		t.Fatal("the call held by the pause succeeded, want it cut off by the shutdown")
	}
	if !strings.Contains(s.stderr.String(), "level=INFO msg=\"mutation accepted\"") {
		t.Fatalf("stderr has no log of the mutation:\n%s", s.stderr.String())
	}

	// Restarted on the same state, without --nics: the address is still
	// there, the pause too, and the abandoned call never applied.
	again := startSim(t, bin, "--state", state)
	resp, err = http.Post(again.url+"/admin/resume", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		NICs []struct {
			ID              string   `json:"id"`
			SecondaryIPs    []string `json:"secondaryIps"`
			SourceDestCheck bool     `json:"sourceDestCheck"`
		} `json:"nics"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || len(st.NICs) != 3 || st.NICs[1].ID != "eni-b" || len(st.NICs[1].SecondaryIPs) != 1 || !st.NICs[1].SourceDestCheck {
		t.Fatalf("state after restart = %+v (%v), want eni-b with 10.0.0.7 and its check on", st, err)
	}
	if got := again.secondaries("eni-b"); len(got) != 1 || got[0] != "10.0.0.7" {
		t.Fatalf("after restart eni-b holds %v, want [10.0.0.7]", got)
	}
	if code, _ := again.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
}
