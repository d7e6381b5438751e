//go:build linux

package control_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ipfence/ipfence/internal/testonly/sshlab"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/control"
)

// TestSSHLab runs commands over SSH on real OpenSSH servers, each in a
// network namespace of its own, and checks that the command ran there.
func TestSSHLab(t *testing.T) {
	lab := sshlab.ForTest(t, sshlab.Options{Nodes: []string{"n1", "n2"}})
	ctx := context.Background()
	nodes, err := control.ParseNodes(strings.NewReader(mustRead(t, lab.NodesFile())))
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 {
		t.Fatalf("nodes file %+v", nodes)
	}
	for _, n := range nodes {
		r, err := control.NewSSH(n, control.SSHOptions{KnownHosts: []string{lab.KnownHosts()}})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		// The command runs in the node's namespace: the one address it
		// has besides loopback is its own.
		out, err := control.Output(ctx, r, `ip -4 -o addr show scope global | awk '{print $4}'; id -u`)
		if err != nil {
			t.Fatal(err)
		}
		if want := n.Address + "/24\n0\n"; out != want {
			t.Fatalf("%s: %q, want %q", n.Name, out, want)
		}
		res, err := r.Run(ctx, control.Cmd{Line: "echo oops >&2; exit 42"})
		if err != nil || res.Exit != 42 || string(res.Stderr) != "oops\n" {
			t.Fatalf("%s: exit %+v %v", n.Name, res, err)
		}
		res, err = r.Run(ctx, control.Cmd{Line: "kill -s TERM $$"})
		if err != nil || res.Exit != -1 || res.Signal != "TERM" {
			t.Fatalf("%s: signalled %+v %v", n.Name, res, err)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSSHFilesAndDaemon(t *testing.T) {
	lab := sshlab.ForTest(t, sshlab.Options{Nodes: []string{"n1"}})
	ctx := context.Background()
	r, err := lab.Remote("n1")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dir := filepath.Join(lab.Dir(), "node-n1")
	data := make([]byte, 3<<20)
	_, _ = rand.Read(data)
	dst := filepath.Join(dir, "blob")
	if err := control.Upload(ctx, r, bytes.NewReader(data), dst, 0o600); err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	if n, err := control.Fetch(ctx, r, dst, &back, 10<<20); err != nil || n != int64(len(data)) || !bytes.Equal(back.Bytes(), data) {
		t.Fatalf("fetched %d bytes, equal %v, err %v", n, bytes.Equal(back.Bytes(), data), err)
	}
	// A daemon started over SSH outlives the session that started it,
	// runs in the node's namespace and is found, signalled and stopped by
	// later sessions.
	d := control.Daemon{Name: "echo", Dir: dir, Argv: []string{"sh", "-c", `echo "up in $(ip -4 -o addr show scope global | awk '{print $4}')"; exec sleep 600`}}
	p, err := control.Start(ctx, r, d)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := control.StateOf(ctx, r, p); err != nil || st != control.Running {
		t.Fatalf("state after the session: %v %v", st, err)
	}
	if found, err := control.Find(ctx, r, d); err != nil || found != p {
		t.Fatalf("find %+v %v", found, err)
	}
	if err := control.Stop(ctx, r, p, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if st, err := control.StateOf(ctx, r, p); err != nil || st != control.Gone {
		t.Fatalf("state after Stop: %v %v", st, err)
	}
	var logs bytes.Buffer
	if _, err := control.Logs(ctx, r, d, &logs, 1<<10); err != nil || logs.String() != "up in "+lab.Nodes()[0].Address+"/24\n" {
		t.Fatalf("logs %q %v", logs.String(), err)
	}
}

// TestSSHReconnect: a connection that drops under a running command gives
// an unknown outcome; the next command dials again and runs.
func TestSSHReconnect(t *testing.T) {
	lab := sshlab.ForTest(t, sshlab.Options{Nodes: []string{"n1"}})
	ctx := context.Background()
	r, err := lab.Remote("n1")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := control.Output(ctx, r, "true"); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, control.Cmd{Line: "echo started; exec sleep 60", Stdout: &signalWriter{once: started}})
		errc <- err
	}()
	<-started
	if n, err := lab.DropConnections("n1"); err != nil || n == 0 {
		t.Fatalf("dropped %d connections: %v", n, err)
	}
	if err := <-errc; !errors.Is(err, control.ErrUnknown) {
		t.Fatalf("command under a dropped connection: %v", err)
	}
	out, err := control.Output(ctx, r, "echo again")
	if err != nil || out != "again\n" {
		t.Fatalf("after the drop: %q %v", out, err)
	}
	if got := r.Reconnects(); got != 1 {
		t.Fatalf("reconnects %d, want 1", got)
	}
	// A drop between commands is found when the next session is opened:
	// nothing ran, so the remote dials again and the command runs once.
	if _, err := lab.DropConnections("n1"); err != nil {
		t.Fatal(err)
	}
	out, err = control.Output(ctx, r, "echo third")
	if err != nil || out != "third\n" || r.Reconnects() != 2 {
		t.Fatalf("after a drop between commands: %q %v, reconnects %d", out, err, r.Reconnects())
	}
}

// signalWriter closes once on its first write.
type signalWriter struct {
	once chan struct{}
	done bool
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if !w.done {
		w.done = true
		close(w.once)
	}
	return len(p), nil
}

func TestSSHContextEnds(t *testing.T) {
	lab := sshlab.ForTest(t, sshlab.Options{Nodes: []string{"n1"}})
	r, err := lab.Remote("n1")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Connected first, so that the deadline falls while the command runs
	// rather than while dialling, however slow the machine is.
	if _, err := control.Output(context.Background(), r, "true"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.Run(ctx, control.Cmd{Line: "sleep 60"}); !errors.Is(err, control.ErrUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	// The connection is still good for the next command.
	if out, err := control.Output(context.Background(), r, "echo ok"); err != nil || out != "ok\n" {
		t.Fatalf("after a cancelled command: %q %v", out, err)
	}
}

func TestSSHSudo(t *testing.T) {
	if _, err := exec.LookPath("sudo"); err != nil {
		testenv.Missing(t, "program sudo on PATH (apt-get install sudo)")
	}
	lab := sshlab.ForTest(t, sshlab.Options{Nodes: []string{"n1"}})
	n := lab.Nodes()[0]
	ctx := context.Background()
	for _, sudo := range []bool{false, true} {
		n.Sudo = sudo
		r, err := control.NewSSH(n, control.SSHOptions{KnownHosts: []string{lab.KnownHosts()}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := control.Output(ctx, r, `echo "sudo=${SUDO_USER-}"`)
		r.Close()
		want := map[bool]string{false: "sudo=\n", true: "sudo=root\n"}[sudo]
		if err != nil || out != want {
			t.Fatalf("sudo %v: %q %v, want %q", sudo, out, err, want)
		}
	}
}

// TestSSHAgent logs in with a key held by a real ssh-agent, the node
// naming no key file.
func TestSSHAgent(t *testing.T) {
	agentBin := testenv.Program(t, "ssh-agent")
	addBin := testenv.Program(t, "ssh-add")
	lab := sshlab.ForTest(t, sshlab.Options{Nodes: []string{"n1"}})
	sock := filepath.Join(t.TempDir(), "agent.sock")
	agent := exec.Command(agentBin, "-D", "-a", sock)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	ctx := context.Background()
	n := lab.Nodes()[0]
	n.Key = ""
	// Before the key is added the agent has nothing to offer.
	r, err := control.NewSSH(n, control.SSHOptions{KnownHosts: []string{lab.KnownHosts()}, Agent: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var addErr error
	for range 100 {
		add := exec.Command(addBin, lab.Key())
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		var out []byte
		if out, addErr = add.CombinedOutput(); addErr == nil {
			break
		}
		addErr = errors.New(string(out))
		time.Sleep(50 * time.Millisecond)
	}
	if addErr != nil {
		t.Fatalf("ssh-add: %v", addErr)
	}
	if out, err := control.Output(ctx, r, "echo via agent"); err != nil || out != "via agent\n" {
		t.Fatalf("%q %v", out, err)
	}
	if _, err := control.NewSSH(n, control.SSHOptions{KnownHosts: []string{lab.KnownHosts()}, Agent: ""}); err != nil && !strings.Contains(err.Error(), "no key= and no ssh-agent") {
		t.Fatalf("no agent: %v", err)
	}
}

func TestSSHRefusals(t *testing.T) {
	lab := sshlab.ForTest(t, sshlab.Options{Nodes: []string{"n1"}})
	ctx := context.Background()
	n := lab.Nodes()[0]
	dir := t.TempDir()
	otherPub, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	otherSSH, _ := ssh.NewPublicKey(otherPub)

	// A host known with another key is refused, naming the file and line.
	wrong := filepath.Join(dir, "known_wrong")
	line := knownhosts.Line([]string{knownhosts.Normalize(n.Address + ":22")}, otherSSH)
	if err := os.WriteFile(wrong, []byte("# first\n"+line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := control.NewSSH(n, control.SSHOptions{KnownHosts: []string{wrong}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(ctx, control.Cmd{Line: "true"})
	if err == nil || !strings.Contains(err.Error(), "differs from the one in "+wrong+" line 2") {
		t.Fatalf("changed host key: %v", err)
	}
	r.Close()

	// A host not in known_hosts is refused before any dial.
	empty := filepath.Join(dir, "known_empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := control.NewSSH(n, control.SSHOptions{KnownHosts: []string{empty}}); err == nil || !strings.Contains(err.Error(), "is not in the known_hosts files") {
		t.Fatalf("unknown host: %v", err)
	}
	if _, err := control.NewSSH(n, control.SSHOptions{KnownHosts: []string{filepath.Join(dir, "missing")}}); err == nil || !strings.Contains(err.Error(), "known_hosts") {
		t.Fatalf("missing known_hosts: %v", err)
	}

	// A key the node does not accept fails to authenticate.
	block, _ := ssh.MarshalPrivateKey(otherPriv, "")
	otherKey := filepath.Join(dir, "other_key")
	if err := os.WriteFile(otherKey, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := n
	bad.Key = otherKey
	r, err = control.NewSSH(bad, control.SSHOptions{KnownHosts: []string{lab.KnownHosts()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx, control.Cmd{Line: "true"}); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("unaccepted key: %v", err)
	}
	r.Close()

	// A key behind a passphrase is refused with what to do instead.
	block, _ = ssh.MarshalPrivateKeyWithPassphrase(otherPriv, "", []byte("secret"))
	locked := filepath.Join(dir, "locked_key")
	if err := os.WriteFile(locked, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	bad.Key = locked
	if _, err := control.NewSSH(bad, control.SSHOptions{KnownHosts: []string{lab.KnownHosts()}}); err == nil || !strings.Contains(err.Error(), "passphrase: load it into ssh-agent") {
		t.Fatalf("locked key: %v", err)
	}
	bad.Key = empty
	if _, err := control.NewSSH(bad, control.SSHOptions{KnownHosts: []string{lab.KnownHosts()}}); err == nil || !strings.Contains(err.Error(), "key "+empty) {
		t.Fatalf("empty key file: %v", err)
	}
	bad.Key = n.Key
	bad.Port = 2222
	r, err = control.NewSSH(bad, control.SSHOptions{KnownHosts: []string{lab.KnownHosts()}})
	if err == nil || !strings.Contains(err.Error(), ":2222 is not in the known_hosts files") {
		t.Fatalf("other port: %v", err)
	}
	if r != nil {
		r.Close()
	}
}
