#!/usr/bin/env bash
# Fetches Debian 12's own packaged kernel (linux-image-cloud-amd64's
# current image, from the package mirror; no build) into
# $CACHE/debian-kernel and prints the shell assignment the cgroup v2
# guest test reads:
#   eval "$(bash scripts/debian-kernel.sh)"
# Warm, or offline with one fetched before, it fetches nothing.
set -euo pipefail
CACHE=${CACHE:-/var/cache/rdmabot}
dir=$CACHE/debian-kernel
mkdir -p "$dir"
pkg() { apt-cache depends linux-image-cloud-amd64 2>/dev/null | sed -nE 's/^ *Depends: (linux-image-[^ <>]+)$/\1/p' | head -n1; }
p=$(pkg)
if [ -z "$p" ] && [ "$(id -u)" = 0 ]; then
  apt-get update -q >&2 || true
  p=$(pkg)
fi
if [ -n "$p" ] && [ ! -d "$dir/$p/boot" ]; then
  tmp=$(mktemp -d)
  chmod 755 "$tmp" # apt's _apt user writes the download there
  if (cd "$tmp" && apt-get download -q "$p" >&2); then
    rm -rf "$dir/$p.new"
    dpkg-deb -x "$tmp"/"$p"_*.deb "$dir/$p.new"
    rm -rf "$dir/$p.new/lib" "$dir/$p.new/usr" # only boot/ is booted
    mv "$dir/$p.new" "$dir/$p"
  fi
  rm -rf "$tmp"
fi
# The newest fetched, when this one could not be.
k=$(ls -1 "$dir"/*/boot/vmlinuz-* 2>/dev/null | sort -V | tail -n1 || true)
if [ -z "$k" ]; then
  echo "debian-kernel: no Debian kernel image could be fetched into $dir" >&2
  exit 1
fi
echo "export RDMABOT_TEST_V2_KERNEL=$k"
