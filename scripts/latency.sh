#!/usr/bin/env bash
# The latency benchmark: a fresh serve, with a data dir of its own and
# config.toml's settings, gets a fixed mix of seeded series posted to its
# local inbox (a build break, a benign change, a slowdown, a crash, an SQ
# accounting bug, the build break last), and `rdmabot latency` prints
# posting -> verdict and -> reply per series and p50/p95 per verdict.
#   bash scripts/latency.sh                  # warm: the caches of $CACHE
#   CACHE=$(mktemp -d) TREE= bash scripts/latency.sh   # a fresh install: cold caches, the tree imported
#   bash scripts/latency.sh NAME=MBOX...      # another mix, e.g. the fstests seeds:
#     bash scripts/latency.sh chunk-tail-round=examples/seeded/chunk-tail-round.mbox \
#       reply-chunk-pages=examples/seeded/reply-chunk-pages.mbox
# CACHE defaults to $RDMABOT_TEST_CACHE, else /var/cache/rdmabot; the
# imported tree is $TREE (default $RDMABOT_TEST_TREE); TREE= imports it anew
# as scripts/run.sh does. LISTEN is the dashboard's address
# (127.0.0.1:8481), TIMEOUT how long the answers are waited for (90m).
# Run as root, like scripts/run.sh's setup; the serve and everything it
# started are stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
cache=${CACHE:-${RDMABOT_TEST_CACHE:-/var/cache/rdmabot}}
tree=${TREE-${RDMABOT_TEST_TREE:-}}
listen=${LISTEN:-127.0.0.1:8481}
data=$(mktemp -d /tmp/rdmabot-latency.XXXXXX)
mkdir -p "$data/trees" "$cache"
[ -z "$tree" ] || ln -s "$tree" "$data/trees/kernel.git"
echo "latency: data $data, caches $cache ($(git rev-parse --short HEAD), $(date -u +%FT%TZ))" >&2
start=$(date +%s)
eval "$(DATA=$data CACHE=$cache bash scripts/prepare-lab.sh)"
# The copy lives in $data: a path config.toml gives relative to itself
# (fstests' source, ../shared/...) is made absolute.
cfg=$data/config.toml
sed -E -e "s#^data_dir = .*#data_dir = \"$data\"#" -e "s#^cache_dir = .*#cache_dir = \"$cache\"#" \
  -e "s#^listen = .*#listen = \"$listen\"#" \
  -e "s#^source = \"\.\./#source = \"$(dirname "$PWD")/#" config.toml > "$cfg"
RDMABOT_CONFIG=$cfg bash scripts/post.sh --init
setsid "$RDMABOT_BIN" serve --config "$cfg" > "$data/serve.log" 2>&1 &
serve=$!
stop() {
  kill -TERM "$serve" 2>/dev/null || return 0
  for _ in $(seq 45); do kill -0 "$serve" 2>/dev/null || break; sleep 1; done
  # Builds and guests serve started are in its process group.
  kill -KILL -- "-$serve" 2>/dev/null || true
}
trap stop EXIT
until curl -fsS -o /dev/null "http://$listen/api/tests"; do
  kill -0 "$serve" 2>/dev/null || { tail -20 "$data/serve.log" >&2; exit 3; }
  sleep 1
done
echo "latency: serve ready $(( $(date +%s) - start )) s after the start (prepare-lab.sh included)" >&2
[ $# -gt 0 ] || set -- \
  benign=examples/sample-series.mbox \
  slowdown=examples/seeded/slow-send.mbox \
  crash=examples/seeded/sg-coalesce.mbox \
  sq-accounting=examples/seeded/sq-double-credit.mbox \
  build-break=examples/seeded/build-break.mbox
"$RDMABOT_BIN" latency --config "$cfg" --timeout "${TIMEOUT:-90m}" "$@"
echo "latency: the replies are in $data's outbox" >&2
