#!/usr/bin/env bash
# delegate-cgroup.sh USER NAME COMMAND...: runs COMMAND in a cgroup NAME,
# made under this script's own cgroup and owned by USER, so that a
# process of USER can make the cgroups that bound each build and guest
# (memory, pids, cpu). Run as root; scripts/run.sh starts serve this way.
# cgroup v1 (one hierarchy per controller): NAME in each of memory,
# pids and cpu. cgroup v2: NAME is made and handed over, but serve then
# sits in it, and v2 enables no controller below a cgroup with
# processes: not done yet. What cannot be made is left to serve, which
# says loudly which limits do not apply.
set -euo pipefail
user=$1 name=$2
shift 2
root=/sys/fs/cgroup
own() { sed -nE "s/^[0-9]+:([^:]*,)?$1(,[^:]*)?:(.*)$/\3/p" /proc/self/cgroup | head -n1 || true; }
if [ -f "$root/cgroup.controllers" ]; then
  d="$root$(sed -nE 's/^0::(.*)$/\1/p' /proc/self/cgroup)/$name"
  if mkdir -p "$d" 2>/dev/null; then
    chown "$user" "$d" "$d/cgroup.procs" "$d/cgroup.subtree_control" "$d/cgroup.threads" 2>/dev/null || true
    echo $$ >"$d/cgroup.procs" 2>/dev/null || true
  fi
else
  for c in memory pids cpu; do
    p=$(own "$c")
    [ -n "$p" ] && [ -d "$root/$c" ] || continue
    d="$root/$c${p%/}/$name"
    mkdir -p "$d" 2>/dev/null || continue
    chown -R "$user" "$d" 2>/dev/null || true
    echo $$ >"$d/cgroup.procs" 2>/dev/null || true
  done
fi
exec "$@"
