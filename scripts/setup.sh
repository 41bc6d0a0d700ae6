#!/usr/bin/env bash
# Installs everything rdmabot and its tests need on Debian 12, as root.
# Idempotent: packages already present are not fetched again.
set -euo pipefail

packages=(
  git ca-certificates
  # builder: kernel source, toolchain, cache, sandbox
  linux-source-6.12 build-essential bc flex bison libelf-dev libssl-dev
  ccache bubblewrap cpio xz-utils zstd kmod rsync
  # the kernel's other payload compressors (the lab's build id tests)
  bzip2 lz4
  # lab: TCG guests and the guest image recipe's tools
  qemu-system-x86 qemu-utils busybox-static
  # lab: fstests' build (on the host, whose Debian is the guests')
  autoconf automake libtool make gcc xfslibs-dev uuid-dev libattr1-dev libacl1-dev
  libaio-dev liburing-dev libgdbm-dev libinih-dev libcap-dev pkg-config
  # lore: a real public-inbox server (and the local inbox scripts/post.sh
  # feeds, with formail from procmail), b4 for agreement tests
  public-inbox b4 procmail
  # bot tests: PostgreSQL for the multi-machine mode
  postgresql
  # reports tests: render the run page in a real browser
  chromium chromium-driver
)

if [ "$(id -u)" != 0 ]; then
  echo "setup: run as root (it installs Debian packages)" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  [[ $p == \#* ]] && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Go: the machine image ships it in /usr/local/go; Debian 12's own is too old.
export PATH=/usr/local/go/bin:$PATH
if ! command -v go >/dev/null; then
  echo "setup: Go 1.26 or newer is needed (https://go.dev/dl/, unpacked in /usr/local/go)" >&2
  exit 1
fi
go_minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
if [ "$go_minor" -lt 26 ]; then
  echo "setup: Go $(go env GOVERSION) is too old, need 1.26" >&2
  exit 1
fi

cd "$(dirname "$0")/.."
go mod download
mkdir -p /var/cache/rdmabot /var/lib/rdmabot
