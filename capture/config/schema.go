package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/capture/policy"
)

// refs are the names other sections may refer to, as written even when a
// name is itself invalid: one bad peer is reported once, not again at
// every member that names it.
type refs struct {
	node string
	// nodeOK says node is set and valid; when not, whether a member names
	// this node cannot be told, and is not reported.
	nodeOK    bool
	peers     map[string]int
	providers map[string]bool
	// types maps a provider reference to its type.
	types map[string]string
	// provs are the providers by reference.
	provs map[string]Provider
	// etcdPools are the pools on the etcd epoch line.
	etcdPools map[string]bool
}

// node checks the top-level mapping and every section under it. Sections
// are checked in dependency order — peers and providers before the pools
// that name them — whatever their order in the file.
func (p *parser) node(root *yaml.Node) *Node {
	s := p.fields(root, "", root.Line,
		"node", "listen", "advertise", "data_dir", "peers", "federation", "providers", "pools", "approval", "timing", "authority", "etcd")
	n := &Node{}
	var r refs
	var nameNode *yaml.Node
	r.node, nameNode = s.text(p, "node", true)
	if nameNode != nil {
		msg := checkName(r.node)
		if msg != "" {
			p.fail(nameNode, "node", "%s", msg)
		}
		r.nodeOK = msg == ""
		n.Name = r.node
	}
	n.Federation = p.federation(s)
	n.Listen, n.Advertise = p.addresses(s, n.Federation.TLS != nil)
	if dir, v := s.text(p, "data_dir", true); v != nil {
		if dir == "" {
			p.fail(v, "data_dir", "must not be empty")
		} else if n.DataDir = p.abs(v, "data_dir", dir); n.DataDir != "" {
			n.StatePath = filepath.Join(n.DataDir, "state.db")
		}
	}
	n.Peers, r.peers = p.peers(s, r.node, n.Advertise)
	n.Providers, r.providers = p.providers(s)
	r.types = make(map[string]string, len(n.Providers))
	for name, prov := range n.Providers {
		r.types[name] = prov.Type
	}
	r.provs = n.Providers
	n.Etcd = p.etcd(s)
	n.Pools = p.pools(s, &r)
	n.EtcdPools = r.etcdPools
	if len(n.EtcdPools) > 0 && n.Etcd == nil {
		p.failAt(s.absent("etcd"), "etcd", "required: pools %s are on the etcd epoch line (epoch_line: etcd)", nameList(slices.Sorted(maps.Keys(n.EtcdPools))))
	}
	n.Approval = p.approval(s, r.providers)
	n.Timing = p.timing(s)
	n.Authority = p.authority(s)
	for name, prov := range n.Providers {
		if prov.Type == TypeOnPrem && n.Authority.VRRP == nil {
			p.failAt(s.absent("authority"), "authority", "required with the onprem provider %s: on premises a node may capture only while keepalived says it is VRRP master (authority: {vrrp: {notify_fifo: PATH, instance: NAME}})", name)
			break
		}
	}
	return n
}

// authority checks the authority section.
func (p *parser) authority(s *section) Authority {
	var a Authority
	as := s.sub(p, "authority", "vrrp")
	if as == nil {
		return a
	}
	vs := as.sub(p, "vrrp", "notify_fifo", "instance")
	if vs == nil {
		as.missing(p, "vrrp")
		return a
	}
	v := &VRRP{}
	if path, pn := vs.text(p, "notify_fifo", true); pn != nil {
		if path == "" {
			p.fail(pn, "authority.vrrp.notify_fifo", "must not be empty")
		} else {
			v.NotifyFIFO = p.abs(pn, "authority.vrrp.notify_fifo", path)
		}
	}
	if inst, in := vs.text(p, "instance", true); in != nil {
		if inst == "" || strings.ContainsAny(inst, " \t\"") {
			p.fail(in, "authority.vrrp.instance", "%q is not a vrrp_instance name", inst)
		}
		v.Instance = inst
	}
	a.VRRP = v
	return a
}

