#!/usr/bin/env bash
# Sets up the machine and runs every test of rdmabot, with every server
# the tests talk to. This is the README's test command and CI's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH=/usr/local/go/bin:$PATH

echo "== gofmt, go vet"
bad=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$bad" ]; then
  echo "gofmt would change: $bad" >&2
  exit 1
fi
go vet ./...

echo "== go test"
go test -race -timeout 80m ./...
