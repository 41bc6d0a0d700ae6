#!/usr/bin/env bash
# Sets up the machine and runs rdmabot: installs packages, imports Debian's
# 6.12 source as the tree "local", builds the lab kernel and guest image,
# then serves the pipeline with config.toml (or $RDMABOT_CONFIG).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
config=${RDMABOT_CONFIG:-config.toml}
export PATH=/usr/local/go/bin:$PATH
# The tree goes where serve looks for it: data_dir of the config.
data=$(sed -nE 's/^data_dir *= *"(.*)"/\1/p' "$config")
cache=$(sed -nE 's/^cache_dir *= *"(.*)"/\1/p' "$config")
eval "$(DATA=${data:-/var/lib/rdmabot} CACHE=${cache:-/var/cache/rdmabot} bash scripts/prepare-lab.sh)"
echo "run: dashboard on http://$(sed -nE 's/^listen *= *"(.*)"/\1/p' "$config")/"
exec "$RDMABOT_BIN" serve -config "$config"