// addresses checks listen and advertise, and returns them with advertise
// defaulted from listen.
func (p *parser) addresses(s *section, tls bool) (listen, advertise string) {
	listen, ln := s.text(p, "listen", true)
	valid, wildcard := false, false
	if ln != nil {
		var msg string
		msg, wildcard = checkListen(listen)
		if msg != "" {
			p.fail(ln, "listen", "%s", msg)
		}
		valid = msg == ""
	}
	if adv, an := s.text(p, "advertise", false); an != nil {
		if msg := checkURL(adv); msg != "" {
			p.fail(an, "advertise", "%s", msg)
		}
		return listen, adv
	}
	switch {
	case !valid:
		return listen, ""
	case wildcard:
		// Binding every interface is fine; telling peers to dial 0.0.0.0
		// is not.
		p.fail(ln, "advertise", "required when listen's host is empty or unspecified (%s): peers cannot dial that", listen)
		return listen, ""
	case tls:
		return listen, "https://" + listen
	}
	return listen, "http://" + listen
}

// peers checks the peers list. self and advertise are this node's name
// and URL: a peer at this node's own URL would be this node talking to
// itself, counted as a second member towards every majority.
func (p *parser) peers(s *section, self, advertise string) ([]Peer, map[string]int) {
	names := make(map[string]int)
	urls := make(map[string]int)
	items, ok := p.optionalList(s, "peers")
	if !ok {
		return nil, names
	}
	var out []Peer
	for i, it := range items {
		field := index("peers", i)
		ps := p.fields(it, field, it.Line, "name", "url")
		if ps == nil {
			continue
		}
		name, nn := ps.text(p, "name", true)
		url, un := ps.text(p, "url", true)
		if nn != nil {
			nf := child(field, "name")
			line, dup := names[name]
			switch msg := checkName(name); {
			case msg != "":
				p.fail(nn, nf, "%s", msg)
			case name == self:
				p.fail(nn, nf, "%q is this node's own name; peers lists only the other nodes", name)
			case dup:
				p.fail(nn, nf, "%q is already a peer at line %d", name, line)
			}
			if !dup {
				names[name] = nn.Line
			}
		}
		if un != nil {
			uf := child(field, "url")
			if msg := checkURL(url); msg != "" {
				p.fail(un, uf, "%s", msg)
			} else {
				same := sameURL(url)
				line, dup := urls[same]
				switch {
				case advertise != "" && same == sameURL(advertise):
					p.fail(un, uf, "%s is this node's own address (advertise %s); peers lists only the other nodes", url, advertise)
				case dup:
					p.fail(un, uf, "%s is already the URL of the peer at line %d; each peer has its own", url, line)
				default:
					urls[same] = un.Line
				}
			}
		}
		out = append(out, Peer{Name: name, URL: url})
	}
	return out, names
}

// optionalList returns the list under key, or false when it is not set or
// not a list.
func (p *parser) optionalList(s *section, key string) ([]*yaml.Node, bool) {
	v, ok := s.vals[key]
	if !ok {
		return nil, false
	}
	return p.list(v, child(s.field, key))
}

// federation checks the federation section and reads its secret.
func (p *parser) federation(s *section) Federation {
	fed := Federation{MaxBody: defaultMaxBody, ReplayWindow: defaultReplayWindow}
	if _, ok := s.vals["federation"]; !ok {
		p.failAt(s.absent("federation"), "federation", "required: give secret_file or tls")
		return fed
	}
	sec := s.sub(p, "federation", "secret_file", "tls", "max_body", "replay_window", "operator_secret_file")
	if sec == nil {
		return fed
	}
	sf, hasSecret := sec.vals["secret_file"]
	_, hasTLS := sec.vals["tls"]
	switch {
	case hasSecret && hasTLS:
		p.fail(sec.keys["tls"], "federation", "give secret_file or tls, not both (secret_file is at line %d)", sf.Line)
	case !hasSecret && !hasTLS:
		p.failAt(sec.line, "federation", "give secret_file or tls")
	}
	if name, v := sec.text(p, "secret_file", false); v != nil {
		fed.Secret = p.secret(v, name)
	}
	if hasTLS {
		fed.TLS = p.tls(sec)
	}
	if name, v := sec.text(p, "operator_secret_file", false); v != nil {
		fed.OperatorSecret = p.secretAt(v, name, "federation.operator_secret_file")
		if fed.OperatorSecret != nil && bytes.Equal(fed.OperatorSecret, fed.Secret) {
			p.fail(v, "federation.operator_secret_file", "holds the same secret as secret_file; the operator's secret must differ, or every operator can sign node events")
		}
	}
	if size, v := sec.text(p, "max_body", false); v != nil {
		if n, err := parseSize(size); err != nil {
			p.fail(v, "federation.max_body", "%v", err)
		} else {
			fed.MaxBody = n
		}
	}
	if v, ok := sec.vals["replay_window"]; ok {
		if d, ok := p.duration(v, "federation.replay_window"); ok && d == 0 {
			p.fail(v, "federation.replay_window", "must be greater than 0")
		} else if ok && d < time.Second {
			p.fail(v, "federation.replay_window", "must be at least 1s, found %s: clocks that far apart would refuse every request", d)
		} else if ok {
			fed.ReplayWindow = d
		}
	}
	return fed
}

