#!/usr/bin/env bash
# Builds the power bench's seeded kernels: the lab tree (prepare-lab.sh's
# import) with udelay(N) before every server Send (svc_rdma_post_send),
# one kernel per N microseconds, each in $CACHE/power/udelay-N, or with a
# seeded series (examples/seeded/NAME.mbox, applied by rdmabot's own
# apply) in $CACHE/power/NAME:
#   bash scripts/seed-kernels.sh 30 60 120 examples/seeded/sq-double-credit.mbox
#   rdmabot lab aa --kernel $CACHE/lab-kernel --candidate $CACHE/power/udelay-60 --seeded "udelay(60) per Send" --comparisons 20
# The commits are made with git plumbing (no checkout of the tree) under
# refs/seeded/ of the tree's repository; the builds are incremental in
# the local slot (isolated, as a series is built), a minute or two each.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CACHE:-/var/cache/rdmabot}
DATA=${DATA:-$CACHE}
bin=$CACHE/bin/rdmabot
repo=$DATA/trees/kernel.git
base=$(git --git-dir="$repo" rev-parse refs/trees/local/import)
file=net/sunrpc/xprtrdma/svc_rdma_sendto.c
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for us in "$@"; do
  if [[ $us == *.mbox ]]; then
    name=$(basename "$us" .mbox)
    "$bin" apply --repo "$repo" --base "$base" --mbox "$us" --ref "refs/seeded/$name" \
      --committer-date 2026-01-01T00:00:00Z >&2
    echo "seed-kernels: $name: $(git --git-dir="$repo" rev-parse "refs/seeded/$name")" >&2
    "$bin" build --repo "$repo" --rev "refs/seeded/$name" --lab qemu --cache-dir "$CACHE" --slot local \
      --lock "$CACHE/heavy.lock" --out "$CACHE/power/$name" >&2
    echo "$CACHE/power/$name"
    continue
  fi
  case $us in '' | *[!0-9]*) echo "seed-kernels: $us: want a whole number of microseconds or a .mbox" >&2; exit 2 ;; esac
  git --git-dir="$repo" show "$base:$file" |
    sed -e 's|^#include <linux/spinlock.h>$|&\n#include <linux/delay.h>|' \
        -e '/^int svc_rdma_post_send(/,/^}/ s|^\tmight_sleep();$|&\n\tudelay('"$us"');|' >"$work/f"
  grep -q "udelay($us);" "$work/f" || { echo "seed-kernels: $file no longer has the line to seed after" >&2; exit 1; }
  export GIT_DIR=$repo GIT_INDEX_FILE=$work/index
  git read-tree "$base"
  blob=$(git hash-object -w "$work/f")
  git update-index --cacheinfo "100644,$blob,$file"
  commit=$(GIT_AUTHOR_NAME=rdmabot GIT_AUTHOR_EMAIL=rdmabot@rdmabot.invalid GIT_COMMITTER_NAME=rdmabot \
    GIT_COMMITTER_EMAIL=rdmabot@rdmabot.invalid GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z" \
    git commit-tree "$(git write-tree)" -p "$base" -m "seeded: udelay($us) per svc_rdma_post_send")
  git update-ref "refs/seeded/udelay-$us" "$commit"
  unset GIT_DIR GIT_INDEX_FILE
  echo "seed-kernels: udelay($us): $commit" >&2
  "$bin" build --repo "$repo" --rev "refs/seeded/udelay-$us" --lab qemu --cache-dir "$CACHE" --slot local \
    --lock "$CACHE/heavy.lock" --out "$CACHE/power/udelay-$us" >&2
  echo "$CACHE/power/udelay-$us"
done
