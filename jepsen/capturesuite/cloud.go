package capturesuite

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/oracle/oci-go-sdk/v65/common"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/aws"
	"github.com/ipfence/ipfence/capture/provider/azure"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
	"github.com/ipfence/ipfence/capture/provider/oci"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
	"github.com/ipfence/ipfence/internal/simfault"
)

// Clouds are the simulated clouds a run's nodes may capture on
// (Options.Provider), the default first: AWS on the EC2 dialect of the
// simulator, Azure on its ARM dialect, OCI on its OCI dialect. Each node
// runs the real driver of its cloud on the vendor's SDK, and the clients
// read through the same driver; what differs between the clouds is kept
// in this file.
var Clouds = []string{"aws", "azure", "oci"}

// CloudAlias is another name of "aws", the name --provider had before
// there was more than one cloud.
const CloudAlias = "cloud"

// The identities the nodes and the clients present to the simulators.
// None is a secret anyone else holds: the simulators accept any tenant
// and client (ARM) and verify signatures with the key the run makes
// (OCI).
const (
	azureTenant = "0a1b2c3d-0000-4000-8000-00000000cafe"
	ociTenancy  = "ocid1.tenancy.oc1..ipfencetest"
	ociUser     = "ocid1.user.oc1..ipfencetest"
	ociRegion   = "us-ashburn-1"
	ociProfile  = "IPFENCE_TEST"
	simSubnet   = "10.0.0.0/16"
	certFile    = "cloudsim.pem"
	// ociHarnessUser signs the clients' reads.
	ociHarnessUser = "ocid1.user.oc1..ipfenceharness"
	ociConfigFile  = "oci-config"
)

// nicOf is node's NIC at the simulator, as its cloud names one: an ENI
// id, a NIC name, a VNIC OCID.
func nicOf(cloud, node string) string {
	switch cloud {
	case "azure":
		return "nic-" + node
	case "oci":
		return "ocid1.vnic.oc1.iad." + node
	}
	return "eni-" + node
}

// nodeOf maps a NIC of any cloud back to its node (the part after the
// last '-' or '.': node names have neither); "" for none.
func nodeOf(nicID string) string {
	return nicID[strings.LastIndexAny(nicID, "-.")+1:]
}

// nic is node's NIC at the cluster's simulator.
func (c *cluster) nic(node string) string { return nicOf(c.cloud, node) }

// prepareCloud makes what the cloud's simulator and nodes need before the
// simulator starts (the OCI API key and config file), and says why the
// run cannot be made on this machine.
func (c *cluster) prepareCloud() error {
	if c.cloud != "oci" {
		return nil
	}
	// The SDK reads ~/.oci/config, when there is one, before
	// OCI_CONFIG_FILE (as the driver's profile lookup does): the nodes
	// would look for the run's profile in someone's real file.
	if u, err := user.Current(); err == nil {
		if p := filepath.Join(u.HomeDir, ".oci", "config"); fileExists(p) {
			return fmt.Errorf("--provider oci: %s exists, and the OCI SDK reads it before the OCI_CONFIG_FILE the test writes; run as a user without one", p)
		}
	}
	// The nodes' key, in the config file they read, and the clients'
	// own, so that the simulator counts the nodes' calls apart.
	var err error
	if c.ociNodes, err = newOCIKey(c.dir, ociUser, "oci-key"); err != nil {
		return err
	}
	if c.ociHarness, err = newOCIKey(c.dir, ociHarnessUser, "oci-harness-key"); err != nil {
		return err
	}
	cfg := fmt.Sprintf("[%s]\nuser=%s\nfingerprint=%s\ntenancy=%s\nregion=%s\nkey_file=%s\n",
		ociProfile, ociUser, c.ociNodes.fingerprint, ociTenancy, ociRegion, c.ociNodes.file)
	return os.WriteFile(filepath.Join(c.dir, ociConfigFile), []byte(cfg), 0o600)
}

// ociKey is an OCI API key the run made: its user, the private key (PEM,
// in file), its fingerprint, and the public key's file.
type ociKey struct {
	user, pem, fingerprint, file, pubFile string
}

