// Package config reads a node daemon's configuration: one YAML file per
// node naming the node, its peers and how they authenticate each other,
// the providers and pools the node takes part in, the approval policy and
// the loop's timing.
//
// Parse checks everything that can be checked without the network — names,
// addresses, references between sections, the secret — and reports every
// problem at once, each as an *Error with its file, line and field, so that
// an operator fixes a file in one pass instead of one problem per restart:
//
//	n1.yaml:14: pools[0].members[1].priority: must be >= 0, found -1
//	n1.yaml:22: pools[1].addresses[0]: 10.0.0.10 is already listed at line 13 (pools[0].addresses[0])
//
// Unknown keys are errors: a misspelt key silently ignored would leave a
// default in force that the operator believes is overridden. YAML aliases
// are refused. An empty value counts as not set.
//
// The file, with every key; the commented values are the defaults:
//
//	node: n1                            # required; [a-z0-9][a-z0-9-]{0,62}, as are all names
//	listen: 127.0.0.1:7001              # required; host:port
//	advertise: http://127.0.0.1:7001    # the URL peers use; default http://<listen>, https with tls
//	data_dir: /var/lib/ipfence/n1       # required; the bbolt file is <data_dir>/state.db
//	peers:                              # the other nodes
//	  - {name: n2, url: http://127.0.0.1:7002}   # each its own URL, never this node's
//	federation:                         # required, with secret_file or tls
//	  secret_file: secret               # HMAC-SHA256 key, at least 32 bytes once trimmed; not world-readable
//	  # tls: {cert_file: node.crt, key_file: node.key, ca_file: ca.crt}   # mutual TLS instead
//	  # max_body: 1MiB
//	  # replay_window: 30s              # at least 1s
//	providers:                          # reference: provider
//	  sim:
//	    type: cloudsim                  # cloudsim, aws or memory
//	    endpoint: http://127.0.0.1:9000 # required for cloudsim; aws: the SDK's by default
//	    # region: us-east-1             # cloudsim's default; aws: the SDK's chain by default
//	pools:
//	  - name: web
//	    provider: sim                   # a reference above
//	    group: web                      # placement group; without one, each node alone
//	    # l2_domain: dc1-vlan100        # set: an on-premises (proxy-ARP) pool
//	    addresses: [10.0.0.10, 10.0.0.20-10.0.0.29]   # a range is inclusive; each address once per file
//	    members:                        # this node or peers; lower priority wins
//	      - {node: n1, priority: 1, target: eni-n1}   # a cloud NIC belongs to one node
//	approval:                           # without it, every action waits for an operator
//	  auto: true
//	  providers: ["*"]                  # with auto, the three lists are required
//	  kinds: ["*"]                      # or assign-secondary-ip, ensure-forwarding-enabled, ...
//	  cidrs: [10.0.0.0/24]
//	  # max_per_run: 100
//	timing:
//	  # reconcile_interval: 1s          # at least 10ms, as heartbeat_interval
//	  # heartbeat_interval: 500ms
//	  # heartbeat_ttl: 1.5s             # 3 × heartbeat_interval; must be longer than it
//	  # promotion_hold: 0s
//	  # deprovision_hold: 0s
//	  # running_timeout: 1m             # at least 100ms
//
// Relative paths (data_dir, secret_file, the tls files) are relative to the
// file's folder.
package config
