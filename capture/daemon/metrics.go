package daemon

import (
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ipfence/ipfence/capture/provider/callbudget"
	"github.com/ipfence/ipfence/capture/reconcile"
	"github.com/ipfence/ipfence/capture/store"
)

// metrics are the node's Prometheus metrics. Counters and the pass
// histogram are updated as things happen; the rest (journal, epochs,
// federation, liveness) are read from the node when scraped.
type metrics struct {
	reg      *prometheus.Registry
	pass     func(reconcile.Report, error)
	passes   *prometheus.HistogramVec
	fenced   *prometheus.CounterVec
	rejected *prometheus.CounterVec
	// unhealthy is 1 once a write failed (health.go).
	unhealthy prometheus.Gauge
	// moves and failovers count desired-holder changes by reason
	// (events.go); failovers are those forced by liveness or authority.
	moves, failovers *prometheus.CounterVec
}

func newMetrics(d *Daemon) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.passes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ipfence_reconcile_duration_seconds", Help: "Duration of reconcile passes, by outcome.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"outcome"})
	m.fenced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ipfence_fenced_actions_total", Help: "Actions the gate skipped, by where it skipped them.",
	}, []string{"where"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ipfence_rejected_requests_total", Help: "API requests refused by authentication, by reason.",
	}, []string{"reason"})
	m.unhealthy = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ipfence_unhealthy", Help: "1 once a write to the data folder failed: the node stopped acting and heartbeating until restarted.",
	})
	m.moves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ipfence_moves_total", Help: "Changes of an address's desired holder as this node placed it, by reason (drain, liveness, authority, operator, placement).",
	}, []string{"reason"})
	m.failovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ipfence_failovers_total", Help: "Moves forced on a holder that failed: by liveness (stale) or authority (not VRRP master).",
	}, []string{"reason"})
	for _, r := range []string{ReasonDrain, ReasonLiveness, ReasonAuthority, ReasonOperator, ReasonPlacement} {
		m.moves.WithLabelValues(r)
	}
	m.failovers.WithLabelValues(ReasonLiveness)
	m.failovers.WithLabelValues(ReasonAuthority)
	m.reg.MustRegister(m.moves, m.failovers, buildInfo())
	m.reg.MustRegister(m.passes, m.fenced, m.rejected, m.unhealthy, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), &scraped{d}, budgetMetrics(d.budgets))
	m.pass = func(rep reconcile.Report, err error) {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		// The report's Now is the pass's start on the node's clock.
		m.passes.WithLabelValues(outcome).Observe(time.Since(rep.Now.Add(-time.Duration(d.offset.Load()))).Seconds())
		m.fenced.WithLabelValues("import").Add(float64(rep.Import.Stale))
		m.fenced.WithLabelValues("sweep").Add(float64(len(rep.Swept)))
		m.fenced.WithLabelValues("execute").Add(float64(rep.Exec.Stale))
	}
	return m
}

// scraped reads the node's state when Prometheus asks.
type scraped struct{ d *Daemon }

var (
	descActions   = prometheus.NewDesc("ipfence_actions", "Journal rows by kind and state.", []string{"kind", "state"}, nil)
	descEpoch     = prometheus.NewDesc("ipfence_capture_epoch", "Current epoch of each capture key.", []string{"pool", "address"}, nil)
	descPending   = prometheus.NewDesc("ipfence_federation_pending_events", "Events a peer has not acknowledged.", []string{"peer"}, nil)
	descLag       = prometheus.NewDesc("ipfence_federation_lag_seconds", "Time since a peer last acknowledged a delivery.", []string{"peer"}, nil)
	descFailures  = prometheus.NewDesc("ipfence_federation_delivery_failures_total", "Failed deliveries to a peer.", []string{"peer"}, nil)
	descHeartbeat = prometheus.NewDesc("ipfence_heartbeat_age_seconds", "Group time since each member's newest heartbeat.", []string{"member"}, nil)
	descStale     = prometheus.NewDesc("ipfence_member_stale", "1 when a member is stale.", []string{"member"}, nil)
	descRefused   = prometheus.NewDesc("ipfence_federation_refused_events_total", "Federation events refused at the door, by reason.", []string{"reason"}, nil)
	descSynced    = prometheus.NewDesc("ipfence_synced", "0 while this node, having lost its state, has not learned the cluster's epoch lines back (it acts for nothing).", nil, nil)
	descHolder    = prometheus.NewDesc("ipfence_address_holder", "1 for each address and the holder its epoch line names (this node's view).", []string{"pool", "address", "holder"}, nil)
	// The API budget of each cloud provider (capture/provider/callbudget),
	// by class of call (read, write).
	descBudgetWaits     = prometheus.NewDesc("ipfence_api_budget_waits_total", "Cloud API calls that waited for a token of the node's budget or for a throttling pause to end.", []string{"provider", "class"}, nil)
	descBudgetWait      = prometheus.NewDesc("ipfence_api_budget_wait_seconds_total", "Total time cloud API calls waited for the node's budget.", []string{"provider", "class"}, nil)
	descBudgetThrottled = prometheus.NewDesc("ipfence_api_throttled_total", "Cloud API answers that said the account is throttled (429, RequestLimitExceeded).", []string{"provider", "class"}, nil)
	descBudgetRetries   = prometheus.NewDesc("ipfence_api_retries_total", "Cloud API calls sent again by the driver's retries (reads; writes are never retried blindly).", []string{"provider", "class"}, nil)
)