// id is the key id OCI's signatures name.
func (k ociKey) id() string { return ociTenancy + "/" + k.user + "/" + k.fingerprint }

// newOCIKey makes a 2048-bit RSA key (as OCI asks of an API key) and
// writes it as name.pem (private, 0600) and name.pub.pem in dir.
func newOCIKey(dir, user, name string) (ociKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return ociKey{}, err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return ociKey{}, err
	}
	k := ociKey{user: user, fingerprint: fingerprint(der), file: filepath.Join(dir, name+".pem"), pubFile: filepath.Join(dir, name+".pub.pem"),
		pem: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))}
	if err := os.WriteFile(k.file, []byte(k.pem), 0o600); err != nil {
		return ociKey{}, err
	}
	return k, os.WriteFile(k.pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}

// fingerprint is an API key's fingerprint as OCI shows it: the MD5 of
// the public key's DER, in colon-separated hex.
func fingerprint(der []byte) string {
	sum := md5.Sum(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02x", b)
	}
	return strings.Join(parts, ":")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// simArgs are the simulator's command line for the cloud.
func (c *cluster) simArgs(listen string) []string {
	nics := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		nics[i] = c.nic(n)
	}
	args := []string{"cloudsim", "--listen", listen, "--nics", strings.Join(nics, ","), "--subnet", simSubnet}
	// The test's default is the simulator's pace before there were
	// profiles, not cloudsim's own (realistic): the README's numbers and
	// CI's times are made at it, with cloudsim's default seed. A
	// realistic run's simulator takes the run's seed, for its jitter and
	// its injected errors' draws alike.
	switch c.latency {
	case "", simfault.LatencyNone:
		args = append(args, "--latency", simfault.LatencyNone)
	default:
		args = append(args, "--latency", c.latency, "--seed", strconv.FormatUint(c.seed, 10))
	}
	switch c.cloud {
	case "azure":
		args = append(args, "--dialect", "arm", "--cert", filepath.Join(c.dir, certFile))
	case "oci":
		args = append(args, "--dialect", "oci", "--cert", filepath.Join(c.dir, certFile),
			"--public-key", c.ociNodes.id()+"="+c.ociNodes.pubFile, "--public-key", c.ociHarness.id()+"="+c.ociHarness.pubFile)
	}
	return args
}

// cloudStarted is called once the simulator serves: it makes the client
// that trusts a TLS simulator's certificate, reads what the nodes'
// configuration must name (OCI's subnet OCID), and sets the environment
// the nodes' SDKs find their credentials and trust in.
func (c *cluster) cloudStarted(ctx context.Context) error {
	c.admin = http.DefaultClient
	if c.cloud == "aws" {
		return nil
	}
	pemCert, err := os.ReadFile(filepath.Join(c.dir, certFile))
	if err != nil {
		return fmt.Errorf("the simulator's certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCert) {
		return fmt.Errorf("%s holds no certificate", filepath.Join(c.dir, certFile))
	}
	c.admin = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 16}}
	cert := filepath.Join(c.dir, certFile)
	// The simulator is on this machine (in namespaces, at the host's
	// address there, which a proxy setting would send elsewhere).
	c.env = []string{"HTTPS_PROXY=", "https_proxy=", "HTTP_PROXY=", "http_proxy=", "ALL_PROXY=", "all_proxy="}
	switch c.cloud {
	case "azure":
		c.env = append(c.env,
			// Only the environment credential: the rest of azidentity's
			// default chain (managed identity's IMDS probe above all)
			// is never built, so no request leaves the machine.
			"AZURE_TOKEN_CREDENTIALS=EnvironmentCredential",
			"AZURE_TENANT_ID="+azureTenant, "AZURE_CLIENT_SECRET=not-a-real-secret",
			"AZURE_CLIENT_CERTIFICATE_PATH=", "AZURE_USERNAME=", "AZURE_PASSWORD=", "AZURE_FEDERATED_TOKEN_FILE=",
			"AZURE_REGIONAL_AUTHORITY_NAME=", "IDENTITY_ENDPOINT=", "MSI_ENDPOINT=",
			// The simulator's certificate is the nodes' only trust:
			// nothing else is reached over TLS.
			"SSL_CERT_FILE="+cert, "SSL_CERT_DIR="+c.dir,
		)
	case "oci":
		var st struct {
			SubnetID string `json:"subnetId"`
		}
		if err := c.simGet(ctx, "/admin/state", &st); err != nil {
			return err
		}
		if st.SubnetID == "" {
			return errors.New("the OCI simulator's state names no subnet")
		}
		c.ociSubnet = st.SubnetID
		// OCI_DEFAULT_CERTS_PATH is the SDK's own CA bundle: it trusts
		// the simulator for the SDK's client alone.
		c.env = append(c.env, "OCI_CONFIG_FILE="+filepath.Join(c.dir, ociConfigFile), "OCI_DEFAULT_CERTS_PATH="+cert)
	}
	return nil
}

