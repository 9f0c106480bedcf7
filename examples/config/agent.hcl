# drover agent --config examples/config/agent.hcl
#
# Every key is a flag of drover agent, with _ for - (drover agent --help
# says what each does); a flag on the command line wins over this file.
# This file sets every one of them. --config may be given more than once,
# or name a directory (its *.hcl files, in lexical order); a later file
# wins over an earlier one.

name      = "node-a"              # the node's name (default: hostname)
data_dir  = "/var/lib/drover-agent"
servers   = ["https://10.0.0.1:4646", "https://10.0.0.2:4646", "https://10.0.0.3:4646"]
http_addr = "10.0.0.11:4647"      # serves task logs and exec to the servers
log_level = "info"

# Mutual TLS: ca.pem, agent.pem and agent-key.pem from the cluster's TLS directory.
tls     = true
tls_dir = "/etc/drover/tls"

# Where jobs may place work: constraints read these as ${node.datacenter},
# ${node.class}, ${node.pool} and ${meta.rack}.
datacenter = "dc1"
node_class = "web"
node_pool  = "default"
meta {
  rack = "r1"
}

# Host volumes: directories of this machine jobs mount by name (a group's
# volume "x" { type = "host", source = "shared" }), :ro for read-only.
# Nomad's client form, host_volume "shared" { path = "/srv/shared",
# read_only = false }, is read too, one block per volume.
host_volume = ["shared=/srv/shared", "certs=/etc/ssl/certs:ro"]

# The address tasks' ports are reached at, and the range dynamic ports come from.
network_ip       = "10.0.0.11"
min_dynamic_port = 20000
max_dynamic_port = 32000

# Bounds on each task artifact's fetch: time, and MB downloaded or unpacked.
artifact_timeout = "30m"
artifact_max_mb  = 102400

# Groups in network mode "bridge": the Linux bridge (made if missing) and
# the subnet their addresses are taken from.
bridge_network_name   = "drover0"
bridge_network_subnet = "172.26.64.0/20"

# Task drivers: docker is offered besides when its daemon answers.
drivers                   = ["exec", "raw_exec"]
docker_allow_privileged   = false
docker_allow_host_network = false
docker_allow_host_pid     = false
docker_allow_volumes      = false