// buildInfo is ipfence_build_info: a constant 1 labelled with the Go
// version, the module version and the VCS revision the binary was built
// from, as runtime/debug reads them ("unknown" when not recorded).
func buildInfo() prometheus.Collector {
	goVersion, version, revision, modified := runtime.Version(), "unknown", "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ipfence_build_info", Help: "Always 1; the labels say which build this is.",
		ConstLabels: prometheus.Labels{"go_version": goVersion, "version": version, "revision": revision, "modified": modified},
	})
	g.Set(1)
	return g
}

// budgetMetrics reads the cloud drivers' API budgets, by provider
// reference, when Prometheus asks.
type budgetMetrics map[string]*callbudget.Budget

func (budgetMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBudgetWaits, descBudgetWait, descBudgetThrottled, descBudgetRetries} {
		ch <- d
	}
}

func (m budgetMetrics) Collect(ch chan<- prometheus.Metric) {
	for name, b := range m {
		for _, c := range []callbudget.Class{callbudget.Read, callbudget.Write} {
			st := b.Stats(c)
			ch <- prometheus.MustNewConstMetric(descBudgetWaits, prometheus.CounterValue, float64(st.Waited), name, c.String())
			ch <- prometheus.MustNewConstMetric(descBudgetWait, prometheus.CounterValue, st.Wait.Seconds(), name, c.String())
			ch <- prometheus.MustNewConstMetric(descBudgetThrottled, prometheus.CounterValue, float64(st.Throttled), name, c.String())
			ch <- prometheus.MustNewConstMetric(descBudgetRetries, prometheus.CounterValue, float64(st.Retries), name, c.String())
		}
	}
}

func (s *scraped) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descActions, descEpoch, descPending, descLag, descFailures, descHeartbeat, descStale, descHolder, descRefused, descSynced} {
		ch <- d
	}
}

func (s *scraped) Collect(ch chan<- prometheus.Metric) {
	d := s.d
	if rows, err := d.st.Rows(storeFilterAll); err == nil {
		counts := map[[2]string]int{}
		for _, r := range rows {
			counts[[2]string{string(r.Kind), string(r.State)}]++
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(descActions, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
	}
	if ep, err := d.st.Epochs(); err == nil {
		for k, r := range ep {
			ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, float64(r.Epoch), k.Pool, k.Address.String())
			if r.Holder != "" {
				ch <- prometheus.MustNewConstMetric(descHolder, prometheus.GaugeValue, 1, k.Pool, k.Address.String(), r.Holder)
			}
		}
	}
	now := d.now()
	for peer, st := range d.fed.Stats() {
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(st.Pending), peer)
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(st.Failures), peer)
		if !st.LastDelivered.IsZero() {
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, now.Sub(st.LastDelivered).Seconds(), peer)
		}
	}
	for reason, n := range d.fed.Refused() {
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(n), reason)
	}
	synced := 0.0
	if ok, _ := d.fed.Synced(); ok {
		synced = 1
	}
	ch <- prometheus.MustNewConstMetric(descSynced, prometheus.GaugeValue, synced)
	for name, m := range d.fed.Liveness() {
		stale := 0.0
		if m.Stale {
			stale = 1
		}
		ch <- prometheus.MustNewConstMetric(descStale, prometheus.GaugeValue, stale, name)
		if m.Heard {
			ch <- prometheus.MustNewConstMetric(descHeartbeat, prometheus.GaugeValue, m.Age.Seconds(), name)
		}
	}
}

// storeFilterAll selects every journal row.
var storeFilterAll = store.Filter{}