// nodeEnv is node n's environment: the harness's with the cloud's
// additions (later entries win), and, on Azure, a client id of its own,
// so that each node is its own principal to ARM's throttle as each VM's
// identity would be.
func (c *cluster) nodeEnv(n string) []string {
	if len(c.env) == 0 {
		return nil
	}
	env := append(os.Environ(), c.env...)
	if c.cloud == "azure" {
		env = append(env, "AZURE_CLIENT_ID=ipfence-"+n)
	}
	return env
}

// providerYAML is the nodes' provider section (the provider is named
// sim): no credential is in it, the SDKs' chains find them.
func (c *cluster) providerYAML() string {
	switch c.cloud {
	case "azure":
		return fmt.Sprintf("  sim:\n    type: azure\n    endpoint: %s\n    azure: {subscription: %s, resource_group: %s, authority_host: %q}\n",
			c.sim, armsim.DefaultSubscription, armsim.DefaultResourceGroup, c.sim+"/")
	case "oci":
		return fmt.Sprintf("  sim:\n    type: oci\n    endpoint: %s\n    region: %s\n    oci: {subnet: %s, auth: config_file, profile: %s}\n",
			c.sim, ociRegion, c.ociSubnet, ociProfile)
	}
	return fmt.Sprintf("  sim:\n    type: cloudsim\n    endpoint: %s\n", c.sim)
}

// reader is what a client reads the provider through: the driver the
// nodes use.
type reader interface {
	Describe(ctx context.Context, addr netip.Addr) (provider.Observation, error)
}

// openReader makes a client's driver for the cloud, with one attempt per
// read: a read that fails changed nothing and is recorded as fail;
// retrying would only hide the provider's faults. name tells the client
// apart (its Azure principal).
func (c *cluster) openReader(ctx context.Context, name string) (reader, error) {
	switch c.cloud {
	case "azure":
		cred, err := azidentity.NewClientSecretCredential(azureTenant, "ipfence-harness-"+name, "not-a-real-secret",
			&azidentity.ClientSecretCredentialOptions{
				ClientOptions:            azcore.ClientOptions{Cloud: azcloud.Configuration{ActiveDirectoryAuthorityHost: c.sim + "/"}, Transport: c.admin},
				DisableInstanceDiscovery: true,
			})
		if err != nil {
			return nil, err
		}
		// ReadRetries below zero: no retry (azcore's convention).
		return azure.New(azure.Options{SubscriptionID: armsim.DefaultSubscription, ResourceGroup: armsim.DefaultResourceGroup,
			Credential: cred, Endpoint: c.sim, Transport: c.admin, ReadRetries: -1})
	case "oci":
		return oci.New(oci.Options{SubnetID: c.ociSubnet, Host: c.sim, HTTPClient: c.admin, ReadAttempts: 1,
			ConfigurationProvider: common.NewRawConfigurationProvider(ociTenancy, c.ociHarness.user, ociRegion, c.ociHarness.fingerprint, c.ociHarness.pem, nil)})
	}
	return aws.New(ctx, aws.Options{
		Region: "us-east-1", Endpoint: c.sim,
		Credentials:  credentials.NewStaticCredentialsProvider("harness", "harness", ""),
		ReadAttempts: 1,
	})
}

