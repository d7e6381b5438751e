package oci_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"net/netip"

	"github.com/oracle/oci-go-sdk/v65/common"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/oci"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
)

// A driver on the simulator: the SDK signs with a key made here (in
// production the SDK's chain finds the config file or the instance
// principal), the simulator verifies it, and a seize moves the address
// with one conditional UpdatePrivateIp.
func Example() {
	k, _ := rsa.GenerateKey(rand.Reader, 1024)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	const keyID = "ocid1.tenancy.oc1..t/ocid1.user.oc1..u/00:11"
	sim, _ := ocisim.New(ocisim.Config{
		VNICs: []string{"ocid1.vnic.oc1.iad.a", "ocid1.vnic.oc1.iad.b"},
		Keys:  map[string]*rsa.PublicKey{keyID: &k.PublicKey},
	})
	srv := httptest.NewServer(sim)
	defer srv.Close()

	drv, err := oci.New(oci.Options{
		SubnetID: sim.SubnetID(), Host: srv.URL,
		ConfigurationProvider: common.NewRawConfigurationProvider("ocid1.tenancy.oc1..t", "ocid1.user.oc1..u", "us-ashburn-1", "00:11", pemKey, nil),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	a := netip.MustParseAddr("10.0.0.10")
	_ = drv.Assign(ctx, provider.Request{NIC: "ocid1.vnic.oc1.iad.a", Address: a, Epoch: 1, IdempotencyKey: "k1"}, false)
	_ = drv.Assign(ctx, provider.Request{NIC: "ocid1.vnic.oc1.iad.b", Address: a, Epoch: 2, IdempotencyKey: "k2"}, true)
	obs, _ := drv.Describe(ctx, a)
	fmt.Println(obs.NIC)
	for _, m := range sim.Mutations() {
		fmt.Println(m.Call, m.NIC, "from", m.From, "epoch", m.Epoch)
	}
	// Output:
	// ocid1.vnic.oc1.iad.b
	// assign-secondary-ip ocid1.vnic.oc1.iad.a from  epoch 1
	// assign-secondary-ip ocid1.vnic.oc1.iad.b from ocid1.vnic.oc1.iad.a epoch 2
}
