#!/bin/sh
# Installs the Debian/Ubuntu packages of the named groups (scripts/packages.txt) that are not installed yet,
# with apt-get, as root or through sudo. Usage: scripts/deps.sh GROUP...
set -eu
here=$(cd "$(dirname "$0")" && pwd)
missing=""
for group in "$@"; do
  pkgs=$(sed -n "s/^$group: //p" "$here/packages.txt")
  [ -n "$pkgs" ] || { echo "deps.sh: unknown package group '$group'" >&2; exit 2; }
  for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
      missing="$missing $p"
    fi
  done
done
[ -z "$missing" ] && exit 0
echo "Installing:$missing"
if [ "$(id -u)" -eq 0 ]; then
  sudo=""
elif command -v sudo >/dev/null 2>&1; then
  sudo="sudo"
else
  echo "deps.sh: missing packages ($missing) and neither root nor sudo: install them and retry" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing
