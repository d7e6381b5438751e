// Package daemon is a running ipfence node: its bbolt state, its reconcile
// loop, its providers, its federation with the other nodes (heartbeats,
// drains, stale reports, epoch observations), and its HTTP API for peers
// and operators. It is the shell around the pure core: it reads the clock,
// talks to the network and the disk, and hands what it learns to the
// planner and the gate.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/bus"
	"github.com/ipfence/ipfence/capture/config"
	"github.com/ipfence/ipfence/capture/federation"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/aws"
	"github.com/ipfence/ipfence/capture/provider/azure"
	"github.com/ipfence/ipfence/capture/provider/callbudget"
	"github.com/ipfence/ipfence/capture/provider/memory"
	"github.com/ipfence/ipfence/capture/provider/oci"
	"github.com/ipfence/ipfence/capture/provider/onprem"
	"github.com/ipfence/ipfence/capture/reconcile"
	"github.com/ipfence/ipfence/capture/store"
	"github.com/ipfence/ipfence/capture/vrrp"
)

// Options are what the command line adds to the configuration file.
type Options struct {
	Logger *slog.Logger
	// Clock is the time source; nil means time.Now. The test-only clock
	// offset (see TestEndpoints) is added to it.
	Clock func() time.Time
	// TestEndpoints serves /v1/test/ endpoints that break the node on
	// purpose (a clock offset), for the harness. Never in production.
	TestEndpoints bool
	// UnsafeDisableFence turns the gate into a no-op, for the harness's
	// planted-bug runs. Never in production.
	UnsafeDisableFence bool
	// Listener, when set, is used instead of listening on the configured
	// address (tests hand over a port they picked).
	Listener net.Listener
	// Limits bound the API server's clients; zero fields take defaults.
	Limits Limits
	// RejoinFrom and EpochFloor are an operator's way back when a
	// majority of the cluster lost its state (README, ipfence serve): the
	// node syncs once the named peers answered, and takes no epoch at or
	// below EpochFloor (the highest the provider's history shows).
	RejoinFrom []string
	EpochFloor capture.Epoch
}

// Daemon is one node.
type Daemon struct {
	cfg   *config.Node
	opts  Options
	log   *slog.Logger
	st    *store.Store
	fed   *federation.Node
	loop  *reconcile.Loop
	provs map[string]provider.Provider
	// budgets pace the cloud drivers' API calls, by provider reference
	// (the metrics read them).
	budgets map[string]*callbudget.Budget
	wake    *bus.Bus[struct{}]
	sub     *bus.Subscription[struct{}]
	mets    *metrics
	http    *http.Server
	conns   *connLimiter
	// health is whether the node can write its state (health.go).
	health health
	// story is what the last pass saw, for the event log (events.go).
	story storyteller
	ln    net.Listener

	verifier *auth.Verifier
	offset   atomic.Int64 // test-only clock offset, ns
	// opVerifier checks operator requests when the operator has its own
	// secret; replayLogs are the verifiers' logs (access.go).
	opVerifier *auth.Verifier
	replayLogs []*auth.ReplayLog
	// passiveWhy is why the last pass could not act, "" when it could.
	passiveWhy atomic.Value

	// vrrp is keepalived's view of this node, when it is the authority
	// for on-premises captures (authority.go).
	vrrp *vrrp.Watcher
	// vrrpPriority is the instance's priority as keepalived last reported
	// it (0: not yet).
	vrrpPriority atomic.Int64

	// line is the etcd epoch line, nil when no pool is on it
	// (etcdline.go).
	line *etcdLine

	mu       sync.Mutex
	lastPass reconcile.Report
	lastErr  error
	emitted  map[capture.Key]capture.EpochRecord
}

// New builds a node from its configuration: it opens the state, the
// federation log and the providers, and listens; Run starts it.
func New(ctx context.Context, cfg *config.Node, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	d := &Daemon{cfg: cfg, opts: opts, log: opts.Logger.With("node", cfg.Name), emitted: map[capture.Key]capture.EpochRecord{}}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data folder: %w", err)
	}
	var err error
	d.budgets = budgets(cfg)
	if d.provs, err = providers(ctx, cfg, d.log, d.stillHolder, d.budgets); err != nil {
		return nil, err
	}
	// A state file that is absent or empty is a new one: with a
	// federation log that is not, the node lost part of its state and
	// must learn the epoch lines back before it acts (see Synced).
	stateNew := fileEmpty(cfg.StatePath)
	if d.st, err = store.Open(cfg.StatePath, store.Options{RetryAfter: retryAfter(cfg.Timing.ReconcileInterval), UnsafeDisableFence: opts.UnsafeDisableFence}); err != nil {
		return nil, err
	}
	client, err := d.peerClient()
	if err != nil {
		d.st.Close()
		return nil, err
	}
	d.wake = bus.New[struct{}]()
	d.sub = d.wake.Subscribe(1)
	peers := make([]federation.Peer, len(cfg.Peers))
	for i, p := range cfg.Peers {
		peers[i] = federation.Peer{Name: p.Name, URL: p.URL}
	}
	// Under mutual TLS every event is signed by its origin with its
	// certificate's key, so that a member cannot relay an event "from"
	// another (the batch's sender is the only name the TLS handshake
	// proves). Under HMAC every member holds the one secret: members are
	// trusted alike.
	var signer federation.Signer
	if t := cfg.Federation.TLS; t != nil {
		keys, err := auth.LoadEventKeys(t.CertFile, t.KeyFile, t.CAFile)
		if err != nil {
			d.st.Close()
			return nil, err
		}
		if keys.Node() != cfg.Name {
			d.st.Close()
			return nil, fmt.Errorf("federation tls: the certificate %s names %q, but this node is %q", t.CertFile, keys.Node(), cfg.Name)
		}
		signer = keys
	}
	d.fed, err = federation.Open(federation.Config{
		Node: cfg.Name, Peers: peers, Path: filepath.Join(cfg.DataDir, "federation.db"),
		Client: client, Clock: d.now, Heartbeat: cfg.Timing.HeartbeatInterval,
		Timing: federation.Timing{TTL: cfg.Timing.HeartbeatTTL, PromotionHold: cfg.Timing.PromotionHold},
		Logger: d.log, OnChange: func() { d.wake.Publish(struct{}{}) },
		Keys: configuredKeys(cfg), RequireSender: true, RejoinFrom: opts.RejoinFrom, Signer: signer,
	})
	if err != nil {
		d.st.Close()
		return nil, err
	}
	if stateNew {
		if err := d.fed.MarkUnsynced(); err != nil {
			d.close()
			return nil, fmt.Errorf("federation log: %w", err)
		}
	}
	if ok, why := d.fed.Synced(); !ok {
		d.log.Warn("passive until synced", "why", why)
	}
	if d.line, err = newEtcdLine(d); err != nil {
		d.close()
		return nil, err
	}
	d.mets = newMetrics(d)
	hold := cfg.Timing.DeprovisionHold
	var exempt func(capture.Kind) bool
	if a := cfg.Authority.VRRP; a != nil {
		// The watcher lives as long as the daemon: close() stops it.
		if d.vrrp, err = vrrp.Watch(context.Background(), a.NotifyFIFO, a.Instance); err != nil {
			d.close()
			return nil, fmt.Errorf("authority: %w", err)
		}
		// A node that is not master must stop answering at once, even
		// cut off from its peers: releases wait for neither the hold nor
		// the contact check.
		hold = 0
		exempt = func(k capture.Kind) bool { return k == capture.ProxyARPStop }
	}
	d.loop = reconcile.New(reconcile.Config{
		Node: cfg.Name, Store: d.st, Pools: d.pools, Seen: d.seen, Providers: d.provs,
		Policy: cfg.Approval, Execute: true, RunningTimeout: cfg.Timing.RunningTimeout,
		DeprovisionHold: hold, Interval: cfg.Timing.ReconcileInterval,
		Clock: d.now, Wake: d.sub.C(), OnPass: d.afterPass, OnEpochs: d.publishEpochs, Preempt: d.preempt,
		Ready: d.ready, ReadyExempt: exempt, LineRevision: d.lineRevision,
	})
	d.ln = opts.Listener
	if d.ln == nil {
		if d.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			d.close()
			return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
		}
	}
	lim := opts.Limits.withDefaults()
	d.conns = newConnLimiter(d.ln, lim.MaxConns)
	d.ln = d.conns
	if err := d.openAccess(); err != nil {
		d.close()
		return nil, err
	}
	d.http = newServer(d.routes(), lim, cfg.Federation.MaxBody, d.conns, func(r *http.Request) {
		d.mets.rejected.WithLabelValues(auth.ReasonTooLarge).Inc()
		d.log.Warn("request rejected", "reason", auth.ReasonTooLarge, "path", r.URL.Path, "remote", r.RemoteAddr, "length", r.ContentLength)
	})
	if cfg.Federation.TLS != nil {
		tc, err := auth.ServerTLS(cfg.Federation.TLS.CertFile, cfg.Federation.TLS.KeyFile, cfg.Federation.TLS.CAFile)
		if err != nil {
			d.close()
			return nil, err
		}
		d.http.TLSConfig = tc
	}
	return d, nil
}

// Addr is the address the API listens on.
func (d *Daemon) Addr() net.Addr { return d.ln.Addr() }

// now is the node's time input: the clock plus the test-only offset.
func (d *Daemon) now() time.Time { return d.opts.Clock().Add(time.Duration(d.offset.Load())) }

// budgets builds an API budget for each cloud provider of the file: its
// api_budget, else the default of its type.
func budgets(cfg *config.Node) map[string]*callbudget.Budget {
	out := map[string]*callbudget.Budget{}
	for name, p := range cfg.Providers {
		l, ok := config.DefaultBudget(p.Type)
		if !ok {
			continue
		}
		if p.Budget != nil {
			l = *p.Budget
		}
		out[name] = callbudget.New(callbudget.Options{Limits: l})
	}
	return out
}

// providers builds the drivers the pools name. still, when set, gives an
// on-premises driver its check before a late announcement (see
// onprem.Options.StillHolder); budgets, by provider reference, pace the
// cloud drivers' calls (none for a reference it lacks).
func providers(ctx context.Context, cfg *config.Node, log *slog.Logger, still func(provider string) func(netip.Addr, capture.Epoch, time.Time) error, budgets map[string]*callbudget.Budget) (map[string]provider.Provider, error) {
	out := map[string]provider.Provider{}
	for name, p := range cfg.Providers {
		switch p.Type {
		case config.TypeCloudsim, config.TypeAWS:
			o := aws.Options{Region: p.Region, Endpoint: p.Endpoint, Budget: budgets[name]}
			if p.Type == config.TypeCloudsim {
				// The simulator accepts any signature; these keep the SDK
				// from looking for real credentials.
				o.Credentials = credentials.NewStaticCredentialsProvider("ipfence", "cloudsim", "")
			}
			drv, err := aws.New(ctx, o)
			if err != nil {
				return nil, fmt.Errorf("provider %s: %w", name, err)
			}
			out[name] = drv
		case config.TypeAzure:
			// Credentials come from azidentity's default chain (the
			// environment, workload identity, the VM's managed identity);
			// the file never holds one (config refuses it).
			drv, err := azure.New(azure.Options{
				SubscriptionID: p.Azure.SubscriptionID, ResourceGroup: p.Azure.ResourceGroup, Endpoint: p.Endpoint,
				AuthorityHost: p.Azure.AuthorityHost, Budget: budgets[name],
			})
			if err != nil {
				return nil, fmt.Errorf("provider %s: %w", name, err)
			}
			out[name] = drv
		case config.TypeOCI:
			// Credentials come from the OCI config file (or the instance
			// principal when auth says so), never from this file.
			drv, err := oci.New(oci.Options{
				SubnetID: p.OCI.SubnetID, Auth: oci.Auth(p.OCI.Auth), Profile: p.OCI.Profile, Region: p.Region, Host: p.Endpoint,
				Budget: budgets[name],
			})
			if err != nil {
				return nil, fmt.Errorf("provider %s: %w", name, err)
			}
			out[name] = drv
		case config.TypeOnPrem:
			lan, err := localTarget(cfg, name)
			if err != nil {
				return nil, err
			}
			o := onprem.Options{
				LAN: lan, WorkloadDevice: p.OnPrem.WorkloadDevice, WorkloadNextHop: p.OnPrem.WorkloadNextHop,
				GARPCount: p.OnPrem.GARPCount, GARPRepeatAfter: garpRepeat(p.OnPrem.GARPRepeatAfter), Log: log.With("provider", name),
			}
			if still != nil {
				o.StillHolder = still(name)
			}
			drv, err := onprem.New(o)
			if err != nil {
				return nil, fmt.Errorf("provider %s: %w", name, err)
			}
			out[name] = drv
		case config.TypeMemory:
			var nics []string
			for _, pool := range cfg.Pools {
				if pool.Provider != name {
					continue
				}
				for _, m := range pool.Members {
					if !slices.Contains(nics, m.Target) {
						nics = append(nics, m.Target)
					}
				}
			}
			out[name] = memory.New(memory.Options{NICs: nics})
		default:
			return nil, fmt.Errorf("provider %s: unknown type %q", name, p.Type)
		}
	}
	return out, nil
}

// stillHolder is the on-premises driver's check before its second burst
// of gratuitous ARPs, seconds after the Assign that made it: this node is
// healthy, in contact with a majority and heard by one, and the epoch
// record of the address is still this node's capture at that Assign's
// epoch. A node paused or cut off while the others moved the line on
// must not announce the address again before its release runs.
func (d *Daemon) stillHolder(provider string) func(netip.Addr, capture.Epoch, time.Time) error {
	return func(addr netip.Addr, epoch capture.Epoch, since time.Time) error {
		if err := d.unhealthy(); err != nil {
			return err
		}
		if !d.fed.InContact(d.cfg.Timing.HeartbeatTTL + d.cfg.Timing.PromotionHold) {
			return errOutOfContact
		}
		// Covered since the Assign, not since now: a lapse in between
		// (the node paused, heard again) means its peers may have moved
		// the line meanwhile, and their news may still be on its way.
		if err := d.fed.Covered(since); err != nil {
			return err
		}
		if ok, why := d.fed.Synced(); !ok {
			return errors.New(why)
		}
		recs := d.seen()
		for _, p := range d.cfg.Pools {
			if p.Provider != provider || !slices.Contains(p.Addresses, addr) {
				continue
			}
			k := capture.Key{Pool: p.Name, Address: addr, Domain: p.Domain(d.cfg.Name)}
			if r := recs[k]; r.Holder != d.cfg.Name || r.Epoch != epoch {
				return fmt.Errorf("%s is at epoch %d held by %q, no longer this node's capture at epoch %d", k, r.Epoch, r.Holder, epoch)
			}
			return nil
		}
		return fmt.Errorf("%s is in no pool of provider %s", addr, provider)
	}
}

// localTarget is this node's capture target in the pools of an
// on-premises provider: the LAN interface its driver answers ARP on. A
// host has one.
func localTarget(cfg *config.Node, provider string) (string, error) {
	target := ""
	for _, pool := range cfg.Pools {
		if pool.Provider != provider {
			continue
		}
		for _, m := range pool.Members {
			if m.Node != cfg.Name {
				continue
			}
			if target != "" && m.Target != target {
				return "", fmt.Errorf("provider %s: this node has two capture targets, %s and %s; an on-premises driver answers on one LAN interface", provider, target, m.Target)
			}
			target = m.Target
		}
	}
	if target == "" {
		return "", fmt.Errorf("provider %s: this node is a member of none of its pools, so it has no LAN interface to answer on", provider)
	}
	return target, nil
}

// garpRepeat maps the configuration's "0: no second burst" to the
// driver's negative delay.
func garpRepeat(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// peerClient signs (or presents a client certificate on) every request to
// peers.
func (d *Daemon) peerClient() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	f := d.cfg.Federation
	if f.TLS != nil {
		tc, err := auth.ClientTLS(f.TLS.CertFile, f.TLS.KeyFile, f.TLS.CAFile)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}, nil
	}
	s := &auth.Signer{Secret: f.Secret, Node: d.cfg.Name, Now: d.now}
	return &http.Client{Transport: s.Transport(tr), Timeout: 10 * time.Second}, nil
}

// pools are the configured pools with every member's drain and liveness as
// the federation sees them now.
func (d *Daemon) pools() []capture.Pool {
	live := d.fed.Liveness()
	master := d.vrrpMaster()
	out := make([]capture.Pool, len(d.cfg.Pools))
	for i, p := range d.cfg.Pools {
		p.Members = slices.Clone(p.Members)
		for j := range p.Members {
			m := &p.Members[j]
			l := live[m.Node]
			m.Drained, m.Stale = l.Drained, l.Stale
			if m.Node == d.cfg.Name && p.OnPrem() && d.cfg.EtcdPools[p.Name] && d.line != nil && d.line.session(time.Now()) == nil {
				// Fail-closed on the etcd line: on premises a node cut
				// off from etcd stops answering for its addresses.
				m.Drained = true
			}
			if m.Node == d.cfg.Name && !d.authorityMaster() {
				// Fail-closed: not VRRP master, so not eligible here,
				// whatever the federation's intents say.
				m.Drained = true
			}
			if d.vrrp != nil && p.OnPrem() && m.Node != master {
				// keepalived decides who holds: the latest to become
				// master, not the first by priority, so that a crashed
				// master's successor takes over as soon as VRRP says so
				// rather than once the crashed node goes stale.
				m.Drained = true
			}
		}
		out[i] = p
	}
	return out
}

// Errors of a pass that may not act.
var (
	errOutOfContact = errors.New("out of contact with a majority of the cluster")
	errPassTooLong  = errors.New("the pass has run past the contact window (was the process paused?)")
)

// retryAfter is how long a row whose provider call failed waits before a
// pass runs it again: two reconcile intervals, at least a second and at
// most the store's default of ten seconds. The call is repeated anyway,
// and the gate and the readiness checks run again before it; a failed
// acquire waiting the full ten seconds kept its address on no NIC for
// that long after a provider fault had healed (capture runs: 8 s outages
// of every address, 3 s of them outside any fault). A second apart is
// still far from hammering a provider whose SDK retries within the call.
func retryAfter(interval time.Duration) time.Duration {
	return min(max(2*interval, time.Second), 10*time.Second)
}

// fileEmpty reports whether the file at path is absent or holds nothing.
func fileEmpty(path string) bool {
	fi, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist) || (err == nil && fi.Size() == 0)
}

// configuredKeys are the capture keys the federation admits: every address
// of every pool in the domain of every member (a pool without a placement
// group gives each member its own line).
func configuredKeys(cfg *config.Node) map[capture.Key]bool {
	out := map[capture.Key]bool{}
	for _, p := range cfg.Pools {
		for _, m := range p.Members {
			for _, a := range p.Addresses {
				out[capture.Key{Pool: p.Name, Address: a, Domain: p.Domain(m.Node)}] = true
			}
		}
	}
	return out
}

// errUnreplicated: an epoch record this node would act at is not yet held
// by a majority of the cluster, or is no longer the cluster's.
var errUnreplicated = errors.New("epoch records not yet held by a majority of the cluster, or moved on since the pass read them")

// passive says why this node may not act now: it lost its state and has
// not learned the cluster's epoch lines back, or epoch records of its
// capture keys are not yet held by a majority (a node that acted at an
// epoch only it knew, and then lost its disk, would take that epoch again
// for another holder). "" when it may act.
func (d *Daemon) passive() error {
	if ok, why := d.fed.Synced(); !ok {
		return errors.New(why)
	}
	epochs, err := d.st.Epochs()
	if err != nil {
		return fmt.Errorf("reading epochs: %w", err)
	}
	want := map[capture.Key]capture.EpochRecord{}
	for _, p := range d.cfg.Pools {
		if _, member := p.Member(d.cfg.Name); !member {
			continue
		}
		dom := p.Domain(d.cfg.Name)
		for _, a := range p.Addresses {
			k := capture.Key{Pool: p.Name, Address: a, Domain: dom}
			if r, ok := epochs[k]; ok && r.Epoch > 0 {
				want[k] = r
			}
		}
	}
	// Keys on the etcd line are confirmed against etcd, the others
	// against the federation's replication.
	inEtcd := map[capture.Key]capture.EpochRecord{}
	for k, r := range want {
		if d.onEtcd(k) {
			inEtcd[k] = r
			delete(want, k)
		}
	}
	if keys := d.fed.Unreplicated(want); len(keys) > 0 {
		return fmt.Errorf("%w: %d keys, first %s at epoch %d", errUnreplicated, len(keys), keys[0], want[keys[0]].Epoch)
	}
	if len(inEtcd) > 0 {
		return d.confirmEtcd(inEtcd)
	}
	return nil
}

// ready is the executor's condition for a pass: at its start this node had
// heard from a majority within the contact window, and it is still within
// that window of the start, on the monotonic clock. The window is the
// time the others wait before they find a silent node stale (TTL plus
// promotion hold): a node that went silent for less cannot have been
// seized from, and one that went silent for longer (paused, cut off) may
// hold rows whose epochs the cluster has moved past, which its own gate
// cannot know, so it acts again only once its peers' news is in.
func (d *Daemon) ready() func() error {
	start := time.Now()
	window := d.cfg.Timing.HeartbeatTTL + d.cfg.Timing.PromotionHold
	inContact := d.fed.InContact(window)
	d.probe()
	return func() error {
		if err := d.unhealthy(); err != nil {
			return err
		}
		if !inContact {
			return errOutOfContact
		}
		if time.Since(start) > window {
			return errPassTooLong
		}
		// The peers judge this node by its heartbeats they hold, not by
		// when this pass began: a pass that began a heartbeat interval
		// after the last one that reached them could still act when they
		// found it stale (TestClusterPausedInsideAcquireIsFenced: n1
		// stopped 0.58 s, inside the 0.6 s window from its pass's start,
		// and its stale assign landed after the others' newer one).
		if err := d.fed.Covered(start); err != nil {
			return err
		}
		// Against the federation's record as it is now, at every ask,
		// never a result kept from earlier in the pass: peers' news of
		// newer epochs that came in since (as right after a pause) must
		// stop the calls still to come.
		if err := d.passive(); err != nil {
			d.passiveWhy.Store(err.Error())
			return err
		}
		d.passiveWhy.Store("")
		return nil
	}
}

// seen are the epoch records the federation carried in.
func (d *Daemon) seen() map[capture.Key]capture.EpochRecord {
	var out map[capture.Key]capture.EpochRecord
	d.fed.View(func(s *federation.State) { out = s.Epochs() })
	if d.line != nil {
		d.overlay(out)
	}
	if f := d.opts.EpochFloor; f > 0 {
		// Every key of this node's lines starts above the floor: the
		// first move takes floor + 1 at least.
		for _, p := range d.cfg.Pools {
			dom := p.Domain(d.cfg.Name)
			for _, a := range p.Addresses {
				k := capture.Key{Pool: p.Name, Address: a, Domain: dom}
				if r := out[k]; r.Epoch < f {
					out[k] = capture.EpochRecord{Epoch: f, Holder: r.Holder}
				}
			}
		}
	}
	return out
}

// afterPass keeps the report for status and metrics.
func (d *Daemon) afterPass(rep reconcile.Report, err error) {
	d.mu.Lock()
	d.lastPass, d.lastErr = rep, err
	d.mu.Unlock()
	d.mets.pass(rep, err)
	d.noteWrite("reconcile pass", err)
	d.tell(rep)
	if err != nil {
		d.log.Error("reconcile pass", "err", err)
	}
}

// publishEpochs tells the peers about epoch records this node moved past
// what the federation already carries, so that the capture domain shares
// one epoch line. It runs before the pass executes anything at them.
func (d *Daemon) publishEpochs(changed []capture.Key, epochs map[capture.Key]capture.EpochRecord) {
	if d.line != nil {
		var inEtcd, rest []capture.Key
		for _, k := range changed {
			if d.onEtcd(k) {
				inEtcd = append(inEtcd, k)
			} else {
				rest = append(rest, k)
			}
		}
		if len(inEtcd) > 0 {
			d.bumpEtcd(inEtcd, epochs)
		}
		changed = rest
	}
	var fresh []capture.Key
	d.fed.View(func(s *federation.State) {
		known := s.Epochs()
		for _, k := range changed {
			if cur, ok := known[k]; (!ok && epochs[k].Epoch > 0) || (ok && epochs[k].Epoch > cur.Epoch) {
				fresh = append(fresh, k)
			}
		}
	})
	if len(fresh) == 0 {
		return
	}
	// One event per key, all in one write of the federation log: a
	// failover of a thousand addresses costs one fsync here, not a
	// thousand (which made the pass, and the failover, seconds long).
	subjects := make([]string, len(fresh))
	for i, k := range fresh {
		subjects[i] = k.String()
	}
	if _, err := d.fed.EmitMany(federation.Epoch, subjects, func(i int, e *federation.Event) {
		rec := epochs[fresh[i]]
		e.Record = &rec
	}); err != nil {
		d.noteWrite("publishing epochs", err)
		d.log.Error("publishing epochs", "keys", len(fresh), "first", fresh[0], "err", err)
	}
}

// preempt lets a member take an address from its current holder by
// priority only after an operator undrained it, later (in Lamport order)
// than the move that gave the address to the holder. A node that failed,
// was replaced and came back therefore takes nothing back by itself; an
// undrain is how an operator gives it its place again.
func (d *Daemon) preempt(k capture.Key, member string) bool {
	ok := false
	d.fed.View(func(s *federation.State) {
		in, has := s.Intent(member)
		if !has || in.Kind != federation.Undrain {
			return
		}
		ep, known := s.EpochEvent(k)
		ok = !known || in.Lamport > ep.Lamport
	})
	return ok
}

// Run serves the API and runs the federation and the reconcile loop until
// ctx ends, then shuts down gracefully: the API stops taking requests, the
// pass in progress finishes (a claimed action completes), the outbox is
// flushed, and the files are closed.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.close()
	var wg sync.WaitGroup
	serveErr := make(chan error, 1)
	go func() {
		var err error
		if d.http.TLSConfig != nil {
			err = d.http.ServeTLS(d.ln, "", "")
		} else {
			err = d.http.Serve(d.ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()
	// The first heartbeat goes out before the first pass, so that liveness
	// counts the grace for silent peers from now.
	if _, err := d.fed.Emit(federation.Heartbeat, "", nil); err != nil {
		return err
	}
	fedCtx, stopFed := context.WithCancel(context.Background())
	// A node that cannot write stops heartbeating (health.go).
	beatCtx, stopBeats := context.WithCancel(fedCtx)
	d.health.mu.Lock()
	d.health.stopBeats = stopBeats
	sick := d.health.err != nil
	d.health.mu.Unlock()
	if sick {
		stopBeats()
	}
	wg.Go(func() { d.fed.Run(beatCtx) })
	if d.line != nil {
		wg.Go(func() { d.keepSession(fedCtx) })
	}
	if d.vrrp != nil {
		wg.Go(func() { d.watchAuthority(fedCtx) })
		wg.Go(func() { d.watchAdverts(fedCtx) })
	}
	loopCtx, stopLoop := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() { d.loop.Run(loopCtx); close(loopDone) }()
	d.log.Info("serving", "addr", d.ln.Addr().String())

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.http.Shutdown(shut)
	stopLoop()
	<-loopDone
	stopFed()
	wg.Wait()
	return err
}

func (d *Daemon) close() {
	if d.vrrp != nil {
		d.vrrp.Close()
	}
	if d.wake != nil {
		d.wake.Close()
	}
	if d.fed != nil {
		d.fed.Close()
	}
	d.closeAccess()
	if d.st != nil {
		d.st.Close()
	}
}
