#!/bin/sh
# Toy merge_config.sh: -m -O DIR BASE FRAGMENT...: append the fragments to
# BASE (a later line wins) and write DIR/.config.
[ "$1" = -m ] && [ "$2" = -O ] || { echo "usage: $0 -m -O dir base frag..." >&2; exit 1; }
out=$3 base=$4; shift 4
cat "$base" "$@" > "$out/.config.merged" && mv "$out/.config.merged" "$out/.config"
