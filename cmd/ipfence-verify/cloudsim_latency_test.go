package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider/aws/ec2sim"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
	"github.com/ipfence/ipfence/internal/cli"
)

// shownLatency starts cloudsim (EC2) with args and returns the latency
// profile its admin API shows.
func shownLatency(t *testing.T, args ...string) (name string, ops map[string]string) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"cloudsim", "--listen", "127.0.0.1:0", "--nics", "eni-a"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
	}()
	var url string
	select {
	case l := <-line:
		var ok bool
		if url, ok = strings.CutPrefix(strings.TrimSpace(l), "listening on "); !ok {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line after 30s")
	}
	resp, err := http.Get(url + "/admin/latency")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p struct {
		Name       string            `json:"name"`
		Operations map[string]string `json:"operations"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p.Name, p.Operations
}

// TestCloudsimLatency: the standalone simulator's default pace is
// realistic, and --latency none makes it answer at once; test capture's
// default is none (its README figures and CI times were made so), which
// its simulator is started with (capturesuite's TestSimArgsLatency).
func TestCloudsimLatency(t *testing.T) {
	name, ops := shownLatency(t)
	if name != "realistic" || ops["AssignPrivateIpAddresses"] != "500ms" || ops["DescribeNetworkInterfaces"] != "150ms" {
		t.Fatalf("cloudsim without --latency: %s %v, want realistic with EC2's figures", name, ops)
	}
	if name, ops := shownLatency(t, "--latency", "none"); name != "none" || len(ops) != 0 {
		t.Fatalf("cloudsim --latency none: %s %v", name, ops)
	}

	// Each dialect gets its own cloud's profile.
	for dialect, want := range map[string]time.Duration{
		"ec2": ec2sim.Realistic.Latency("AssignPrivateIpAddresses"),
		"arm": armsim.Realistic.Latency(armsim.OpPut),
		"oci": ocisim.Realistic.Latency(ocisim.OpUpdatePrivateIp),
	} {
		p, err := latencyProfile(dialect, "realistic")
		if err != nil || p.Name != "realistic" || want == 0 {
			t.Fatalf("%s: %+v, %v", dialect, p, err)
		}
		write := map[string]string{"ec2": "AssignPrivateIpAddresses", "arm": armsim.OpPut, "oci": ocisim.OpUpdatePrivateIp}[dialect]
		if p.Latency(write) != want {
			t.Fatalf("%s realistic: a write waits %v, want %v", dialect, p.Latency(write), want)
		}
	}
	if p, _ := latencyProfile("arm", "realistic"); p.Settle != 6*time.Second {
		t.Fatalf("arm realistic: a PUT's operation takes %v, want 6s", p.Settle)
	}

	// The defaults, as --help states them.
	defaults := []struct {
		args []string
		flag string
		def  string
	}{
		{[]string{"cloudsim", "--help"}, "latency", "realistic"},
		{[]string{"test", "capture", "--help"}, "cloud-latency", "none"},
	}
	for _, d := range defaults {
		code, stdout, _ := runCLI(d.args...)
		re := regexp.MustCompile(`(?s)  --` + d.flag + ` string\n.*?\(default ([a-z]+)\)`)
		m := re.FindStringSubmatch(stdout)
		if code != cli.ExitValid || m == nil || m[1] != d.def {
			t.Fatalf("%v: exit %d, default %v, want %q:\n%s", d.args, code, m, d.def, stdout)
		}
	}
}
