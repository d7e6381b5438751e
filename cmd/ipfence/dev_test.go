package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testenv"
)

// devConsole is a running `ipfence dev`: its stdout read line by line,
// its stdin to type on, its stderr kept.
type devConsole struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.Writer
	lines chan string
	mu    sync.Mutex
	seen  []string
	logs  bytes.Buffer
}

func (d *devConsole) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.Write(p)
}

// expect reads lines until one matches re, and returns its submatches.
func (d *devConsole) expect(re string, within time.Duration) []string {
	d.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-d.lines:
			if !ok {
				d.t.Fatalf("dev ended before a line matching %q; it printed:\n%s", re, d.output())
			}
			if m := rx.FindStringSubmatch(l); m != nil {
				d.t.Logf("dev: %s", l)
				return m
			}
		case <-deadline:
			d.t.Fatalf("no line matching %q within %s; dev printed:\n%s", re, within, d.output())
		}
	}
}

func (d *devConsole) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.seen, "\n")
}

func (d *devConsole) logged() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.String()
}

func (d *devConsole) typeLine(s string) {
	d.t.Helper()
	if _, err := io.WriteString(d.stdin, s+"\n"); err != nil {
		d.t.Fatal(err)
	}
}

func startDev(t *testing.T, args ...string) *devConsole {
	d := &devConsole{t: t, lines: make(chan string, 1024)}
	d.cmd = exec.Command(testenv.Binary(t), append([]string{"dev"}, args...)...)
	in, err := d.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.stdin = in
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Signal(syscall.SIGTERM)
			d.cmd.Wait()
		}
	})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			d.mu.Lock()
			d.seen = append(d.seen, sc.Text())
			d.mu.Unlock()
			d.lines <- sc.Text()
		}
		close(d.lines)
	}()
	return d
}

// TestDevFailover runs `ipfence dev` as a user would: a node killed with
// SIGKILL is named, the others go on and take its addresses (each move a
// line), and "restart" typed on dev's stdin starts it again. --log-level
// reaches the nodes.
func TestDevFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes: a simulator and three nodes")
	}
	d := startDev(t, "--nodes", "3", "--addresses", "2", "--log-level", "info")
	dir := d.expect(`^ipfence dev: a cloud simulator and 3 nodes on loopback, in (\S+) \(log level info\)$`, time.Minute)[1]
	pids, urls := map[string]int{}, map[string]string{}
	for range 3 {
		m := d.expect(`^  (n\d)\s+pid (\d+)\s+(http://127\.0\.0\.1:\d+)$`, 10*time.Second)
		pids[m[1]], _ = strconv.Atoi(m[2])
		urls[m[1]] = m[3]
	}
	d.expect(`^Type here:  kill NODE`, 10*time.Second)

	// Both addresses land on one node, the preferred one.
	holder := map[string]string{}
	for len(holder) < 2 {
		m := d.expect(`^\d\d:\d\d:\d\d\.\d{3}  (10\.0\.0\.1[01])\s+- → (n\d)$`, time.Minute)
		holder[m[1]] = m[2]
	}
	victim := holder["10.0.0.10"]
	if holder["10.0.0.11"] != victim || pids[victim] == 0 {
		t.Fatalf("holders %v, pids %v", holder, pids)
	}
	if err := syscall.Kill(pids[victim], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.expect(fmt.Sprintf(`^\d\d:\d\d:\d\d\.\d{3}  %s exited: signal: killed; type 'restart %s' to start it again$`, victim, victim), 10*time.Second)
	// Each of its addresses moves to a survivor: one line each.
	moved := map[string]string{}
	for len(moved) < 2 {
		m := d.expect(fmt.Sprintf(`^\d\d:\d\d:\d\d\.\d{3}  (10\.0\.0\.1[01])\s+%s → (n\d)$`, victim), 2*time.Minute)
		if m[2] == victim {
			t.Fatalf("%s moved to the dead node: %v", m[1], m)
		}
		moved[m[1]] = m[2]
	}
	if d.cmd.ProcessState != nil || d.cmd.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatalf("dev is gone after a node died:\n%s", d.output())
	}
	for n, pid := range pids {
		if n != victim && syscall.Kill(pid, 0) != nil {
			t.Errorf("%s (pid %d) did not survive %s's death", n, pid, victim)
		}
	}

	// ctl against a survivor agrees with the moves dev printed.
	var st struct {
		Addresses []struct {
			Address        string `json:"address"`
			ProviderHolder string `json:"provider_holder"`
		} `json:"addresses"`
	}
	var survivor string
	for n := range urls {
		if n != victim {
			survivor = n
		}
	}
	out, err := exec.Command(testenv.Binary(t), "ctl", "--endpoint", urls[survivor], "--token-file", dir+"/secret", "--json", "status").Output()
	if err != nil || json.Unmarshal(out, &st) != nil || len(st.Addresses) != 2 {
		t.Fatalf("ctl status: %v\n%s", err, out)
	}
	for _, a := range st.Addresses {
		if moved[a.Address] != a.ProviderHolder {
			t.Errorf("ctl says %s is on %s; dev said it moved to %s", a.Address, a.ProviderHolder, moved[a.Address])
		}
	}

	// A node that cannot start says why, in its own words.
	cfgPath := dir + "/" + victim + ".yaml"
	good, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(good, "bogus: 1\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	d.typeLine("restart " + victim)
	d.expect(fmt.Sprintf(`^\d\d:\d\d:\d\d\.\d{3}  %s did not start: exit status 3; its last log line: "ipfence serve: %s:\d+: bogus: unknown key`, victim, regexp.QuoteMeta(cfgPath)), time.Minute)
	if err := os.WriteFile(cfgPath, good, 0o600); err != nil {
		t.Fatal(err)
	}
	d.typeLine("restart " + victim)
	m := d.expect(fmt.Sprintf(`^\d\d:\d\d:\d\d\.\d{3}  %s started: pid (\d+), (http://\S+)$`, victim), time.Minute)
	if pid, _ := strconv.Atoi(m[1]); pid == pids[victim] || m[2] != urls[victim] {
		t.Errorf("restarted as pid %s at %s; was pid %d at %s", m[1], m[2], pids[victim], urls[victim])
	} else {
		pids[victim] = pid
	}
	resp, err := http.Get(urls[victim] + "/healthz")
	if err != nil {
		t.Fatalf("the restarted node does not answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthz of the restarted node: %s", resp.Status)
	}
	d.typeLine("status")
	d.expect(fmt.Sprintf(`^  %s\s+pid %d\s+%s  running$`, victim, pids[victim], regexp.QuoteMeta(urls[victim])), 10*time.Second)
	d.typeLine("kil " + victim)
	d.expect(`^unknown command "kil"; did you mean "kill"\?; type help$`, 10*time.Second)

	d.cmd.Process.Signal(syscall.SIGTERM)
	d.expect(`^\d\d:\d\d:\d\d\.\d{3}  stopping$`, 10*time.Second)
	done := make(chan error, 1)
	go func() {
		for range d.lines {
		}
		done <- d.cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop within 30s of SIGTERM")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dev left its folder behind: %v", err)
	}
	// The nodes logged at info, each line after its name.
	logs := d.logged()
	for _, n := range []string{"n1", "n2", "n3"} {
		if !regexp.MustCompile(`(?m)^` + n + `\| time=\S+ level=INFO msg=serving`).MatchString(logs) {
			t.Errorf("no info line of %s in dev's stderr:\n%s", n, logs)
		}
	}
}