// maxSecretFile bounds the secret file, so that a mistaken path (a log
// file, a disk image) is not read whole. The lower bound on the secret is
// auth.MinSecretLen, shared with ipfence ctl --token-file.
const maxSecretFile = 64 << 10

// secret reads the shared secret from the file named at n.
func (p *parser) secret(n *yaml.Node, name string) []byte {
	return p.secretAt(n, name, "federation.secret_file")
}

// secretAt reads a secret from the file named at n, for field.
func (p *parser) secretAt(n *yaml.Node, name, field string) []byte {
	if name == "" {
		p.fail(n, field, "must not be empty")
		return nil
	}
	path := p.resolve(name)
	// Stat before opening: opening a FIFO or a device such as /dev/zero
	// could block or never end.
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.fail(n, field, "secret file %s does not exist", path)
		return nil
	case err != nil:
		p.fail(n, field, "cannot read secret file: %v", err)
		return nil
	case !info.Mode().IsRegular():
		p.fail(n, field, "secret file %s is not a regular file", path)
		return nil
	case info.Mode().Perm()&0o004 != 0:
		// A secret every local user can read lets every local user forge
		// node events; refusing it is how ssh treats a private key.
		p.fail(n, field, "secret file %s is readable by every user (mode %#o); make it private: chmod 600 %s", path, info.Mode().Perm(), path)
		return nil
	case info.Size() > maxSecretFile:
		p.fail(n, field, "secret file %s holds %d bytes; a secret file holds at most %d", path, info.Size(), maxSecretFile)
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		p.fail(n, field, "cannot read secret file: %v", err)
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		p.fail(n, field, "cannot read secret file: %v", err)
		return nil
	}
	secret := bytes.TrimSpace(data)
	if len(secret) < auth.MinSecretLen {
		p.fail(n, field, "secret file %s holds %d bytes after trimming whitespace; at least %d are needed (openssl rand -hex 32 makes one)", path, len(secret), auth.MinSecretLen)
		return nil
	}
	return secret
}

// tls checks federation.tls: three files that must exist.
func (p *parser) tls(fed *section) *TLS {
	ts := fed.sub(p, "tls", "cert_file", "key_file", "ca_file")
	if ts == nil {
		return nil
	}
	out := &TLS{}
	for _, f := range []struct {
		key string
		dst *string
	}{{"cert_file", &out.CertFile}, {"key_file", &out.KeyFile}, {"ca_file", &out.CAFile}} {
		name, v := ts.text(p, f.key, true)
		if v == nil {
			continue
		}
		field := child(ts.field, f.key)
		if name == "" {
			p.fail(v, field, "must not be empty")
			continue
		}
		path := p.resolve(name)
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			p.fail(v, field, "%s does not exist", path)
		case err != nil:
			p.fail(v, field, "%v", err)
		case !info.Mode().IsRegular():
			p.fail(v, field, "%s is not a regular file", path)
		default:
			*f.dst = p.abs(v, field, name)
		}
	}
	return out
}

// resolve makes a path from the file relative to the file's folder.
func (p *parser) resolve(name string) string {
	if filepath.IsAbs(name) {
		return filepath.Clean(name)
	}
	return filepath.Join(p.dir, name)
}

// abs resolves a path from the file and makes it absolute.
func (p *parser) abs(n *yaml.Node, field, name string) string {
	path, err := absolute(p.resolve(name))
	if err != nil {
		p.fail(n, field, "%v", err)
		return ""
	}
	return path
}

// absolute is filepath.Abs, with what it failed at named.
func absolute(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("cannot make %s absolute: %w", path, err)
	}
	return abs, nil
}

// providerTypes are the known provider types, in the order messages list
// them.
var providerTypes = []string{TypeCloudsim, TypeAWS, TypeMemory, TypeOnPrem, TypeOCI, TypeAzure}

