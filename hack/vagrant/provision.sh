#!/usr/bin/env bash
# Provisions one VM of the Vagrantfile: provision.sh ROLE NET INDEX TOKEN, ROLE being tor,
# master or node. Nodes and the master get Go, the same dependencies as the lab and CI
# (hack/install-deps.sh), a build of skiff installed with `skiff install`; the ToR gets FRR configured
# as the lab's (an iBGP route reflector for NET.0/24 with dynamic neighbors).
set -euo pipefail
role=$1 net=$2 index=$3 token=$4
export DEBIAN_FRONTEND=noninteractive
go_version=1.26.8

sysctl -w net.ipv4.ip_forward=1 >/dev/null
echo net.ipv4.ip_forward=1 > /etc/sysctl.d/90-skiff.conf

if [ "$role" = tor ]; then
  apt-get update -qq && apt-get install -y -qq frr >/dev/null
  sed -i 's/^bgpd=no/bgpd=yes/' /etc/frr/daemons
  cat > /etc/frr/frr.conf <<CONF
frr defaults traditional
hostname tor
!
router bgp 64512
 bgp router-id ${net}.254
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 bgp graceful-restart
 neighbor nodes peer-group
 neighbor nodes remote-as 64512
 bgp listen range ${net}.0/24 peer-group nodes
 !
 address-family ipv4 unicast
  maximum-paths ibgp 8
  neighbor nodes activate
  neighbor nodes route-reflector-client
 exit-address-family
!
CONF
  systemctl restart frr
  exit 0
fi

apt-get update -qq && apt-get install -y -qq curl make git ca-certificates >/dev/null
if [ ! -x /usr/local/go/bin/go ]; then
  curl -fsSL "https://go.dev/dl/go${go_version}.linux-amd64.tar.gz" | tar -C /usr/local -xz
fi
export PATH=/usr/local/go/bin:$PATH
cd /vagrant
bash hack/install-deps.sh
make build
# The path an operator takes: `skiff install` writes the binary, /etc/skiff/config.yaml, the
# images and the systemd unit (Type=notify, KillMode=process), and starts it.
ip=${net}.$((index + 1))
if [ "$role" = master ]; then
  ip=${net}.1
  ./bin/skiff install server --data-dir /var/lib/skiff/server --advertise-address "${ip}" --node-ip "${ip}" --node-name master --token "${token}"
else
  ./bin/skiff install agent --server "https://${net}.1:6443" --token "${token}" --node-ip "${ip}" --node-name "node${index}"
fi

if [ "$role" = master ]; then
  # Nodes peer with the ToR only (no node mesh), as in `skiff lab up --tor frr`.
  kc=/var/lib/skiff/server/admin.kubeconfig
  for _ in $(seq 120); do [ -f "$kc" ] && break; sleep 1; done
  server=$(sed -n 's/^ *server: //p' "$kc")
  grep client-certificate-data "$kc" | awk '{print $2}' | base64 -d > /root/admin.crt
  grep client-key-data "$kc" | awk '{print $2}' | base64 -d > /root/admin.key
  for _ in $(seq 60); do
    curl -fsS --cacert /var/lib/skiff/server/pki/ca.crt --cert /root/admin.crt --key /root/admin.key \
      -H 'Content-Type: application/yaml' -X POST "${server}/api/v1/namespaces/kube-system/configmaps" --data-binary @- <<CM && break
apiVersion: v1
kind: ConfigMap
metadata: {name: skiff-bgp, namespace: kube-system}
data:
  config.yaml: |
    asn: 64512
    nodeMesh: false
    peers:
      - {address: ${net}.254, asn: 64512, holdTime: 9s, keepaliveTime: 3s}
CM
    sleep 2
  done
  rm -f /root/admin.crt /root/admin.key
fi
