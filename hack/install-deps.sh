#!/usr/bin/env bash
# Installs what skiff's build and tests need on a fresh Debian machine, idempotently:
# Debian's etcd (etcd-server for multi-member tests, etcd-client for etcdctl), containerd and
# runc (the node agent's runtime), iproute2, FRR and BIRD (the lab's top-of-rack router),
# tcpdump, bzip2 (BusyBox's source), nginx and curl (the conformance images), and the Go modules. Go itself is expected at
# /usr/local/go, as on every machine of this kind. No package's own service is started: skiff
# runs its own etcd, containerd and routers.
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH

need=()
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# The lab's top-of-rack routers (FRR or BIRD) and the capture that proves there is no overlay.
command -v vtysh >/dev/null 2>&1 || need+=(frr)
command -v bird >/dev/null 2>&1 || need+=(bird2)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
# eBPF: bpf2go compiles bpf/ with Debian's clang 14 (make generate/verify), bpftool inspects.
command -v clang-14 >/dev/null 2>&1 || need+=(clang-14)
command -v llvm-strip-14 >/dev/null 2>&1 || need+=(llvm-14)
command -v bpftool >/dev/null 2>&1 || need+=(bpftool)
[ -f /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
# The service e2e checks that skiff leaves the nftables and iptables rulesets alone.
command -v nft >/dev/null 2>&1 || need+=(nftables)
command -v iptables-save >/dev/null 2>&1 || need+=(iptables)
# The conformance images (tests/conformance) are assembled from BusyBox (built from source by
# hack/build-busybox.sh: curl, bzip2, make and gcc), Debian's nginx and curl, since no registry
# is reachable.
command -v bzip2 >/dev/null 2>&1 || need+=(bzip2)
command -v make >/dev/null 2>&1 || need+=(make)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v curl >/dev/null 2>&1 || need+=(curl)
# dig for the DNS conformance specs' queriers (agnhost and glibc-dns-testing images).
command -v dig >/dev/null 2>&1 || need+=(bind9-dnsutils)
# nc with -v/-t/-u for the Services specs' exec pods (Debian's busybox nc has none of them).
[ -x /bin/nc.openbsd ] || need+=(netcat-openbsd)
# The install e2e boots Debian's systemd as PID 1 of a throwaway host (tests/e2e/install); nsenter
# and unshare (util-linux) enter and make it.
[ -x /lib/systemd/systemd ] || need+=(systemd)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
# The Vagrantfile is validated against both providers it supports.
command -v vagrant >/dev/null 2>&1 || need+=(vagrant)
dpkg -s vagrant-libvirt >/dev/null 2>&1 || need+=(vagrant-libvirt)
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${need[*]}"
  # Debian's packages would start their own etcd and containerd; skiff runs its own.
  policy=/usr/sbin/policy-rc.d
  created=0
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; created=1; fi
  trap '[ $created = 1 ] && rm -f "$policy"' EXIT
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || true
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
go mod download
