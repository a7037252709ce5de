#!/bin/sh
# The quick start on a fresh machine (scripts/test.sh fresh): a minimal Debian 12 root made with debootstrap in a
# temporary folder, this checkout's files copied in, and there, with nothing installed beforehand, as a new user
# would: the demo (scripts/demo.sh), then the host suite and the suites with tools of their own
# (scripts/test.sh native cmake subproject), and the README's library-alone install, build and link as written
# (scripts/readme_install_check.sh). Each installs its own packages through scripts/deps.sh, so a package
# missing from a group fails here. Needs root (debootstrap, chroot, mounts) and Debian's archive.
#   MICROATTN_FRESH_MIRROR   the archive (default http://deb.debian.org/debian)
#   MICROATTN_FRESH_SUITES   what runs after the demo (default "native cmake subproject")
#   MICROATTN_FRESH_KEEP=1   keep the root afterwards (its path is printed)
set -eu
cd "$(dirname "$0")/.."
mirror=${MICROATTN_FRESH_MIRROR:-http://deb.debian.org/debian}
suites=${MICROATTN_FRESH_SUITES:-native cmake subproject}
[ "$(id -u)" -eq 0 ] || { echo "fresh_check: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "fresh_check: no debootstrap (scripts/deps.sh fresh)" >&2; exit 1; }

tmp=$(mktemp -d /var/tmp/microattn-fresh.XXXXXX)
root=$tmp/root
cleanup() {
  for m in dev/shm dev/pts proc; do
    if mountpoint -q "$root/$m" 2>/dev/null; then umount "$root/$m" || umount -l "$root/$m"; fi
  done
  if [ "${MICROATTN_FRESH_KEEP:-0}" = 1 ]; then
    echo "fresh_check: root kept in $root"
  elif ! grep -q " $tmp/" /proc/mounts; then  # never delete through a mount still in place
    rm -rf --one-file-system "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "=== fresh: debootstrap bookworm (minbase) from $mirror"
start=$(date +%s)
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$tmp/debootstrap.log" 2>&1 ||
  { tail -n 20 "$tmp/debootstrap.log" >&2; echo "fresh_check: debootstrap failed" >&2; exit 1; }
security=$(dirname "$mirror")/debian-security
[ "$mirror" = http://deb.debian.org/debian ] || security=""
{
  echo "deb $mirror bookworm main"
  echo "deb $mirror bookworm-updates main"
  [ -z "$security" ] || echo "deb $security bookworm-security main"
} >"$root/etc/apt/sources.list"
mount -t proc proc "$root/proc"
mount -t devpts devpts "$root/dev/pts" -o newinstance,ptmxmode=0666
mkdir -p "$root/dev/shm"
mount -t tmpfs shm "$root/dev/shm"

# The files a clone would have (tracked, as they are in the work tree), owned by the new user's root.
mkdir -p "$root/root/microattn"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$root/root/microattn"
echo "debootstrap and copy: $(($(date +%s) - start)) s"

run() {  # what, command in the new root's checkout
  echo "=== fresh: $1"
  t0=$(date +%s)
  if ! env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    chroot "$root" sh -c "cd /root/microattn && $2" </dev/null; then
    echo "fresh_check: '$2' failed on a fresh Debian 12 root" >&2
    exit 1
  fi
  echo "fresh: $1 passed in $(($(date +%s) - t0)) s"
}
run demo scripts/demo.sh
run "$suites" "scripts/test.sh $suites"
run "the README's library-alone install" "scripts/deps.sh cmake && scripts/readme_install_check.sh"
echo "=== fresh: all passed in $(($(date +%s) - start)) s"
