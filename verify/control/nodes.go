package control

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Node is one machine of a test, as a nodes file lists it.
type Node struct {
	// Name is the node's name in the test (n1): histories, grudges and
	// logs use it.
	Name string
	// Address is the host name or IP address SSH dials.
	Address string
	// Port is SSH's port (default 22).
	Port int
	// User is the login user (default root).
	User string
	// Key is the private key file; empty means ssh-agent.
	Key string
	// Sudo runs every command through sudo -n.
	Sudo bool
	// Line is the nodes file line the node was read from (0 when built in
	// code).
	Line int
}

// Limits of a nodes file: it is written by hand, so anything larger is a
// mistake (the wrong file named), not a test.
const (
	maxNodesFile = 1 << 20
	maxNodesLine = 4096
	maxNodeCount = 256
)

var (
	nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?$`)
	userRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,31}$`)
)

// nodeFields are the fields a node line may set, in the order Format
// writes them.
var nodeFields = []string{"address", "port", "user", "key", "sudo"}

// ParseNodes reads a nodes file: one node a line, its name first and then
// fields as key=value, separated by spaces or tabs:
//
//	# name  fields
//	n1      address=10.0.0.11 user=admin key=~/.ssh/id_ed25519 sudo=true
//	n2      address=db2.example.net port=2222
//
// address is required; port (default 22), user (default root), key
// (default: ssh-agent) and sudo (true or false, default false) are not.
// Blank lines and lines starting with # are skipped. A value cannot hold
// spaces. Errors name the line and the field.
func ParseNodes(r io.Reader) ([]Node, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxNodesFile+1))
	if err != nil {
		return nil, fmt.Errorf("nodes file: %w", err)
	}
	if len(data) > maxNodesFile {
		return nil, fmt.Errorf("nodes file: larger than %d bytes", maxNodesFile)
	}
	var nodes []Node
	byName := map[string]int{}
	for i, raw := range bytes.Split(data, []byte("\n")) {
		lineNo := i + 1
		if len(raw) > maxNodesLine {
			return nil, fmt.Errorf("nodes file line %d: longer than %d bytes", lineNo, maxNodesLine)
		}
		text := strings.TrimSpace(string(raw))
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		n, err := parseNodeLine(text, lineNo)
		if err != nil {
			return nil, err
		}
		if prev, ok := byName[n.Name]; ok {
			return nil, fmt.Errorf("nodes file line %d: node %q is already on line %d", lineNo, n.Name, prev)
		}
		if len(nodes) == maxNodeCount {
			return nil, fmt.Errorf("nodes file line %d: more than %d nodes", lineNo, maxNodeCount)
		}
		byName[n.Name] = lineNo
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, errors.New("nodes file: no nodes (one a line: NAME address=HOST [port=22] [user=root] [key=FILE] [sudo=false])")
	}
	return nodes, nil
}

func parseNodeLine(text string, lineNo int) (Node, error) {
	words := strings.Fields(text)
	n := Node{Port: 22, User: "root", Line: lineNo}
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("nodes file line %d, node %q, field %s: %s", lineNo, n.Name, field, fmt.Sprintf(format, a...))
	}
	n.Name = words[0]
	if strings.Contains(n.Name, "=") {
		return Node{}, fmt.Errorf("nodes file line %d: the line must start with the node's name, not %q", lineNo, clip(n.Name))
	}
	if !nodeNameRE.MatchString(n.Name) {
		return Node{}, fmt.Errorf("nodes file line %d, field name: %q: want 1 to 63 letters, digits, '_', '.', '-', starting with a letter or digit", lineNo, clip(n.Name))
	}
	seen := map[string]bool{}
	for _, w := range words[1:] {
		key, val, ok := strings.Cut(w, "=")
		if !ok {
			return Node{}, bad(clip(w), "want key=value (one of %s)", strings.Join(nodeFields, ", "))
		}
		if seen[key] {
			return Node{}, bad(clip(key), "given twice")
		}
		seen[key] = true
		switch key {
		case "address":
			if !validAddress(val) {
				return Node{}, bad(key, "%q: want an IP address or a host name", clip(val))
			}
			n.Address = val
		case "port":
			p, err := strconv.Atoi(val)
			if err != nil || p < 1 || p > 65535 {
				return Node{}, bad(key, "%q: want a number from 1 to 65535", clip(val))
			}
			n.Port = p
		case "user":
			if !userRE.MatchString(val) {
				return Node{}, bad(key, "%q: want a login name (letters, digits, '_', '.', '-', up to 32)", clip(val))
			}
			n.User = val
		case "key":
			if val == "" || strings.ContainsFunc(val, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				return Node{}, bad(key, "%q: want the path of a private key file", clip(val))
			}
			n.Key = val
		case "sudo":
			switch val {
			case "true", "yes":
				n.Sudo = true
			case "false", "no":
				n.Sudo = false
			default:
				return Node{}, bad(key, "%q: want true or false", clip(val))
			}
		default:
			return Node{}, bad(clip(key), "unknown field (known: %s)", strings.Join(nodeFields, ", "))
		}
	}
	if n.Address == "" {
		return Node{}, bad("address", "missing: every node needs address=HOST")
	}
	return n, nil
}

// clip keeps a quoted bad value from flooding the message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func validAddress(s string) bool {
	if a, err := netip.ParseAddr(s); err == nil {
		// A zone (fe80::1%eth0) is this machine's, not a node's.
		return a.Zone() == ""
	}
	if strings.ContainsAny(s, ":%") {
		return false
	}
	return len(s) <= 253 && hostnameRE.MatchString(s)
}

// validate checks a Node built in code as ParseNodes checks a line.
func (n Node) validate() error {
	_, err := parseNodeLine(n.format(), n.Line)
	return err
}

// format writes n as one nodes file line.
func (n Node) format() string {
	var b strings.Builder
	b.WriteString(n.Name)
	fmt.Fprintf(&b, " address=%s port=%d user=%s", n.Address, n.Port, n.User)
	if n.Key != "" {
		fmt.Fprintf(&b, " key=%s", n.Key)
	}
	fmt.Fprintf(&b, " sudo=%t", n.Sudo)
	return b.String()
}

// FormatNodes writes nodes as a nodes file that ParseNodes reads back.
func FormatNodes(nodes []Node) string {
	var b strings.Builder
	for _, n := range nodes {
		b.WriteString(n.format())
		b.WriteByte('\n')
	}
	return b.String()
}

// ReadNodesFile reads the nodes file a test's --nodes-file flag names and
// checks it holds lo to hi nodes; test names the test in the error, as
// in "--nodes-file F: 12 nodes: etcd's test takes 1 to 9".
func ReadNodesFile(file string, lo, hi int, test string) ([]Node, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("--nodes-file: %w", err)
	}
	defer f.Close()
	nodes, err := ParseNodes(f)
	if err != nil {
		return nil, fmt.Errorf("--nodes-file %s: %w", file, err)
	}
	if len(nodes) < lo || len(nodes) > hi {
		return nil, fmt.Errorf("--nodes-file %s: %d nodes: %s takes %d to %d", file, len(nodes), test, lo, hi)
	}
	return nodes, nil
}
