package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ipfence/ipfence/capture/provider/aws/ec2sim"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/internal/simfault"
)

// shutdownGrace bounds how long cloudsim waits for calls in flight after a
// signal before it exits anyway.
const shutdownGrace = 5 * time.Second

func runCloudsim(args []string, stdout, stderr io.Writer) int {
	fs, level := cli.FlagSet("cloudsim", "cloudsim [--dialect ec2|arm|oci] [--latency none|realistic] [--listen ADDR] --nics ID,ID,... [--subnet CIDR] [--state DIR] [--seed N] [--cert FILE] [--public-key KEYID=FILE]", stderr)
	dialect := fs.String("dialect", "ec2", "API to serve: ec2 (the EC2 Query API over http), arm (Azure Resource Manager's NIC API\nand a Microsoft Entra ID token endpoint), or oci (OCI Networking's private IP and VNIC API);\narm and oci over https with a self-signed certificate")
	certFile := fs.String("cert", "", "arm, oci: file to write the certificate (PEM) to, for clients to trust (default: a new\ntemporary file, removed on exit); its path is the second line on stdout")
	var pubKeys []string
	fs.Func("public-key", "oci: KEYID=FILE, an API key's id (tenancy/user/fingerprint) and its RSA public key (PEM);\nthe simulator then verifies every request's signature and refuses other signers\n(repeat for more keys; without it only the signature's shape is checked)", func(v string) error {
		pubKeys = append(pubKeys, v)
		return nil
	})
	listen := fs.String("listen", "127.0.0.1:0", "address to serve the simulated API and the admin API on (port 0: any free port)")
	nics := fs.String("nics", "", "comma-separated NIC ids, such as eni-a,eni-b,eni-c\n(may be left out when --state holds a saved model)")
	subnet := fs.String("subnet", "", "IPv4 subnet of the NICs: ec2 /16 to /28, arm /29 or larger, oci /16 to /30 (default 10.0.0.0/24, or the saved model's)")
	stateDir := fs.String("state", "", "directory to save the model in after every change, and to load it from on start")
	seed := fs.Uint64("seed", 1, "seed of the random numbers that decide which calls an injected error rate fails\nand of the latency profile's jitter")
	latency := fs.String("latency", simfault.LatencyRealistic, "the cloud's own pace, under any injected fault: realistic (each call waits what the\ndialect's cloud is published or observed to take, reads less than writes, and a change\nsettles as late; jittered by --seed) or none (answers at once)")
	pos, code, ok := cli.Parse(fs, level, args, stderr)
	if !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipfence-verify cloudsim: "+format+"\n", a...)
		return cli.ExitError
	}
	if len(pos) > 0 {
		return usageErr("unexpected argument %q", pos[0])
	}
	pace, err := latencyProfile(*dialect, *latency)
	if err != nil {
		return usageErr("%v", err)
	}
	if len(pubKeys) > 0 && *dialect != "oci" {
		return usageErr("--public-key: only for --dialect oci (the API that requests sign with a key)")
	}
	switch *dialect {
	case "ec2":
		if *certFile != "" {
			return usageErr("--cert: only for --dialect arm or oci (the ec2 dialect serves http)")
		}
	case "arm", "oci":
		if *stateDir != "" {
			return usageErr("--state: the %s dialect keeps its model in memory only", *dialect)
		}
		f := tlsFlags{listen: *listen, nics: *nics, subnet: *subnet, seed: *seed, cert: *certFile, latency: pace}
		if *dialect == "oci" {
			return runOCISim(f, pubKeys, stdout, usageErr)
		}
		return runARMSim(f, stdout, usageErr)
	default:
		return usageErr("--dialect: %q is not ec2, arm or oci", *dialect)
	}
	c := ec2sim.Config{StateDir: *stateDir, Seed: *seed, Logger: slog.Default(), Latency: pace}
	if *nics != "" {
		c.NICs = strings.Split(*nics, ",")
	}
	if *subnet != "" {
		p, err := netip.ParsePrefix(*subnet)
		if err != nil {
			return usageErr("--subnet: %q is not a prefix such as 10.0.0.0/24", *subnet)
		}
		c.Subnet = p
	}
	sim, err := ec2sim.New(c)
	if err != nil {
		var ce *ec2sim.ConfigError
		if errors.As(err, &ce) {
			flagName := map[string]string{"NICs": "--nics", "Subnet": "--subnet", "StateDir": "--state"}[ce.Field]
			return usageErr("%s: %v", flagName, ce.Err)
		}
		return usageErr("%v", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return usageErr("--listen: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{
		Handler: sim,
		// Calls held by a pause or a latency end with the signal, so
		// that shutting down never waits for a resume.
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	slog.Info("cloudsim ready", "address", ln.Addr().String(), "nics", len(sim.NICs()), "state", *stateDir, "seed", *seed, "latency", pace.Name)

	return serveUntilSignal(ctx, srv, served, usageErr)
}

// serveUntilSignal waits until the server fails (a usage error) or ctx
// ends (SIGINT or SIGTERM), then lets calls in flight finish for up to
// shutdownGrace and exits valid.
func serveUntilSignal(ctx context.Context, srv *http.Server, served <-chan error, usageErr func(string, ...any) int) int {
	select {
	case err := <-served:
		return usageErr("serving: %v", err)
	case <-ctx.Done():
	}
	slog.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		slog.Warn("shutdown", "error", err)
	}
	return cli.ExitValid
}

// tlsFlags are the cloudsim flags the dialects served over TLS read.
type tlsFlags struct {
	listen, nics, subnet, cert string
	seed                       uint64
	latency                    simfault.Profile
}

// latencyProfile reads --latency for the dialect (checked before).
func latencyProfile(dialect, name string) (simfault.Profile, error) {
	var p simfault.Profile
	var err error
	switch dialect {
	case "arm":
		p, err = armsim.LatencyProfile(name)
	case "oci":
		p, err = ocisim.LatencyProfile(name)
	default:
		p, err = ec2sim.LatencyProfile(name)
	}
	if err != nil {
		return p, fmt.Errorf("--latency: %q is not none or realistic", name)
	}
	return p, nil
}

// prefix reads --subnet (nil: the dialect's default).
func (f tlsFlags) prefix() (netip.Prefix, error) {
	if f.subnet == "" {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(f.subnet)
	if err != nil {
		return p, fmt.Errorf("--subnet: %q is not a prefix such as 10.0.0.0/24", f.subnet)
	}
	return p, nil
}

// runARMSim serves armsim over TLS: ARM's bearer tokens need https, and
// so does azidentity's authority host, which is the simulator too.
func runARMSim(f tlsFlags, stdout io.Writer, usageErr func(string, ...any) int) int {
	c := armsim.Config{Seed: f.seed, Logger: slog.Default(), Latency: f.latency}
	if f.nics == "" {
		return usageErr("--nics: the arm dialect needs the NIC names, such as nic-a,nic-b")
	}
	c.NICs = strings.Split(f.nics, ",")
	p, err := f.prefix()
	if err != nil {
		return usageErr("%v", err)
	}
	c.Subnet = p
	sim, err := armsim.New(c)
	if err != nil {
		return usageErr("%v", err)
	}
	return serveTLS(f, "arm", sim, stdout, usageErr, "latency", f.latency.Name, "nics", len(c.NICs),
		"subscription", sim.SubscriptionID(), "resource_group", sim.ResourceGroup())
}

// runOCISim serves ocisim over TLS, as OCI's endpoints are: the SDK signs
// requests for any scheme, but a node trusts its endpoint's certificate
// (OCI_DEFAULT_CERTS_PATH) as it would the cloud's.
func runOCISim(f tlsFlags, pubKeys []string, stdout io.Writer, usageErr func(string, ...any) int) int {
	c := ocisim.Config{Seed: f.seed, Latency: f.latency}
	if f.nics == "" {
		return usageErr("--nics: the oci dialect needs the VNIC OCIDs, such as ocid1.vnic.oc1.iad.a,ocid1.vnic.oc1.iad.b")
	}
	c.VNICs = strings.Split(f.nics, ",")
	p, err := f.prefix()
	if err != nil {
		return usageErr("%v", err)
	}
	c.Subnet = p
	for _, v := range pubKeys {
		id, key, err := readPublicKey(v)
		if err != nil {
			return usageErr("--public-key %s: %v", clipArg(v), err)
		}
		if c.Keys == nil {
			c.Keys = map[string]*rsa.PublicKey{}
		}
		if c.Keys[id] != nil {
			return usageErr("--public-key: key id %q appears twice", id)
		}
		c.Keys[id] = key
	}
	sim, err := ocisim.New(c)
	if err != nil {
		return usageErr("%v", err)
	}
	return serveTLS(f, "oci", sim, stdout, usageErr, "latency", f.latency.Name, "vnics", len(c.VNICs), "subnet_id", sim.SubnetID(),
		"subnet", sim.Subnet().String(), "verified_keys", len(c.Keys))
}

// readPublicKey reads a --public-key value, KEYID=FILE: an OCI API key's
// id and the PEM file of its RSA public key (PKIX, as `openssl rsa
// -pubout` writes it, or PKCS #1).
func readPublicKey(v string) (string, *rsa.PublicKey, error) {
	id, path, ok := strings.Cut(v, "=")
	if !ok || id == "" || path == "" {
		return "", nil, errors.New("want KEYID=FILE, such as ocid1.tenancy.oc1..t/ocid1.user.oc1..u/aa:bb:…=key.pub.pem")
	}
	if strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == '"' || r == 0x7f }) {
		return "", nil, fmt.Errorf("key id %q holds spaces, quotes or control characters, which no OCI key id does", clipArg(id))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return "", nil, fmt.Errorf("%s holds no PEM block", path)
	}
	var pub any
	switch blk.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(blk.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(blk.Bytes)
	default:
		return "", nil, fmt.Errorf("%s holds a %q block, not a public key (PUBLIC KEY or RSA PUBLIC KEY); never give the simulator a private key", path, blk.Type)
	}
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	key, ok := pub.(*rsa.PublicKey)
	if !ok {
		return "", nil, fmt.Errorf("%s holds a %T, not an RSA key (OCI signs with RSA)", path, pub)
	}
	return id, key, nil
}

