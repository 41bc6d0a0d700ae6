#!/usr/bin/env bash
# Prepares what the lab needs, cached so later runs are warm: the Debian
# 6.12 kernel source imported as tree "local" (in $DATA/trees), the lab
# kernel built from it by rdmabot's own builder (artifacts and ccache in
# $CACHE), the guest image and fstests. Prints shell assignments for the paths:
#   eval "$(bash scripts/prepare-lab.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
CACHE=${CACHE:-/var/cache/rdmabot}
DATA=${DATA:-$CACHE}
mkdir -p "$CACHE/bin" "$DATA"
bin=$CACHE/bin/rdmabot
# -buildvcs=auto: the binary names its commit (rdmabot version, A/A results)
# even where GOFLAGS turns stamping off.
go build -buildvcs=auto -o "$bin" ./cmd/rdmabot

repo=$DATA/trees/kernel.git
ref=refs/trees/local/import
if ! git --git-dir="$repo" rev-parse -q --verify "$ref" >/dev/null 2>&1; then
  echo "prepare: importing /usr/src/linux-source-6.12.tar.xz as tree local into $DATA" >&2
  "$bin" tree import --tarball /usr/src/linux-source-6.12.tar.xz --name local --data-dir "$DATA" >&2
fi

# BUILD_NICE: the kernel build and the image run at this nice level.
# test.sh sets 19, so the tests beside it take the CPU first, while the
# binary and the tree import, which the kernel build waits for, keep
# their share.
[ -z "${BUILD_NICE:-}" ] || renice -n "$BUILD_NICE" -p $$ >/dev/null
echo "prepare: lab kernel (artifact store and ccache under $CACHE)" >&2
# Trusted: the Debian source is no posted patch; its objects fill the
# compiler cache that later builds use (candidates read-only). Slot local
# is where serve builds the tree local: a series on it starts from this
# output tree and builds incrementally, so the slot is built in even when
# the kernel is in the store already (--force) while it has no output.
force=()
[ -f "$CACHE/kbuild/slots/local/out-qemu.stamp" ] || force=(--force)
"$bin" build --repo "$repo" --rev "$ref" --lab qemu --cache-dir "$CACHE" --trusted --slot local "${force[@]}" \
  --lock "$CACHE/heavy.lock" --out "$CACHE/lab-kernel" >&2

echo "prepare: guest image" >&2
image=$("$bin" lab image --cache-dir "$CACHE" | awk '{print $1}')

# fstests for the fstests profile and its lab test, built once per
# source and commit (lab.fstests of $RDMABOT_CONFIG, else the defaults:
# the snapshot beside the checkout). An absent source is the operator's
# gap: said, and the rest goes on (the profile's boots are INFRA then).
echo "prepare: fstests" >&2
"$bin" lab fstests ${RDMABOT_CONFIG:+--config "$RDMABOT_CONFIG"} --cache-dir "$CACHE" >&2 ||
  echo "prepare: fstests not built (see above): the fstests profile's boots will be INFRA until lab.fstests.source is there" >&2

echo "export RDMABOT_TEST_TREE=$repo"
echo "export RDMABOT_TEST_TREE_REV=$ref"
echo "export RDMABOT_TEST_KERNEL=$CACHE/lab-kernel/bzImage"
echo "export RDMABOT_TEST_IMAGE=$image"
echo "export RDMABOT_BIN=$bin"
echo "export RDMABOT_TEST_CACHE=$CACHE"
