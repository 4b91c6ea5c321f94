#!/usr/bin/env bash
# Builds the project's container images without an image registry:
#   sloserve-base:bookworm  a minimal Debian bookworm root (debootstrap, from the Debian mirror apt uses here)
#                           with Debian's nats-server and redis-server, this host's Node.js binary and npm,
#                           and this host's extra CA certificates; `docker import`ed.
#   sloserve:latest         the Dockerfile built FROM it (BASE_IMAGE), one image for every service.
# Where a registry is reachable, `docker build .` on the Dockerfile alone (FROM node:20-bookworm-slim) does the same.
# Usage: bash scripts/docker-images.sh [--rebuild-base]   (DOCKER_HOST picks the engine; the default socket otherwise)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BASE="${BASE_IMAGE:-sloserve-base:bookworm}"
IMAGE="${SLOSERVE_IMAGE:-sloserve:latest}"
rebuild_base=false
[ "${1:-}" = "--rebuild-base" ] && rebuild_base=true

for tool in docker debootstrap; do
  command -v "$tool" >/dev/null 2>&1 || { echo "docker-images: $tool is missing (apt-get install -y docker.io debootstrap)" >&2; exit 1; }
done

if $rebuild_base || ! docker image inspect "$BASE" >/dev/null 2>&1; then
  # The mirror apt uses on this host (deb822 or one-line sources), so the build needs no other address.
  mirror="$( { sed -nE 's/^[[:space:]]*URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources; sed -nE 's/^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//p' /etc/apt/sources.list /etc/apt/sources.list.d/*.list; } 2>/dev/null \
    | tr ' ' '\n' | grep -E '^https?://.*/debian/?$' | head -1 || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
  root="$(mktemp -d)"
  trap 'rm -rf "$root"' EXIT
  echo "docker-images: debootstrap bookworm from $mirror"
  debootstrap --variant=minbase --include=ca-certificates,nats-server,redis-server bookworm "$root" "$mirror" >&2
  # Node.js and npm: this host's, the version the project is tested with.
  node_bin="$(readlink -f "$(command -v node)")"
  npm_dir="$(dirname "$node_bin")/../lib/node_modules/npm"
  install -D -m 0755 "$node_bin" "$root/usr/local/bin/node"
  mkdir -p "$root/usr/local/lib/node_modules"
  cp -a "$npm_dir" "$root/usr/local/lib/node_modules/npm"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
  # This host's extra CA certificates (a TLS-inspecting proxy's, where there is one), so npm inside reaches the registry.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null 2>&1
  fi
  rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*
  tar -C "$root" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    - "$BASE" >/dev/null
  echo "docker-images: $BASE built"
fi

# The services' image. Host networking for the build's `npm ci`: an engine started without a bridge has no other.
docker build --network host --build-arg "BASE_IMAGE=$BASE" -t "$IMAGE" . >&2
echo "docker-images: $IMAGE built"
