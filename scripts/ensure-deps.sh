#!/usr/bin/env bash
# Installs what the project needs and is missing: Debian's nats-server, redis-server, DejaVu fonts, chromium, openssl,
# docker-compose, docker.io and debootstrap, and the npm packages. Safe to run again: it does nothing when everything is there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

missing=()
command -v nats-server >/dev/null 2>&1 || missing+=(nats-server)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# The DejaVu fonts that libs/ocr renders its test images with.
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSansCondensed.ttf ] || missing+=(fonts-dejavu-extra)
# Debian's chromium, which the dashboard's browser test drives with playwright-core (test/e2e-dashboard.test.ts).
[ -x /usr/bin/chromium ] || missing+=(chromium)
# Debian's docker-compose, with which test/deploy-files.test.ts validates docker-compose.yml (no Docker engine needed).
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
# Debian's Docker engine and debootstrap, with which test/deploy runs docker-compose.yml and the docker worker
# provider for real (scripts/docker-images.sh builds the images without a registry).
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
# openssl, with which test/e2e-auth.test.ts makes the self-signed certificate its TLS frontend serves.
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (Debian packages)..."
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -d node_modules ] || [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "installing npm packages..."
  npm ci --no-audit --no-fund --loglevel=error
fi
