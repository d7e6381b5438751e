package capturesuite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The nodes' lines of stale actions refused by the cloud are counted once
// per action however often its row failed, and a batch's error counts only
// for the rows it names.
func TestRefusedByCloud(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := `refused by the cloud: a newer epoch acted on the address`
	n1 := strings.Join([]string{
		`time=t level=WARN msg="action failed" node=n1 kind=assign-secondary-ip address=10.0.1.10 target=nic-n1 epoch=3 holder=n1 key=k err="azure: 10.0.1.10 at epoch 3 (the record holds 4) on nic-n1: ` + stale + `"`,
		// The same row, retried.
		`time=t level=WARN msg="action failed" node=n1 kind=assign-secondary-ip address=10.0.1.10 target=nic-n1 epoch=3 holder=n1 key=k err="azure: 10.0.1.10 at epoch 3 (the record holds 4) on nic-n1: ` + stale + `"`,
		// A row of the same batch that the error does not name.
		`time=t level=WARN msg="action failed" node=n1 kind=assign-secondary-ip address=10.0.1.11 target=nic-n1 epoch=5 holder=n1 key=k2 err="azure: 10.0.1.10 at epoch 3 (the record holds 4) on nic-n1: ` + stale + `"`,
		// Another failure.
		`time=t level=WARN msg="action failed" node=n1 kind=unassign-secondary-ip address=10.0.1.12 target=nic-n1 epoch=2 holder=n2 key=k3 err="azure: 10.0.1.12 at epoch 2 : request throttled"`,
		`time=t level=INFO msg="action executed" node=n1 kind=assign-secondary-ip address=10.0.1.13 target=nic-n1 epoch=7 holder=n1 key=k4 observed="on nic-n1"`,
	}, "\n")
	n2 := `time=t level=WARN msg="action failed" node=n2 kind=unassign-secondary-ip address=10.0.1.10 target=vnic-n2 epoch=3 holder=n1 key=k5 err="oci: release 10.0.1.10 at epoch 3 (the private IP's record holds 4) on vnic-n2: ` + stale + `"`
	for name, text := range map[string]string{"n1.log": n1, "n2.log": n2, "cloudsim.log": n2} {
		if err := os.WriteFile(filepath.Join(dir, "logs", name), []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, examples, err := refusedByCloud(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"n1: assign-secondary-ip 10.0.1.10 on nic-n1 at epoch 3",
		"n2: unassign-secondary-ip 10.0.1.10 on vnic-n2 at epoch 3",
	}
	if n != 2 || strings.Join(examples, "|") != strings.Join(want, "|") {
		t.Fatalf("refused %d: %q, want %q", n, examples, want)
	}
}