// clipArg shortens a flag value echoed in an error.
func clipArg(v string) string {
	if len(v) > 120 {
		return v[:120] + "…"
	}
	return v
}

// serveTLS serves a dialect's handler over TLS on --listen with a
// certificate made at start for the loopback names, written where
// clients can trust it (--cert, or a temporary file removed on exit),
// until SIGINT or SIGTERM.
func serveTLS(f tlsFlags, dialect string, handler http.Handler, stdout io.Writer, usageErr func(string, ...any) int, attrs ...any) int {
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return usageErr("--listen: %v", err)
	}
	defer ln.Close()
	cert, der, err := selfSigned(ln.Addr(), dialect)
	if err != nil {
		return usageErr("certificate: %v", err)
	}
	path := f.cert
	if path == "" {
		dir, err := os.MkdirTemp("", "ipfence-"+dialect+"sim-")
		if err != nil {
			return usageErr("certificate: %v", err)
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "cert.pem")
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return usageErr("--cert: %v", err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{
		Handler: handler,
		// As the EC2 dialect's: calls held by a pause or a latency end
		// with the signal.
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	// The first line is the URL, as the EC2 dialect's; the second the
	// certificate to trust.
	fmt.Fprintf(stdout, "listening on https://%s\ncertificate %s\n", ln.Addr(), path)
	slog.Info("cloudsim ready", append([]any{"dialect", dialect, "address", ln.Addr().String(), "certificate", path, "seed", f.seed}, attrs...)...)

	return serveUntilSignal(ctx, srv, served, usageErr)
}

// selfSigned makes a certificate for the listener's address and the
// loopback names, valid for a week (a simulator lives as long as a test
// run), self-signed so that it is its own root.
func selfSigned(addr net.Addr, dialect string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ta, ok := addr.(*net.TCPAddr); ok && !ta.IP.IsUnspecified() && !ta.IP.IsLoopback() {
		ips = append(ips, ta.IP)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "ipfence-verify cloudsim " + dialect},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
		DNSNames: []string{"localhost"}, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, der, nil
}
