package oci_test

import (
	"os"
	osuser "os/user"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider/oci"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
)

// A named profile is read from the file OCI_CONFIG_FILE names, as the
// DEFAULT profile is: the SDK's profile provider, given no path, would
// read ~/.oci/config alone and find no credentials. The driver signs with
// the profile's key, which the simulator verifies.
func TestProfileFromOCIConfigFile(t *testing.T) {
	if u, err := osuser.Current(); err == nil {
		if _, err := os.Stat(filepath.Join(u.HomeDir, ".oci", "config")); err == nil {
			t.Skipf("skipped: %s/.oci/config exists, and the SDK prefers it to OCI_CONFIG_FILE", u.HomeDir)
		}
	}
	e := newEnv(t, []string{"vnic-a", "vnic-b"})
	_, pemKey := testKey(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(keyFile, []byte(pemKey), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "config")
	// No DEFAULT profile: only the named one holds credentials.
	if err := os.WriteFile(file, []byte("[IPFENCE]\nuser="+user+"\nfingerprint="+fingerprint+"\ntenancy="+tenancy+"\nregion=us-ashburn-1\nkey_file="+keyFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OCI_CONFIG_FILE", file)
	drv, err := oci.New(oci.Options{SubnetID: e.sim.SubnetID(), Host: e.srv.URL, HTTPClient: e.srv.Client(), Profile: "IPFENCE", ReadAttempts: 1})
	if err != nil {
		t.Fatalf("a driver on profile IPFENCE of OCI_CONFIG_FILE: %v", err)
	}
	if err := drv.Assign(t.Context(), req("vnic-b", 1), false); err != nil {
		t.Fatalf("an acquire signed with the profile's key: %v", err)
	}
	if h := e.sim.Holder(ip); h != "vnic-b" {
		t.Fatalf("%s is on %q, want vnic-b", ip, h)
	}
}

// A move whose private IP its holder deletes between the mover's read and
// its write (404 to the UpdatePrivateIp) makes the address on the new VNIC
// at once with a create, at the move's epoch, rather than failing until
// the next reconcile with the address on no VNIC.
func TestMoveOfAReleasedPrivateIPCreatesIt(t *testing.T) {
	e := newEnv(t, []string{"vnic-a", "vnic-b"})
	_, pemKey := testKey(t)
	mover := e.driver(t, pemKey)
	if err := e.drv.Assign(t.Context(), req("vnic-a", 1), false); err != nil {
		t.Fatal(err)
	}
	// The move's write waits at the simulator, after the mover's read,
	// while the holder releases.
	if err := e.sim.SetFaults(ocisim.Faults{OperationLatency: map[string]ocisim.Duration{ocisim.OpUpdatePrivateIp: ocisim.Duration(2 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mover.Assign(t.Context(), req("vnic-b", 2), true) }()
	for e.cnt.count(ocisim.OpUpdatePrivateIp) == 0 {
		select {
		case err := <-done:
			t.Fatalf("the move returned before its write arrived: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	if err := e.drv.Unassign(t.Context(), req("vnic-a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a move whose private IP was released meanwhile: %v", err)
	}
	if h := e.sim.Holder(ip); h != "vnic-b" {
		t.Fatalf("%s is on %q, want vnic-b", ip, h)
	}
	ms := e.sim.Mutations()
	if len(ms) != 3 || ms[1].Call != capture.Unassign || ms[1].NIC != "vnic-a" ||
		ms[2].Call != capture.Assign || ms[2].NIC != "vnic-b" || ms[2].From != "" || ms[2].Epoch != 2 {
		t.Fatalf("record %+v, want the assign to vnic-a, its release, then the assign to vnic-b at epoch 2", ms)
	}
	if n := e.cnt.count(ocisim.OpCreatePrivateIp); n != 2 {
		t.Fatalf("%d creates, want 2 (the first holder's, the mover's)", n)
	}
}
