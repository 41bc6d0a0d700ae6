#!/usr/bin/env bash
# Posts mail into the bot's local public-inbox, as a list server would:
#   bash scripts/post.sh examples/sample-series.mbox   (mbox files or .eml files)
#   bash scripts/post.sh --init                        (only create the inbox)
# The inbox is <data_dir>/inbox/local of config.toml (or $RDMABOT_CONFIG),
# the list "local" that serve watches; it is created on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
config=${RDMABOT_CONFIG:-config.toml}
data=$(sed -nE 's/^data_dir *= *"(.*)"/\1/p' "$config")
data=${data:-/var/lib/rdmabot}
inbox=$data/inbox/local
export PI_CONFIG=$data/inbox/config
# public-inbox keeps its own state under HOME; the inbox's folder is it.
export HOME=$data/inbox
if [ ! -d "$inbox/git" ]; then
  mkdir -p "$data/inbox"
  public-inbox-init -V2 local "$inbox" http://127.0.0.1/local local@rdmabot.invalid >&2
  # No spam filter here: the inbox takes only what an operator posts.
  git config -f "$PI_CONFIG" publicinboxmda.spamcheck none
  echo "post: created the local inbox $inbox" >&2
fi
[ "${1:-}" = "--init" ] && exit 0
if [ $# -eq 0 ]; then
  echo "usage: bash scripts/post.sh FILE.mbox|FILE.eml ... | --init" >&2
  exit 2
fi
for f in "$@"; do
  if head -c5 "$f" | grep -q '^From '; then
    # An mbox: one public-inbox-mda per message, as a mail server runs it.
    formail -s sh -c 'ORIGINAL_RECIPIENT=local@rdmabot.invalid public-inbox-mda --no-precheck' < "$f"
  else
    ORIGINAL_RECIPIENT=local@rdmabot.invalid public-inbox-mda --no-precheck < "$f"
  fi
  echo "post: $f is on the list local ($inbox)" >&2
done
