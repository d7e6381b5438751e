package control

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseNodes(t *testing.T) {
	file := `# the lab
n1 address=10.0.0.11 user=admin key=~/.ssh/id_ed25519 sudo=true

	n2	address=db2.example.net port=2222   # comments only at line start, so this is a field
`
	_, err := ParseNodes(strings.NewReader(file))
	if err == nil || !strings.Contains(err.Error(), `line 4, node "n2", field #: want key=value`) {
		t.Fatalf("trailing comment: %v", err)
	}
	file = "# the lab\nn1 address=10.0.0.11 user=admin key=~/.ssh/id_ed25519 sudo=true\n\n\tn2\taddress=db2.example.net port=2222\nn3 address=fd00::3 sudo=no\n"
	got, err := ParseNodes(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{
		{Name: "n1", Address: "10.0.0.11", Port: 22, User: "admin", Key: "~/.ssh/id_ed25519", Sudo: true, Line: 2},
		{Name: "n2", Address: "db2.example.net", Port: 2222, User: "root", Line: 4},
		{Name: "n3", Address: "fd00::3", Port: 22, User: "root", Line: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	again, err := ParseNodes(strings.NewReader(FormatNodes(got)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range again {
		again[i].Line = want[i].Line
	}
	if !reflect.DeepEqual(again, want) {
		t.Fatalf("formatted and read again: %+v", again)
	}
}

func TestParseNodesErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"", "no nodes"},
		{"# only a comment\n\n", "no nodes"},
		{"n1\n", `line 1, node "n1", field address: missing`},
		{"address=1.2.3.4\n", "line 1: the line must start with the node's name"},
		{"n/1 address=1.2.3.4\n", `line 1, field name: "n/1"`},
		{"n1 address=1.2.3.4\nn1 address=1.2.3.5\n", `line 2: node "n1" is already on line 1`},
		{"n1 address=1.2.3.4 address=1.2.3.5\n", "field address: given twice"},
		{"n1 address=bad_host!\n", `field address: "bad_host!": want an IP address or a host name`},
		{"n1 address=fe80::1%eth0\n", "field address"},
		{"n1 address=\n", "field address"},
		{"n1 address=1.2.3.4 port=0\n", `field port: "0": want a number from 1 to 65535`},
		{"n1 address=1.2.3.4 port=65536\n", "field port"},
		{"n1 address=1.2.3.4 port=22x\n", "field port"},
		{"n1 address=1.2.3.4 user=1root\n", "field user"},
		{"n1 address=1.2.3.4 user=a;b\n", "field user"},
		{"n1 address=1.2.3.4 key=\n", "field key"},
		{"n1 address=1.2.3.4 sudo=maybe\n", `field sudo: "maybe": want true or false`},
		{"n1 address=1.2.3.4 passwd=x\n", "field passwd: unknown field (known: address, port, user, key, sudo)"},
		{"n1 address=1.2.3.4 22\n", "field 22: want key=value"},
		{"n1 address=1.2.3.4\nn2 address=1.2.3.5 " + strings.Repeat("x", 5000) + "\n", "line 2: longer than 4096 bytes"},
		{strings.Repeat("\n", maxNodesFile+1), "larger than"},
	} {
		_, err := ParseNodes(strings.NewReader(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			name := c.file
			if len(name) > 60 {
				name = name[:60]
			}
			t.Errorf("%q: %v, want %q", name, err, c.want)
		}
	}
	var b strings.Builder
	for i := range maxNodeCount + 1 {
		b.WriteString("n" + itoa(i) + " address=10.0.0.1\n")
	}
	if _, err := ParseNodes(strings.NewReader(b.String())); err == nil || !strings.Contains(err.Error(), "line 257: more than 256 nodes") {
		t.Errorf("too many nodes: %v", err)
	}
}

// FuzzParseNodes: any input gives nodes or an error naming a line or the
// file, never a panic, and the nodes read back from FormatNodes the same.
func FuzzParseNodes(f *testing.F) {
	f.Add("n1 address=10.0.0.11 user=admin key=~/.ssh/id sudo=true\nn2 address=h.example port=2222\n")
	f.Add("# c\n\nn1 address=fd00::1\n")
	f.Add("n1 address=1.2.3.4 port=99999\n")
	f.Add("n1 key=a=b address=x\n")
	f.Add("\xff address=\x00\n")
	f.Fuzz(func(t *testing.T, file string) {
		nodes, err := ParseNodes(strings.NewReader(file))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "nodes file") {
				t.Fatalf("error without the file named: %v", err)
			}
			return
		}
		again, err := ParseNodes(strings.NewReader(FormatNodes(nodes)))
		if err != nil {
			t.Fatalf("formatted nodes do not parse: %v\n%s", err, FormatNodes(nodes))
		}
		if len(again) != len(nodes) {
			t.Fatalf("%d nodes became %d", len(nodes), len(again))
		}
		for i := range nodes {
			again[i].Line = nodes[i].Line
			if again[i] != nodes[i] {
				t.Fatalf("node %+v became %+v", nodes[i], again[i])
			}
		}
	})
}

func TestReadNodesFile(t *testing.T) {
	dir := t.TempDir()
	one := filepath.Join(dir, "one")
	if err := os.WriteFile(one, []byte("n1 address=10.0.0.1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes, err := ReadNodesFile(one, 1, 9, "etcd's test")
	if err != nil || len(nodes) != 1 || nodes[0].Name != "n1" || nodes[0].Address != "10.0.0.1" {
		t.Fatalf("nodes %+v, err %v", nodes, err)
	}
	for _, c := range []struct {
		file, want string
	}{
		{one, "--nodes-file " + one + ": 1 nodes: the capture test takes 2 to 9"},
		{filepath.Join(dir, "absent"), "--nodes-file: open " + filepath.Join(dir, "absent")},
	} {
		if _, err := ReadNodesFile(c.file, 2, 9, "the capture test"); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.file, err, c.want)
		}
	}
}
