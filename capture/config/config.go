package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/policy"
	"github.com/ipfence/ipfence/capture/provider/callbudget"
)

// Node is one node's configuration, checked, with defaults filled in and
// relative paths made absolute.
type Node struct {
	// Name is the node's name, unique in the cluster.
	Name string
	// Listen is the host:port the federation server binds.
	Listen string
	// Advertise is the URL peers reach this node at; by default
	// http://<Listen> (https with TLS).
	Advertise string
	// DataDir is the absolute folder of the node's state.
	DataDir string
	// StatePath is the node's bbolt file: DataDir/state.db.
	StatePath string
	// Peers are the other nodes of the cluster.
	Peers      []Peer
	Federation Federation
	// Providers maps a provider reference, as pools name it, to its
	// provider.
	Providers map[string]Provider
	// Pools come in file order, each with its addresses expanded from
	// ranges in file order and its members as written (neither drained nor
	// stale).
	Pools []capture.Pool
	// Approval is the auto-approval policy; without an approval section it
	// denies everything.
	Approval policy.Policy
	Timing   Timing
	// Authority is the source of the right to capture on premises; zero
	// for cloud-only nodes.
	Authority Authority
	// Path is the absolute path of the configuration file.
	Path string
	// Etcd is the etcd section, for pools on the etcd epoch line; nil
	// without one.
	Etcd *Etcd
	// EtcdPools names the pools on the etcd epoch line (epoch_line:
	// etcd); the others keep theirs in the federation.
	EtcdPools map[string]bool
}

// Peer is another node of the cluster.
type Peer struct {
	Name string
	// URL is where the peer's federation server is reached.
	URL string
}

// Federation is how nodes authenticate each other's requests: exactly one
// of Secret and TLS is set.
type Federation struct {
	// Secret is the HMAC-SHA256 key shared by every node: the secret file's
	// bytes with surrounding whitespace trimmed, used as they are (not
	// decoded from hex or base64).
	Secret []byte
	// TLS is mutual TLS instead of a shared secret.
	TLS *TLS
	// OperatorSecret, when set, is the operator API's own HMAC key
	// (operator_secret_file): the operator API then accepts requests
	// signed with it only, and the federation API never does, so that a
	// holder of the operator's secret (ipfence ctl) cannot forge node
	// events. Under mutual TLS it is required on top of the certificate.
	OperatorSecret []byte
	// MaxBody bounds a request body in bytes.
	MaxBody int64
	// ReplayWindow is how far a signed request's time may be from the
	// receiver's before it is refused as a possible replay.
	ReplayWindow time.Duration
}

// TLS names the files of mutual TLS, as absolute paths. Parse checks only
// that they exist; loading them is the server's job.
type TLS struct {
	CertFile, KeyFile, CAFile string
}

// Provider types.
const (
	// TypeCloudsim is the cloud simulator (ipfence-verify cloudsim), reached with
	// the AWS driver at Endpoint.
	TypeCloudsim = "cloudsim"
	// TypeAWS is Amazon EC2.
	TypeAWS = "aws"
	// TypeMemory is the in-process provider, for tests.
	TypeMemory = "memory"
	// TypeOnPrem is proxy-ARP and gratuitous ARP on this host's own
	// interfaces; it needs a VRRP authority (see Authority).
	TypeOnPrem = "onprem"
)

// Provider is where a pool's actions go.
type Provider struct {
	// Name is the reference pools use.
	Name string
	// Type is TypeCloudsim, TypeAWS or TypeMemory.
	Type string
	// Endpoint is the API's URL: required for cloudsim; for aws, empty
	// means the SDK's standard endpoint.
	Endpoint string
	// Region is the API's region: for aws, empty means the SDK's standard
	// chain (environment, shared config); for cloudsim, us-east-1 by
	// default.
	Region string
	// OnPrem is the on-premises driver's settings, for type onprem.
	OnPrem OnPrem
	// OCI is the OCI driver's settings, for type oci.
	OCI OCI
	// Azure is the Azure driver's settings, for type azure.
	Azure Azure
	// Budget, for the cloud types, overrides the buckets the driver paces
	// its API calls by (api_budget); nil means DefaultBudget of the type.
	Budget *callbudget.Limits
}

// OnPrem configures the on-premises driver: where captured traffic goes
// and how the capture is announced.
type OnPrem struct {
	// WorkloadDevice is the interface the /32 route of a captured address
	// leaves by, towards the workload (required). It must differ from the
	// member's capture target: the kernel proxy-answers ARP only for
	// addresses routed out of another device.
	WorkloadDevice string
	// WorkloadNextHop, when valid, is the route's gateway.
	WorkloadNextHop netip.Addr
	// GARPCount gratuitous ARPs are sent on acquire, and as many again
	// GARPRepeatAfter later (0: no repeat); keepalived's defaults, 5 and
	// 5s, by default.
	GARPCount       int
	GARPRepeatAfter time.Duration
}

