package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHOptions say how to reach nodes over SSH; the node itself (address,
// port, user, key, sudo) comes from a Node.
type SSHOptions struct {
	// KnownHosts are the known_hosts files the node's host key must be
	// found in (default ~/.ssh/known_hosts). A host that is missing, or
	// known with another key, is refused: there is no "accept new".
	KnownHosts []string
	// Agent is the ssh-agent socket used when the node names no key
	// (default $SSH_AUTH_SOCK).
	Agent string
	// DialTimeout bounds the TCP connect and SSH handshake when ctx has no
	// earlier deadline (default 15s).
	DialTimeout time.Duration
}

// SSH runs commands on a node over one SSH connection, dialled on first
// use and again whenever it is found dead. It is safe for concurrent use:
// each Run is a session of its own on the shared connection.
type SSH struct {
	node Node
	opts SSHOptions
	auth ssh.AuthMethod // nil: ask the agent at each dial
	hk   ssh.HostKeyCallback
	algs []string

	mu         sync.Mutex
	client     *ssh.Client
	closed     bool
	hadClient  bool
	reconnects int
}

// NewSSH checks what can be checked before any connection (the key parses,
// the known_hosts files read, the host is in them) and returns a remote
// for node. It does not dial.
func NewSSH(node Node, opts SSHOptions) (*SSH, error) {
	if node.Port == 0 {
		node.Port = 22
	}
	if node.User == "" {
		node.User = "root"
	}
	if err := node.validate(); err != nil {
		return nil, err
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 15 * time.Second
	}
	s := &SSH{node: node, opts: opts}
	if node.Key != "" {
		path, err := expandHome(node.Key)
		if err != nil {
			return nil, fmt.Errorf("control: node %s: key %s: %w", node.Name, node.Key, err)
		}
		pem, err := readBounded(path, 64<<10)
		if err != nil {
			return nil, fmt.Errorf("control: node %s: key: %w", node.Name, err)
		}
		signer, err := ssh.ParsePrivateKey(pem)
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("control: node %s: key %s is protected by a passphrase: load it into ssh-agent and leave key= out", node.Name, path)
		}
		if err != nil {
			return nil, fmt.Errorf("control: node %s: key %s: %w", node.Name, path, err)
		}
		s.auth = ssh.PublicKeys(signer)
	} else {
		if s.opts.Agent == "" {
			s.opts.Agent = os.Getenv("SSH_AUTH_SOCK")
		}
		if s.opts.Agent == "" {
			return nil, fmt.Errorf("control: node %s: no key= and no ssh-agent (SSH_AUTH_SOCK is unset)", node.Name)
		}
	}
	files := opts.KnownHosts
	if len(files) == 0 {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("control: node %s: finding ~/.ssh/known_hosts: %w", node.Name, err)
		}
		files = []string{filepath.Join(home, ".ssh", "known_hosts")}
	}
	hk, err := knownhosts.New(files...)
	if err != nil {
		return nil, fmt.Errorf("control: node %s: known_hosts: %w", node.Name, err)
	}
	s.opts.KnownHosts = files
	s.hk = hk
	s.algs, err = hostKeyAlgorithms(hk, s.addr())
	if err != nil {
		return nil, fmt.Errorf("control: node %s: %w", node.Name, err)
	}
	return s, nil
}

// Name returns the node's name.
func (s *SSH) Name() string { return s.node.Name }

// Reconnects counts the connections dialled after the first.
func (s *SSH) Reconnects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reconnects
}

func (s *SSH) addr() string { return net.JoinHostPort(s.node.Address, strconv.Itoa(s.node.Port)) }

// hostKeyAlgorithms asks the known_hosts files which key types they hold
// for addr, so that the handshake asks the server for one of those: left
// to the default order, a server with an RSA and an Ed25519 key would offer
// whichever comes first, and a known_hosts holding only the other would
// look like a changed key.
func hostKeyAlgorithms(hk ssh.HostKeyCallback, addr string) ([]string, error) {
	err := hk(addr, &net.TCPAddr{IP: net.IPv4zero}, probeKey{})
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) {
		return nil, fmt.Errorf("known_hosts: looking up %s: %v", addr, err)
	}
	if len(ke.Want) == 0 {
		return nil, fmt.Errorf("host %s is not in the known_hosts files: add its key (ssh-keyscan, checked out of band)", addr)
	}
	var algs []string
	seen := map[string]bool{}
	for _, w := range ke.Want {
		t := w.Key.Type()
		var add []string
		switch t {
		case ssh.KeyAlgoRSA:
			add = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
		default:
			add = []string{t}
		}
		for _, a := range add {
			if !seen[a] {
				seen[a] = true
				algs = append(algs, a)
			}
		}
	}
	return algs, nil
}

// probeKey is a key no known_hosts file holds, to make the callback list
// the keys it does hold for a host.
type probeKey struct{}

func (probeKey) Type() string                        { return "ipfence-probe" }
func (probeKey) Marshal() []byte                     { return []byte("ipfence-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe key") }

// hostKey checks the server's key, with a message that says what to do.
func (s *SSH) hostKey(host string, remote net.Addr, key ssh.PublicKey) error {
	err := s.hk(host, remote, key)
	var ke *knownhosts.KeyError
	if errors.As(err, &ke) && len(ke.Want) > 0 {
		w := ke.Want[0]
		return fmt.Errorf("host key of %s (%s %s) differs from the one in %s line %d: refusing (a reinstalled node, or someone in the middle)",
			host, key.Type(), ssh.FingerprintSHA256(key), w.Filename, w.Line)
	}
	if errors.As(err, &ke) {
		return fmt.Errorf("host %s (%s %s) is not in %s", host, key.Type(), ssh.FingerprintSHA256(key), strings.Join(s.opts.KnownHosts, ", "))
	}
	return err
}

