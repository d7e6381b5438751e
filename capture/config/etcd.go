package config

import (
	"net/url"
	"strings"
	"time"
)

// Etcd is where pools on the etcd epoch line keep their records (see
// capture/etcdline): the members' client URLs, the key prefix and the
// node's session lease.
type Etcd struct {
	// Endpoints are the etcd members' client URLs (http:// or https://).
	Endpoints []string
	// Prefix starts every key the node writes; default "/ipfence/".
	Prefix string
	// SessionTTL is the lease that keeps the node's session: a node that
	// cannot renew it within this long acts for nothing; default 5s.
	SessionTTL time.Duration
	// TLS, when set, is the node's client certificate and the CA of the
	// etcd members (https endpoints).
	TLS *TLS
}

// Epoch lines a pool may name.
const (
	// LineFederation: the epoch records travel between the nodes
	// (the default).
	LineFederation = "federation"
	// LineEtcd: the records live in etcd, bumped by compare-and-swap.
	LineEtcd = "etcd"
)

const (
	defaultEtcdPrefix = "/ipfence/"
	defaultSessionTTL = 5 * time.Second
)

// etcd checks the etcd section.
func (p *parser) etcd(s *section) *Etcd {
	es := s.sub(p, "etcd", "endpoints", "prefix", "session_ttl", "tls")
	if es == nil {
		return nil
	}
	e := &Etcd{Prefix: defaultEtcdPrefix, SessionTTL: defaultSessionTTL}
	if v, ok := es.vals["endpoints"]; ok {
		items := p.strs(v, "etcd.endpoints")
		if len(items) == 0 {
			p.fail(v, "etcd.endpoints", "must name at least one etcd member's client URL")
		}
		https := false
		for _, it := range items {
			u, err := url.Parse(it.text)
			switch {
			case err != nil:
				p.fail(it.node, it.field, "%v", err)
				continue
			case u.Scheme != "http" && u.Scheme != "https":
				p.fail(it.node, it.field, "%q is not an http:// or https:// URL", it.text)
				continue
			case u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil:
				p.fail(it.node, it.field, "%q must be scheme://host:port only", it.text)
				continue
			}
			https = https || u.Scheme == "https"
			e.Endpoints = append(e.Endpoints, strings.TrimSuffix(it.text, "/"))
		}
		if _, hasTLS := es.vals["tls"]; https && !hasTLS {
			p.fail(v, "etcd.endpoints", "https endpoints need etcd.tls (the node's certificate and the members' CA)")
		}
	} else {
		p.failAt(es.line, "etcd.endpoints", "required: the etcd members' client URLs")
	}
	if prefix, v := es.text(p, "prefix", false); v != nil {
		if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") || len(prefix) > 256 || strings.ContainsAny(prefix, "\x00\n") {
			p.fail(v, "etcd.prefix", "%q must start and end with / (e.g. /ipfence/)", prefix)
		} else {
			e.Prefix = prefix
		}
	}
	if v, ok := es.vals["session_ttl"]; ok {
		if d, ok := p.duration(v, "etcd.session_ttl"); ok {
			switch {
			case d < time.Second || d%time.Second != 0:
				p.fail(v, "etcd.session_ttl", "must be a whole number of seconds, at least 1s (etcd's leases count in seconds), found %s", d)
			case d > time.Hour:
				p.fail(v, "etcd.session_ttl", "must be at most 1h, found %s: a node cut off from etcd would act that long", d)
			default:
				e.SessionTTL = d
			}
		}
	}
	if _, ok := es.vals["tls"]; ok {
		e.TLS = p.tls(es)
	}
	return e
}
