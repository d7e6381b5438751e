//go:build linux

package netfault

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The netns tests need a process inside each namespace that serves and
// dials. Rather than depend on socat or nc, the test binary re-executes
// itself as that process, an agent, driven by one command a line on stdin
// with one reply a line on stdout:
//
//	listen ADDR           -> ok ADDR     (an echo server, line by line)
//	dial ID ADDR MS       -> ok | timeout | error MSG
//	send ID TEXT MS       -> ok LINE | timeout | error MSG   (writes TEXT, reads a line)
//	recv ID MS            -> ok LINE | timeout | error MSG
//	close ID              -> ok
const helperEnv = "NETFAULT_TEST_HELPER"

type agentConn struct {
	c       net.Conn
	pending []byte
}

// readLine reads up to a newline, keeping what a timed-out read got so far
// for the next call: a stalled connection delivers later.
func (a *agentConn) readLine(timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 4096)
	for {
		if i := bytes.IndexByte(a.pending, '\n'); i >= 0 {
			line := string(a.pending[:i])
			a.pending = a.pending[i+1:]
			return line, nil
		}
		if err := a.c.SetReadDeadline(deadline); err != nil {
			return "", err
		}
		n, err := a.c.Read(buf)
		a.pending = append(a.pending, buf[:n]...)
		if err != nil {
			return "", err
		}
	}
}

func runAgent(in io.Reader, out io.Writer) {
	conns := map[string]*agentConn{}
	reply := func(err error) string {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return "timeout"
		}
		return "error " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	ms := func(s string) time.Duration {
		n, _ := strconv.Atoi(s)
		return time.Duration(n) * time.Millisecond
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		var r string
		switch {
		case len(f) == 2 && f[0] == "listen":
			ln, err := net.Listen("tcp", f[1])
			if err != nil {
				r = reply(err)
				break
			}
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						_, _ = io.Copy(c, c)
						_ = c.Close()
					}()
				}
			}()
			r = "ok " + ln.Addr().String()
		case len(f) == 4 && f[0] == "dial":
			c, err := net.DialTimeout("tcp", f[2], ms(f[3]))
			if err != nil {
				r = reply(err)
				break
			}
			conns[f[1]] = &agentConn{c: c}
			r = "ok"
		case len(f) == 4 && f[0] == "send" && conns[f[1]] != nil:
			c := conns[f[1]]
			if _, err := io.WriteString(c.c, f[2]+"\n"); err != nil {
				r = reply(err)
				break
			}
			line, err := c.readLine(ms(f[3]))
			if err != nil {
				r = reply(err)
				break
			}
			r = "ok " + line
		case len(f) == 3 && f[0] == "recv" && conns[f[1]] != nil:
			line, err := conns[f[1]].readLine(ms(f[2]))
			if err != nil {
				r = reply(err)
				break
			}
			r = "ok " + line
		case len(f) == 2 && f[0] == "close" && conns[f[1]] != nil:
			_ = conns[f[1]].c.Close()
			delete(conns, f[1])
			r = "ok"
		default:
			r = "error bad command " + strconv.Quote(sc.Text())
		}
		if _, err := fmt.Fprintln(out, r); err != nil {
			return
		}
	}
}

// agent is the test's handle on an agent process in a node's namespace.
type agent struct {
	t     *testing.T
	node  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startAgent(t *testing.T, n *Netns, node string) *agent {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := n.Command(node, exe)
	cmd.Env = append(os.Environ(), helperEnv+"=agent")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, node: node, cmd: cmd, in: in, lines: make(chan string)}
	go func() {
		defer close(a.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			a.lines <- sc.Text()
		}
	}()
	t.Cleanup(a.stop)
	return a
}

// stop ends the agent and waits for it; it may be called more than once.
func (a *agent) stop() {
	if a.cmd.ProcessState != nil {
		return
	}
	_ = a.in.Close()
	_ = a.cmd.Process.Kill()
	for range a.lines {
	}
	_ = a.cmd.Wait()
}

// do sends one command and returns the reply.
func (a *agent) do(format string, args ...any) string {
	a.t.Helper()
	cmd := fmt.Sprintf(format, args...)
	if _, err := fmt.Fprintln(a.in, cmd); err != nil {
		a.t.Fatalf("agent %s: %s: %v", a.node, cmd, err)
	}
	select {
	case line, ok := <-a.lines:
		if !ok {
			a.t.Fatalf("agent %s ended during %s", a.node, cmd)
		}
		return line
	case <-time.After(30 * time.Second):
		a.t.Fatalf("agent %s: no reply to %s", a.node, cmd)
	}
	return ""
}

// expect sends a command and checks its reply.
func (a *agent) expect(want string, format string, args ...any) {
	a.t.Helper()
	if got := a.do(format, args...); got != want {
		a.t.Errorf("on %s, %s: %q, want %q", a.node, fmt.Sprintf(format, args...), got, want)
	}
}
