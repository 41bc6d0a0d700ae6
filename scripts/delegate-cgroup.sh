#!/usr/bin/env bash
# delegate-cgroup.sh USER NAME COMMAND...: runs COMMAND in a cgroup NAME,
# made under this script's own cgroup and owned by USER, so that a
# process of USER can make the cgroups that bound each build and guest
# (memory, pids, cpu). Run as root; scripts/run.sh starts serve this way.
# cgroup v1 (one hierarchy per controller): NAME in each of memory,
# pids and cpu, and COMMAND in it.
# cgroup v2: v2 enables no controller below a cgroup with processes, so
# NAME is a delegated parent, as systemd's Delegate= makes one: memory,
# pids and cpu enabled for its children, the directory and the files
# systemd hands over owned by USER, and COMMAND in its leaf NAME/serve;
# the runs' cgroups go beside that leaf (internal/cgroup). This script
# first leaves its own cgroup for the leaf, so that one (a service's
# under Delegate=yes, or the root) can enable those controllers for NAME.
# What cannot be made is said here and left to serve, which says loudly
# which limits do not apply. POSIX sh: it also runs under busybox.
set -eu
user=$1 name=$2
shift 2
root=/sys/fs/cgroup
own() { sed -nE "s/^[0-9]+:([^:]*,)?$1(,[^:]*)?:(.*)$/\3/p" /proc/self/cgroup | head -n1 || true; }
if [ -f "$root/cgroup.controllers" ]; then
  p="$root$(sed -nE 's/^0::(.*)$/\1/p' /proc/self/cgroup)"
  p=${p%/}
  d=$p/$name
  if mkdir -p "$d/serve" 2>/dev/null && echo $$ >"$d/serve/cgroup.procs" 2>/dev/null; then
    enable() { grep -qw "$1" "$2/cgroup.subtree_control" 2>/dev/null || echo "+$1" >"$2/cgroup.subtree_control" 2>/dev/null; }
    for c in memory pids cpu; do
      # For NAME's children, then in NAME for theirs.
      enable "$c" "$p" && enable "$c" "$d" ||
        echo "delegate-cgroup: cannot enable $c in $p: other processes share it; start this alone in a cgroup (a systemd service or scope with Delegate=yes)" >&2
    done
    for f in "$d" "$d/serve"; do
      chown "$user" "$f" "$f/cgroup.procs" "$f/cgroup.subtree_control" "$f/cgroup.threads" 2>/dev/null || true
    done
  else
    echo "delegate-cgroup: cannot make $d/serve and move into it" >&2
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
