#!/usr/bin/env bash
# build-busybox.sh OUT: a static BusyBox 1.37.0 built from upstream's source, for the
# conformance images (tests/conformance/harness). Upstream's e2e busybox image is BusyBox 1.37
# as upstream releases it; Debian's busybox-static differs where specs look: its ash drops
# environment variables whose names are not shell identifiers ("data-1", which the ConfigMap and
# Secret env specs print with `sh -c env`; Debian reverts upstream's commit that passes them on),
# and bash, the way round that, words errors unlike ash (the read-only root spec expects
# "/bin/sh: can't create /file: Read-only file system"). The source is the orig tarball in
# Debian's archive (the packages registry this machine reaches), checked against the SHA-256
# trixie's Sources index gives; defconfig, static, without tc (it needs kernel headers' CBQ).
set -euo pipefail
out=${1:?usage: build-busybox.sh OUT}
version=1.37.0
sha256=3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4
path=debian/pool/main/b/busybox/busybox_${version}.orig.tar.bz2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# https first; plain http as apt itself fetches (the checksum is what is trusted).
url=https://deb.debian.org/$path
if ! curl -fsSL --retry 3 -o "$work/src.tar.bz2" "$url"; then
  url=http://deb.debian.org/$path
  curl -fsSL --retry 3 -o "$work/src.tar.bz2" "$url" || { echo "build-busybox: cannot download $url" >&2; exit 1; }
fi
echo "$sha256  $work/src.tar.bz2" | sha256sum -c --quiet - || { echo "build-busybox: $url does not have SHA-256 $sha256" >&2; exit 1; }
tar -C "$work" -xjf "$work/src.tar.bz2"
src=$work/busybox-$version
make -s -C "$src" defconfig >/dev/null
sed -i -e 's/^# CONFIG_STATIC is not set$/CONFIG_STATIC=y/' -e 's/^CONFIG_TC=y$/# CONFIG_TC is not set/' "$src/.config"
grep -qx 'CONFIG_STATIC=y' "$src/.config" || { echo "build-busybox: defconfig has no CONFIG_STATIC line to set" >&2; exit 1; }
make -s -C "$src" -j"$(nproc)" busybox >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 1; }
"$src/busybox" true
install -D -m 0755 "$src/busybox" "$out"