// providers checks the providers section: a mapping from reference to
// provider.
func (p *parser) providers(s *section) (map[string]Provider, map[string]bool) {
	names := make(map[string]bool)
	v, ok := s.vals["providers"]
	if !ok || !p.isMapping(v, "providers") {
		return nil, names
	}
	out := make(map[string]Provider)
	first := make(map[string]int)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.fail(k, "providers", "a provider reference must be a name, found %s", describe(k))
			continue
		}
		name := k.Value
		field := child("providers", name)
		if line, dup := first[name]; dup {
			p.fail(k, field, "defined twice: first at line %d", line)
			continue
		}
		first[name] = k.Line
		names[name] = true
		if msg := checkName(name); msg != "" {
			p.fail(k, field, "provider reference %s", msg)
		}
		ps := p.fields(val, field, k.Line, "type", "endpoint", "region", "workload_device", "workload_next_hop", "garp_count", "garp_repeat_after", "oci", "azure", "api_budget")
		if ps == nil {
			continue
		}
		prov := Provider{Name: name}
		typ, tn := ps.text(p, "type", true)
		if tn != nil && !slices.Contains(providerTypes, typ) {
			p.fail(tn, child(field, "type"), "unknown provider type %q (known: %s)", typ, strings.Join(providerTypes, ", "))
		}
		prov.Type = typ
		if ep, en := ps.text(p, "endpoint", false); en != nil {
			if msg := checkURL(ep); msg != "" {
				p.fail(en, child(field, "endpoint"), "%s", msg)
			}
			prov.Endpoint = ep
		} else if typ == TypeCloudsim {
			p.failAt(ps.absent("endpoint"), child(field, "endpoint"), "required for type cloudsim: the simulator's URL, such as http://127.0.0.1:9000")
		}
		if region, rn := ps.text(p, "region", false); rn != nil {
			if region == "" {
				p.fail(rn, child(field, "region"), "must not be empty; leave region out for the default")
			}
			prov.Region = region
		} else if typ == TypeCloudsim {
			prov.Region = defaultRegion
		}
		prov.OnPrem = p.onprem(ps, field, typ)
		prov.OCI = p.oci(ps, field, typ)
		prov.Azure = p.azure(ps, field, typ)
		prov.Budget = p.budget(ps, field, typ)
		out[name] = prov
	}
	return out, names
}

// onprem checks the on-premises driver's keys: required for type onprem,
// refused with any other type.
func (p *parser) onprem(ps *section, field, typ string) OnPrem {
	if typ != TypeOnPrem {
		for _, k := range []string{"workload_device", "workload_next_hop", "garp_count", "garp_repeat_after"} {
			if v, ok := ps.vals[k]; ok {
				p.fail(v, child(field, k), "only for type onprem")
			}
		}
		return OnPrem{}
	}
	o := OnPrem{GARPCount: defaultGARPCount, GARPRepeatAfter: defaultGARPRepeatAfter}
	if dev, dn := ps.text(p, "workload_device", true); dn != nil {
		if dev == "" || len(dev) > 15 || strings.ContainsAny(dev, "/ ") {
			p.fail(dn, child(field, "workload_device"), "%q is not an interface name", dev)
		}
		o.WorkloadDevice = dev
	}
	if hop, hn := ps.text(p, "workload_next_hop", false); hn != nil {
		a, err := netip.ParseAddr(hop)
		if err != nil || !a.Is4() {
			p.fail(hn, child(field, "workload_next_hop"), "%q is not an IPv4 address", hop)
		} else {
			o.WorkloadNextHop = a
		}
	}
	if v, ok := ps.vals["garp_count"]; ok {
		if n, ok := p.integer(v, child(field, "garp_count")); ok {
			if n < 1 || n > 100 {
				p.fail(v, child(field, "garp_count"), "must be from 1 to 100, found %d", n)
			} else {
				o.GARPCount = n
			}
		}
	}
	if v, ok := ps.vals["garp_repeat_after"]; ok {
		if d, ok := p.duration(v, child(field, "garp_repeat_after")); ok {
			o.GARPRepeatAfter = d
		}
	}
	return o
}

// place is where an address was listed, for the message about its
// duplicate.
type place struct {
	line  int
	field string
}

