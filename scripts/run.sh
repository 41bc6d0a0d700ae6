#!/usr/bin/env bash
# Sets up the machine and runs rdmabot: installs packages, imports Debian's
# 6.12 source as the tree "local", builds the lab kernel and guest image,
# creates the local inbox (the list "local" of config.toml), then serves
# the pipeline with config.toml (or $RDMABOT_CONFIG). Offline it still
# works: the lore lists and git trees that cannot be reached back off, and
# what is posted to the local inbox is tested on the imported tree.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
config=${RDMABOT_CONFIG:-config.toml}
export PATH=/usr/local/go/bin:$PATH
# The tree goes where serve looks for it: data_dir of the config.
data=$(sed -nE 's/^data_dir *= *"(.*)"/\1/p' "$config")
cache=$(sed -nE 's/^cache_dir *= *"(.*)"/\1/p' "$config")
eval "$(RDMABOT_CONFIG=$config DATA=${data:-/var/lib/rdmabot} CACHE=${cache:-/var/cache/rdmabot} bash scripts/prepare-lab.sh)"
RDMABOT_CONFIG=$config bash scripts/post.sh --init
# serve runs as its own unprivileged user, not root: a posted patch is
# built and booted by it. It owns what it writes (data and caches); the
# inbox stays root's, and it only reads it.
user=${RDMABOT_USER:-rdmabot}
if ! id -u "$user" >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir "${data:-/var/lib/rdmabot}" --shell /usr/sbin/nologin "$user"
fi
for d in "${data:-/var/lib/rdmabot}" "${cache:-/var/cache/rdmabot}"; do
  find "$d" -path "$d/inbox" -prune -o ! -user "$user" -exec chown -h "$user:" {} +
done
echo "run: dashboard on http://$(sed -nE 's/^listen *= *"(.*)"/\1/p' "$config")/"
echo "run: post a series with: bash scripts/post.sh examples/sample-series.mbox"
echo "run: verdicts: $RDMABOT_BIN status --config $config; mailed replies wait in the outbox: $RDMABOT_BIN outbox list --config $config"
# In a cgroup of its own, delegated to it: each build then gets its
# memory, pid and CPU limits (serve says loudly, on the dashboard and in
# status, when they do not apply).
exec bash scripts/delegate-cgroup.sh "$user" rdmabot-serve runuser -u "$user" -- "$RDMABOT_BIN" serve --config "$config"
