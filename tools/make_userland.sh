#!/usr/bin/env bash
# Makes a Debian bookworm userland of another CPU architecture, for building and testing
# copapy's wheels there (tests/test_userland.py, docs/architectures.md "Wheels").
#
#   tools/make_userland.sh ARCH [DIR]     ARCH: aarch64 | armv7l | i686
#
# DIR defaults to .userlands/ARCH in the checkout. Needs root. Installs debootstrap,
# qemu-user-static and binfmt-support (apt) when missing; the ARM userlands run under
# qemu-user through binfmt_misc, i686 runs natively on an x86_64 kernel. The userland gets
# Debian's compiler, Python and the Python packages the tests need (no PyPI inside), so a
# wheel is built and tested there with what a Raspberry Pi OS / Debian user has.
# Afterwards: export COPAPY_USERLANDS=$PWD/.userlands (the directory holding ARCH/).
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${1:?usage: tools/make_userland.sh aarch64|armv7l|i686 [DIR]}
case "$arch" in
    aarch64) debarch=arm64 qemu=aarch64 ;;
    armv7l) debarch=armhf qemu=arm ;;
    i686) debarch=i386 qemu="" ;;
    *) echo "unknown architecture $arch (aarch64, armv7l, i686)" >&2; exit 2 ;;
esac
dir=${2:-.userlands/$arch}
[ "$(id -u)" -eq 0 ] || { echo "debootstrap needs root" >&2; exit 2; }

need=()
for p in debootstrap qemu-user-static binfmt-support; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

if [ -n "$qemu" ]; then
    # register the qemu-user interpreters with the kernel (a container may lack the mount)
    [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc \
        /proc/sys/fs/binfmt_misc
    [ -e "/proc/sys/fs/binfmt_misc/qemu-$qemu" ] || update-binfmts --import "qemu-$qemu"
fi

# the archive this machine's apt uses (MIRROR overrides)
mirror=${MIRROR:-$(sed -n 's/^URIs: *\([^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources \
    2>/dev/null | head -n1)}
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' \
    /etc/apt/sources.list)
[ -n "$mirror" ] || { echo "no Debian mirror found in apt's sources; set MIRROR" >&2; exit 2; }

packages=gcc,make,libc6-dev,python3,python3-dev,python3-venv,python3-pip,python3-setuptools
packages+=,python3-wheel,python3-numpy,python3-serial,python3-pytest,python3-hypothesis
packages+=,python3-tqdm,ca-certificates

if [ -x "$dir/usr/bin/python3" ] && [ -e "$dir/.copapy-userland" ]; then
    echo "$dir is ready"
    exit 0
fi
mkdir -p "$dir"
start=$(date +%s)
debootstrap --foreign --arch="$debarch" --variant=minbase --include="$packages" bookworm "$dir" \
    "$mirror"
if [ -n "$qemu" ]; then
    # the binfmt entries name their interpreter by path: it must exist inside the chroot
    mkdir -p "$dir/usr/libexec/qemu-binfmt"
    cp "/usr/bin/qemu-$qemu-static" "$dir/usr/bin/"
    ln -sf "../../bin/qemu-$qemu-static" "$dir/usr/libexec/qemu-binfmt/$qemu-binfmt-P"
fi
chroot "$dir" /debootstrap/debootstrap --second-stage
echo "$arch bookworm $(date -u +%Y-%m-%d) $(($(date +%s) - start)) s" > "$dir/.copapy-userland"
echo "made $dir in $(($(date +%s) - start)) s; export COPAPY_USERLANDS=$(cd "$dir/.." && pwd)"