// Authority is where a node's right to capture on-premises comes from.
type Authority struct {
	// VRRP, when set, makes keepalived the authority: the node may hold
	// captures only while keepalived reports it MASTER of the instance.
	VRRP *VRRP
}

// VRRP names the keepalived instance whose state is the node's authority.
type VRRP struct {
	// NotifyFIFO is keepalived's notify_fifo (absolute path).
	NotifyFIFO string
	// Instance is the vrrp_instance name.
	Instance string
}

// Timing is the node's loop timing.
type Timing struct {
	// ReconcileInterval is how often the loop runs without an event.
	ReconcileInterval time.Duration
	// HeartbeatInterval is how often the node announces it is alive.
	HeartbeatInterval time.Duration
	// HeartbeatTTL is how long after its last heartbeat a member counts as
	// stale; it is longer than HeartbeatInterval, or one late heartbeat
	// would fail a member over.
	HeartbeatTTL time.Duration
	// PromotionHold is added to the TTL before a standby is promoted.
	PromotionHold time.Duration
	// DeprovisionHold delays releases after an address stops being desired.
	DeprovisionHold time.Duration
	// RunningTimeout is how long a journal row may stay running before it
	// is re-queued after a crash.
	RunningTimeout time.Duration
}

// Defaults for settings the file leaves out.
const (
	defaultMaxBody           = 1 << 20
	defaultReplayWindow      = 30 * time.Second
	defaultRegion            = "us-east-1"
	defaultMaxPerRun         = 100
	defaultReconcileInterval = time.Second
	defaultHeartbeatInterval = 500 * time.Millisecond
	defaultTTLFactor         = 3
	defaultRunningTimeout    = time.Minute
	// keepalived's defaults for gratuitous ARP on becoming master.
	defaultGARPCount       = 5
	defaultGARPRepeatAfter = 5 * time.Second
)

// Load reads the configuration file at path and the files it names.
func Load(path string) (*Node, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a configuration from data. Path names the file in messages,
// and relative paths in the file (data_dir, the secret and TLS files) are
// relative to its folder; Parse reads the secret and checks that the TLS
// files exist. The error is an *Error, or an errors.Join of several sorted
// by line.
func Parse(path string, data []byte) (*Node, error) {
	p := &parser{file: path, dir: filepath.Dir(path)}
	root, errs := document(path, data)
	if errs != nil {
		return nil, joinErrors(errs)
	}
	n := p.node(root)
	if len(p.errs) > 0 {
		return nil, joinErrors(p.errs)
	}
	abs, err := absolute(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	n.Path = abs
	return n, nil
}

// yamlLine finds the line in a YAML library message, which has no error
// type that carries it.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data as exactly one YAML document whose content is a
// mapping.
func document(path string, data []byte) (*yaml.Node, []*Error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) || (err == nil && (len(doc.Content) == 0 || null(doc.Content[0]))) {
		return nil, []*Error{{File: path, Msg: "the file is empty; it must be a mapping with at least node, listen, data_dir and federation"}}
	}
	if err != nil {
		return nil, []*Error{yamlError(path, err)}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, []*Error{{File: path, Line: root.Line, Msg: "the file must be a mapping of settings (node: ..., listen: ...), found " + describe(root)}}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, []*Error{yamlError(path, err)}
	default:
		// A second document would be ignored, and with it whatever the
		// operator wrote there.
		return nil, []*Error{{File: path, Line: next.Line, Msg: "a second YAML document; the file must hold one node's configuration"}}
	}
	return root, nil
}

// yamlError turns a YAML library error into an *Error with its line.
func yamlError(path string, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if slices.Contains(parserProblems, msg) {
		line++
	}
	return &Error{File: path, Line: line, Msg: "YAML: " + msg}
}

// parserProblems are the problems the YAML library's parser, as against
// its scanner, reports. For these it prints the 0-based line of the
// construct being parsed, and no line at all for the first line
// (go.yaml.in/yaml/v3 v3.0.6, decode.go, parser.fail), so yamlError adds
// one. The syntax-error cases in testdata/bad catch a release that changes
// this.
var parserProblems = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"did not find expected node content",
	"did not find expected '-' indicator",
	"did not find expected key",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found undefined tag handle",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
}