// placement reads where the simulator's data plane has each secondary
// address: address → node. nil and the error when it does not answer.
func (c *cluster) placement(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	switch c.cloud {
	case "azure":
		var nics []struct {
			Name    string   `json:"name"`
			Visible []string `json:"visibleIps"`
		}
		if err := c.simGet(ctx, "/admin/state", &nics); err != nil {
			return nil, err
		}
		for _, n := range nics {
			for _, a := range n.Visible {
				out[a] = nodeOf(n.Name)
			}
		}
	case "oci":
		var st struct {
			PrivateIPs []struct {
				Address string `json:"address"`
				VNIC    string `json:"vnic"`
				Primary bool   `json:"primary"`
			} `json:"privateIps"`
		}
		if err := c.simGet(ctx, "/admin/state", &st); err != nil {
			return nil, err
		}
		for _, p := range st.PrivateIPs {
			if !p.Primary {
				out[p.Address] = nodeOf(p.VNIC)
			}
		}
	default:
		var st struct {
			NICs []struct {
				ID        string   `json:"id"`
				Secondary []string `json:"secondaryIps"`
			} `json:"nics"`
		}
		if err := c.simGet(ctx, "/admin/state", &st); err != nil {
			return nil, err
		}
		for _, n := range st.NICs {
			for _, a := range n.Secondary {
				out[a] = nodeOf(n.ID)
			}
		}
	}
	return out, nil
}

// cloudFaults are what the provider nemesis does, by kind, in each
// dialect's admin API: errors (30 % unavailable, 10 % throttled), every
// call 400 ms late, changes visible 1 s late.
var cloudFaults = map[string]map[string]any{
	"aws": {
		"errors":      map[string]any{"errors": map[string]any{"*": []any{map[string]any{"code": "Unavailable", "rate": 0.3}, map[string]any{"code": "RequestLimitExceeded", "rate": 0.1}}}},
		"latency":     map[string]any{"latency": "400ms"},
		"remap-delay": map[string]any{"remapDelay": "1s"},
	},
	"azure": {
		"errors":      map[string]any{"errors": map[string]any{"*": []any{map[string]any{"code": armsim.CodeServiceUnavailable, "rate": 0.3}, map[string]any{"code": armsim.CodeTooManyRequests, "rate": 0.1}}}},
		"latency":     map[string]any{"latency": "400ms"},
		"remap-delay": map[string]any{"delay": "1s"},
	},
	"oci": {
		"errors":      map[string]any{"errors": map[string]any{"*": []any{map[string]any{"code": ocisim.CodeServiceUnavailable, "rate": 0.3}, map[string]any{"code": ocisim.CodeTooManyRequests, "rate": 0.1}}}},
		"latency":     map[string]any{"latency": "400ms"},
		"remap-delay": map[string]any{"remapDelay": "1s"},
	},
}

// writeOps are the operations of each dialect that change something.
var writeOps = map[string]bool{
	armsim.OpPut:             true,
	ocisim.OpUpdatePrivateIp: true, ocisim.OpCreatePrivateIp: true, ocisim.OpDeletePrivateIp: true, ocisim.OpUpdateVnic: true,
}

// nodeCalls reads the simulator's count of the nodes' API calls, by
// operation, summed over the nodes (the clients' reads, under their own
// principal or key, left out); counted is false where the dialect does
// not tell callers apart (EC2's).
func (c *cluster) nodeCalls(ctx context.Context) (calls map[string]uint64, counted bool, err error) {
	if c.cloud == "aws" {
		return nil, false, nil
	}
	var by map[string]map[string]uint64
	if err := c.simGet(ctx, "/admin/calls", &by); err != nil {
		return nil, false, err
	}
	nodes := map[string]bool{}
	for _, n := range c.nodes {
		if c.cloud == "azure" {
			nodes["ipfence-"+n] = true
		}
	}
	if c.cloud == "oci" {
		nodes[c.ociNodes.id()] = true
	}
	calls = map[string]uint64{}
	for caller, ops := range by {
		if nodes[caller] {
			for op, n := range ops {
				calls[op] += n
			}
		}
	}
	return calls, true, nil
}
