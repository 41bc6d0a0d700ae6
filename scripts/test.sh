#!/usr/bin/env bash
# Sets up the machine and runs every test of rdmabot with every peer the
# tests talk to: git, public-inbox, QEMU, an SMTP server and PostgreSQL
# are started by the tests themselves; this script installs them and
# prepares the heavy, cached prerequisites (kernel tree, lab kernel, guest
# image). This is the README's test command and CI's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH=/usr/local/go/bin:$PATH
start=$(date +%s)
lap() { echo "== $1 (at $(( $(date +%s) - start )) s)"; }

lap "gofmt, go vet"
bad=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$bad" ]; then
  echo "gofmt would change: $bad" >&2
  exit 1
fi
go vet ./...

lap "prepare: kernel tree, lab kernel, guest image"
eval "$(bash scripts/prepare-lab.sh)"

lap "go test"
# -p 1: lab and kernel-build tests take a whole core each; running
# packages one at a time keeps their figures and deadlines meaningful.
go test -race -p 1 -timeout 75m ./...

lap "fuzz (briefly)"
while read -r pkg fn; do
  go test -run '^$' -fuzz "^${fn}\$" -fuzztime 15s "$pkg"
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | while read -r f; do
  grep -oE '^func Fuzz[A-Za-z0-9_]+' "$f" | sed 's/^func //' | sed "s|^|$(dirname "$f") |"
done)
lap "done"