// pools checks the pools list, expanding address ranges.
func (p *parser) pools(s *section, r *refs) []capture.Pool {
	items, ok := p.optionalList(s, "pools")
	if !ok {
		return nil
	}
	var out []capture.Pool
	names := make(map[string]int)
	seen := make(map[netip.Addr]place)
	nics := make(map[[2]string]nicUse)
	total := 0
	for i, it := range items {
		field := index("pools", i)
		ps := p.fields(it, field, it.Line, "name", "provider", "group", "l2_domain", "addresses", "members", "epoch_line")
		if ps == nil {
			continue
		}
		var pool capture.Pool
		if name, nn := ps.text(p, "name", true); nn != nil {
			nf := child(field, "name")
			if msg := checkName(name); msg != "" {
				p.fail(nn, nf, "%s", msg)
			} else if line, dup := names[name]; dup {
				p.fail(nn, nf, "%q is already a pool at line %d", name, line)
			} else {
				names[name] = nn.Line
			}
			pool.Name = name
		}
		if prov, pn := ps.text(p, "provider", true); pn != nil {
			if !r.providers[prov] {
				p.fail(pn, child(field, "provider"), "%q names no provider in the providers section (%s)", prov, nameList(slices.Sorted(maps.Keys(r.providers))))
			}
			pool.Provider = prov
		}
		for _, opt := range []struct {
			key string
			dst *string
		}{{"group", &pool.Group}, {"l2_domain", &pool.L2Domain}} {
			// An empty value means not set, as the schema's l2_domain: ""
			// shows.
			if v, vn := ps.text(p, opt.key, false); vn != nil && v != "" {
				if msg := checkName(v); msg != "" {
					p.fail(vn, child(field, opt.key), "%s", msg)
				}
				*opt.dst = v
			}
		}
		if line, ln := ps.text(p, "epoch_line", false); ln != nil {
			switch line {
			case LineFederation:
			case LineEtcd:
				if r.etcdPools == nil {
					r.etcdPools = map[string]bool{}
				}
				r.etcdPools[pool.Name] = true
			default:
				p.fail(ln, child(field, "epoch_line"), "%q is not %s or %s", line, LineFederation, LineEtcd)
			}
		}
		pool.Addresses = p.poolAddresses(ps, seen, &total)
		pool.Members = p.members(ps, r, pool.Provider, nics)
		out = append(out, pool)
	}
	return out
}

// nameList renders names for a message.
func nameList(names []string) string {
	if len(names) == 0 {
		return "none defined"
	}
	return strings.Join(names, ", ")
}

// poolAddresses checks and expands a pool's addresses. Seen maps every
// address already listed in the file to where, and total counts them.
func (p *parser) poolAddresses(ps *section, seen map[netip.Addr]place, total *int) []netip.Addr {
	items, ok := p.optionalList(ps, "addresses")
	if !ok {
		if _, set := ps.vals["addresses"]; !set {
			ps.missing(p, "addresses")
		}
		return nil
	}
	field := child(ps.field, "addresses")
	if len(items) == 0 {
		p.fail(ps.vals["addresses"], field, "must list at least one address")
	}
	var out []netip.Addr
	for j, it := range items {
		af := index(field, j)
		text, ok := p.str(it, af)
		if !ok {
			continue
		}
		first, n, err := parseAddrs(text)
		if err != nil {
			p.fail(it, af, "%v", err)
			continue
		}
		if *total+n > maxAddresses {
			// Reported once; the total stays past the cap so that later
			// entries are checked but not expanded.
			if *total <= maxAddresses {
				p.fail(it, af, "the pools hold more than %d addresses in all, the most one file may list", maxAddresses)
			}
			*total = maxAddresses + 1
			continue
		}
		*total += n
		var dup netip.Addr
		var where place
		dups := 0
		for a, k := first, 0; k < n; a, k = a.Next(), k+1 {
			if w, ok := seen[a]; ok {
				if dups == 0 {
					dup, where = a, w
				}
				dups++
				continue
			}
			seen[a] = place{it.Line, af}
			out = append(out, a)
		}
		switch {
		case dups == 1:
			p.fail(it, af, "%s is already listed at line %d (%s)", dup, where.line, where.field)
		case dups > 1:
			p.fail(it, af, "%d of these addresses are already listed; the first, %s, at line %d (%s)", dups, dup, where.line, where.field)
		}
	}
	return out
}

// nicUse is the member that first named a capture target of a provider.
type nicUse struct {
	node  string
	line  int
	field string
}

// members checks a pool's members. nics maps every (provider, target)
// pair named so far, in any pool, to its first member: one NIC belongs to
// one node, and two members sharing it would each believe they hold
// what the other holds.
func (p *parser) members(ps *section, r *refs, provider string, nics map[[2]string]nicUse) []capture.Member {
	items, ok := p.optionalList(ps, "members")
	if !ok {
		if _, set := ps.vals["members"]; !set {
			ps.missing(p, "members")
		}
		return nil
	}
	field := child(ps.field, "members")
	if len(items) == 0 {
		p.fail(ps.vals["members"], field, "must list at least one member")
	}
	var out []capture.Member
	nodes := make(map[string]int)
	for i, it := range items {
		mf := index(field, i)
		ms := p.fields(it, mf, it.Line, "node", "priority", "target")
		if ms == nil {
			continue
		}
		var m capture.Member
		if node, nn := ms.text(p, "node", true); nn != nil {
			nf := child(mf, "node")
			if _, peer := r.peers[node]; node != r.node && !peer && r.nodeOK {
				p.fail(nn, nf, "%q is neither this node (%s) nor a peer (%s)", node, r.node, nameList(slices.Sorted(maps.Keys(r.peers))))
			} else if line, dup := nodes[node]; dup {
				p.fail(nn, nf, "%q is already a member of this pool at line %d", node, line)
			} else {
				nodes[node] = nn.Line
			}
			m.Node = node
		}
		if v, ok := ms.vals["priority"]; ok {
			pf := child(mf, "priority")
			if prio, ok := p.integer(v, pf); ok && prio < 0 {
				p.fail(v, pf, "must be >= 0, found %d", prio)
			} else {
				m.Priority = prio
			}
		} else {
			ms.missing(p, "priority")
		}
		if target, tn := ms.text(p, "target", true); tn != nil {
			tf := child(mf, "target")
			if r.types[provider] == TypeAzure && strings.TrimSpace(target) != "" {
				target = p.azureTarget(r.provs[provider].Azure, tn, tf, target)
			}
			if strings.TrimSpace(target) == "" {
				p.fail(tn, tf, "must not be empty: the NIC id or interface that holds the address on %s", m.Node)
			} else if r.types[provider] == TypeOnPrem {
				// On premises a target is an interface on the member's
				// own host: every host may have its eth0.
			} else if use, ok := nics[[2]string{provider, target}]; ok && use.node != m.Node {
				p.fail(tn, tf, "%s is already the target of %s at line %d (%s); two members cannot share one NIC", target, use.node, use.line, use.field)
			} else if !ok {
				nics[[2]string{provider, target}] = nicUse{m.Node, tn.Line, tf}
			}
			p.checkTarget(r.types[provider], tn, tf, target)
			m.Target = target
		}
		out = append(out, m)
	}
	return out
}