// dial opens a new connection.
func (s *SSH) dial(ctx context.Context) (*ssh.Client, error) {
	deadline := time.Now().Add(s.opts.DialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	auth := s.auth
	if auth == nil {
		ac, err := net.Dial("unix", s.opts.Agent)
		if err != nil {
			return nil, fmt.Errorf("ssh-agent at %s: %w", s.opts.Agent, err)
		}
		// The agent is asked only during the handshake.
		defer ac.Close()
		auth = ssh.PublicKeysCallback(agent.NewClient(ac).Signers)
	}
	d := net.Dialer{Deadline: deadline}
	conn, err := d.DialContext(ctx, "tcp", s.addr())
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(deadline)
	cfg := &ssh.ClientConfig{
		User:              s.node.User,
		Auth:              []ssh.AuthMethod{auth},
		HostKeyCallback:   s.hostKey,
		HostKeyAlgorithms: s.algs,
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, s.addr(), cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// session returns a new session, redialling once when the connection is
// dead: a session that could not be opened ran nothing, so trying again on
// a fresh connection is safe.
func (s *SSH) session(ctx context.Context) (*ssh.Client, *ssh.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, errors.New("remote is closed")
	}
	for attempt := 0; ; attempt++ {
		if s.client == nil {
			c, err := s.dial(ctx)
			if err != nil {
				return nil, nil, fmt.Errorf("connecting to %s@%s: %w", s.node.User, s.addr(), err)
			}
			if s.hadClient {
				s.reconnects++
			}
			s.client = c
			s.hadClient = true
		}
		sess, err := s.client.NewSession()
		if err == nil {
			return s.client, sess, nil
		}
		var refused *ssh.OpenChannelError
		if errors.As(err, &refused) {
			// The server answered, so the connection is alive: it
			// refused one more session (OpenSSH's MaxSessions, 10 by
			// default, bounds a node's commands at once).
			return nil, nil, fmt.Errorf("opening a session on %s: %w (sshd's MaxSessions?)", s.addr(), err)
		}
		s.client.Close()
		s.client = nil
		if attempt > 0 {
			return nil, nil, fmt.Errorf("opening a session on %s: %w", s.addr(), err)
		}
	}
}

// drop forgets c if it is still the current connection, so that the next
// Run dials again.
func (s *SSH) drop(c *ssh.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == c {
		c.Close()
		s.client = nil
	}
}

// Run runs c.Line on the node in a session of its own.
func (s *SSH) Run(ctx context.Context, c Cmd) (Result, error) {
	fail := func(err error) error {
		return fmt.Errorf("control: %s: %s: %w", s.node.Name, short(c.Line), err)
	}
	client, sess, err := s.session(ctx)
	if err != nil {
		return Result{}, fail(err)
	}
	defer sess.Close()
	out := &capped{max: MaxOutput}
	errOut := &capped{max: MaxOutput}
	if c.Stdout != nil {
		sess.Stdout = c.Stdout
	} else {
		sess.Stdout = out
	}
	sess.Stderr = errOut
	if c.Stdin != nil {
		sess.Stdin = c.Stdin
	}
	done := make(chan error, 1)
	if err := sess.Start(Line(shellLine(c.Line, s.node.Sudo)...)); err != nil {
		// The request to run may not have reached the server; a
		// connection that broke here is dead for later calls too.
		s.drop(client)
		return Result{}, fail(fmt.Errorf("%w: starting: %v", ErrUnknown, err))
	}
	go func() { done <- sess.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		// Ask the server to kill the command and give up on it. OpenSSH
		// may refuse the signal, and keeps the channel (one of its
		// MaxSessions) until the command exits: its outcome is unknown
		// either way, and waiting here would hold the caller as long.
		_ = sess.Signal(ssh.SIGKILL)
		sess.Close()
		return Result{}, fail(fmt.Errorf("%w: %w", ErrUnknown, ctx.Err()))
	}
	res := Result{Stdout: out.buf.Bytes(), Stderr: errOut.buf.Bytes(), Truncated: out.dropped || errOut.dropped}
	var ee *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case werr == nil:
		return res, nil
	case errors.As(werr, &ee):
		res.Exit = ee.ExitStatus()
		if ee.Signal() != "" {
			res.Exit = -1
			res.Signal = ee.Signal()
		}
		return res, nil
	case errors.As(werr, &missing), errors.Is(werr, io.EOF):
		// The session ended without an exit status: the connection
		// dropped under it (or sshd was killed).
		s.drop(client)
		return res, fail(fmt.Errorf("%w: the session ended without an exit status (connection lost?)", ErrUnknown))
	default:
		s.drop(client)
		return res, fail(fmt.Errorf("%w: %v", ErrUnknown, werr))
	}
}

// Close closes the connection; later Runs fail.
func (s *SSH) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.client != nil {
		err := s.client.Close()
		s.client = nil
		return err
	}
	return nil
}

// expandHome expands a leading "~/".
func expandHome(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(home, p[1:]), nil
	}
	return p, nil
}

// readBounded reads a file of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}
