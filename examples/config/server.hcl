# drover server --config examples/config/server.hcl
#
# Every key is a flag of drover server, with _ for - (drover server --help
# says what each does); a flag on the command line wins over this file.
# This file sets every one of them, mostly to its default. --config may be
# given more than once, or name a directory (its *.hcl files, in lexical
# order); a later file wins over an earlier one.

name      = "s1"                  # unique per server (default: hostname)
data_dir  = "/var/lib/drover"     # the embedded etcd's data, and tls/ unless tls_dir says otherwise
http_addr = "0.0.0.0:4646"        # the API (and the web UI at /ui/)
log_level = "info"                # debug, info, warn, error

# Security: mutual TLS with the certificates in tls_dir, ACL tokens on
# every operator request. The first server makes a CA there when it has none.
tls     = true
tls_dir = "/etc/drover/tls"
acl     = true

# etcd: the embedded member (etcd_endpoints empty) ...
etcd_client_addr = "127.0.0.1:2379"
etcd_peer_addr   = "127.0.0.1:2380"
# ... or an existing etcd cluster, with TLS to it when etcd_ca is set.
etcd_endpoints = []               # such as ["https://10.0.0.1:2379", "https://10.0.0.2:2379"]
etcd_ca        = ""
etcd_cert      = ""
etcd_key       = ""

api_only    = false               # serve the API but never lead
leader_ttl  = "2s"                # the leader election's lease
dns_addr    = ""                  # DNS for <service>.service.drover, such as "127.0.0.1:8600"

http_max_conns            = 16384
max_heartbeats_per_second = 1000

memory_high_percent  = 90         # move a node's lowest-priority service when its tasks use more (0: never)
memory_move_interval = "1m"

event_retention   = "168h"        # drover events' history
event_max_records = 100000