// approval checks the approval section. Without one, or with auto false,
// the policy denies everything.
func (p *parser) approval(s *section, providers map[string]bool) policy.Policy {
	var pol policy.Policy
	as := s.sub(p, "approval", "auto", "providers", "kinds", "cidrs", "max_per_run")
	if as == nil {
		return pol
	}
	if v, ok := as.vals["auto"]; ok {
		pol.Auto, _ = p.boolean(v, "approval.auto")
	}
	if v, ok := as.vals["providers"]; ok {
		pol.Providers = []string{}
		for _, it := range p.strs(v, "approval.providers") {
			if it.text != "*" && !providers[it.text] {
				p.fail(it.node, it.field, "%q names no provider in the providers section; use \"*\" or one of: %s", it.text, nameList(slices.Sorted(maps.Keys(providers))))
			}
			pol.Providers = append(pol.Providers, it.text)
		}
	}
	if v, ok := as.vals["kinds"]; ok {
		pol.Kinds = []capture.Kind{}
		for _, it := range p.strs(v, "approval.kinds") {
			if it.text != "*" && !capture.Kind(it.text).Valid() {
				known := make([]string, len(capture.Kinds()))
				for j, k := range capture.Kinds() {
					known[j] = string(k)
				}
				p.fail(it.node, it.field, "unknown action kind %q; use \"*\" or one of: %s", it.text, strings.Join(known, ", "))
			}
			pol.Kinds = append(pol.Kinds, capture.Kind(it.text))
		}
	}
	if v, ok := as.vals["cidrs"]; ok {
		pol.CIDRs = []netip.Prefix{}
		for _, it := range p.strs(v, "approval.cidrs") {
			prefix, err := netip.ParsePrefix(it.text)
			switch {
			case err != nil:
				p.fail(it.node, it.field, "%q is not a CIDR such as 10.0.0.0/24", it.text)
			case prefix != prefix.Masked():
				p.fail(it.node, it.field, "%q has host bits set; the network is %s", it.text, prefix.Masked())
			default:
				pol.CIDRs = append(pol.CIDRs, prefix)
			}
		}
	}
	if v, ok := as.vals["max_per_run"]; ok {
		if n, ok := p.integer(v, "approval.max_per_run"); ok && n < 1 {
			p.fail(v, "approval.max_per_run", "must be at least 1, found %d", n)
		} else {
			pol.MaxPerRun = n
		}
	} else if pol.Auto {
		pol.MaxPerRun = defaultMaxPerRun
	}
	if pol.Auto {
		// An omitted allow-list would allow nothing, so auto: true alone
		// would approve nothing while reading as if it approved all.
		for _, l := range []struct{ key, hint string }{
			{"providers", `["*"] allows every provider`},
			{"kinds", `["*"] allows every action kind`},
			{"cidrs", `["0.0.0.0/0", "::/0"] allows every address`},
		} {
			if _, ok := as.vals[l.key]; !ok {
				p.failAt(as.line, child("approval", l.key), "required when auto is true; %s", l.hint)
			}
		}
	}
	return pol
}

// timingFloor is the least value a timing setting may take, when set: a
// node ticking faster spends its time on timers, fsyncs and requests
// instead of work, and its peers' views flap.
var timingFloor = map[string]time.Duration{
	"reconcile_interval": 10 * time.Millisecond,
	"heartbeat_interval": 10 * time.Millisecond,
	"heartbeat_ttl":      20 * time.Millisecond,
	"running_timeout":    100 * time.Millisecond,
}

var timingFloorWhy = map[string]string{
	"reconcile_interval": "each pass reads and writes the state file",
	"heartbeat_interval": "each heartbeat is a request to every peer",
	"heartbeat_ttl":      "a member would go stale between two heartbeats",
	"running_timeout":    "a provider call in progress would be requeued and repeated",
}

// timing checks the timing section and fills in its defaults.
func (p *parser) timing(s *section) Timing {
	t := Timing{
		ReconcileInterval: defaultReconcileInterval,
		HeartbeatInterval: defaultHeartbeatInterval,
		RunningTimeout:    defaultRunningTimeout,
	}
	ts := s.sub(p, "timing", "reconcile_interval", "heartbeat_interval", "heartbeat_ttl",
		"promotion_hold", "deprovision_hold", "running_timeout")
	if ts == nil {
		t.HeartbeatTTL = defaultTTLFactor * t.HeartbeatInterval
		return t
	}
	read := func(key string, dst *time.Duration, positive bool) bool {
		v, ok := ts.vals[key]
		if !ok {
			return false
		}
		field := child("timing", key)
		d, ok := p.duration(v, field)
		if ok && positive && d == 0 {
			p.fail(v, field, "must be greater than 0")
			return false
		}
		if floor := timingFloor[key]; ok && d > 0 && d < floor {
			p.fail(v, field, "must be at least %s, found %s: %s", floor, d, timingFloorWhy[key])
			return false
		}
		if ok {
			*dst = d
		}
		return ok
	}
	read("reconcile_interval", &t.ReconcileInterval, true)
	read("heartbeat_interval", &t.HeartbeatInterval, true)
	read("promotion_hold", &t.PromotionHold, false)
	read("deprovision_hold", &t.DeprovisionHold, false)
	read("running_timeout", &t.RunningTimeout, true)
	if read("heartbeat_ttl", &t.HeartbeatTTL, true) {
		if t.HeartbeatTTL <= t.HeartbeatInterval {
			p.fail(ts.vals["heartbeat_ttl"], "timing.heartbeat_ttl", "must be longer than heartbeat_interval (%s), found %s", t.HeartbeatInterval, t.HeartbeatTTL)
		}
	} else if _, set := ts.vals["heartbeat_ttl"]; !set {
		t.HeartbeatTTL = defaultTTLFactor * t.HeartbeatInterval
	}
	return t
}
