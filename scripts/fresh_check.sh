#!/bin/sh
# The quick start on a fresh machine (scripts/test.sh fresh): a minimal Debian 12 root made with debootstrap in a
# temporary folder, this checkout's files copied in, and there, with nothing installed beforehand, as a new user
# would: the demo (scripts/demo.sh), then every command README.md and docs/ tell a user to type, as written
# (scripts/docs_check.py: the library's install and link, pkg-config, CMake, the llama runner, a bare-metal
# program, the llama firmware under QEMU), then the subproject suite (docs/microattn.wrap, git). Each installs its own packages (scripts/deps.sh), as the docs say, so an install step missing from
# the docs or a package missing from a group fails here. Needs root (debootstrap, chroot, mounts) and Debian's
# archive: without root it exits 77 (skipped), and so it does when the archive cannot be reached.
#   MICROATTN_FRESH_MIRROR   the archive (default http://deb.debian.org/debian)
#   MICROATTN_FRESH_SUITES   what runs after the documented commands (default "subproject": the wrap file)
#   MICROATTN_FRESH_KEEP=1   keep the root afterwards (its path is printed)
set -eu
cd "$(dirname "$0")/.."
mirror=${MICROATTN_FRESH_MIRROR:-http://deb.debian.org/debian}
suites=${MICROATTN_FRESH_SUITES:-subproject}
[ "$(id -u)" -eq 0 ] || { echo "fresh_check: needs root (debootstrap, chroot): skipped" >&2; exit 77; }
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
if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$tmp/debootstrap.log" 2>&1; then
  tail -n 20 "$tmp/debootstrap.log" >&2
  if grep -qiE "Failed getting release file|Temporary failure resolving|Could not resolve|unable to connect" \
    "$tmp/debootstrap.log"; then
    echo "fresh_check: $mirror cannot be reached: skipped" >&2
    exit 77
  fi
  echo "fresh_check: debootstrap failed" >&2
  exit 1
fi
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
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$root/root/microattn"
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
run "the commands of README.md and docs/" "/usr/bin/python3 scripts/docs_check.py --in-place"
run "$suites" "MICROATTN_TEST_STRICT=1 scripts/test.sh $suites"
echo "=== fresh: all passed in $(($(date +%s) - start)) s"
