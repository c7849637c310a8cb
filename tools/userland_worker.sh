#!/usr/bin/env bash
# A Dask worker of another CPU for cp.sweep: in a Debian userland (tools/make_userland.sh),
# copapy's wheel built from its sdist and a venv with the dask and distributed versions of the
# Python that runs this script (a scheduler and its workers must have the same versions;
# Debian bookworm's python3-distributed is 2022.12, too old for the client's), so that
# `dask worker` runs there under qemu-user (docs/guide/howto/sweeps.md, "Workers of other
# CPUs"). Needs root (chroot).
#
#   tools/userland_worker.sh setup ARCH SDIST [DIR]   build the wheel, make DIR/root/copapy-worker
#   tools/userland_worker.sh run ARCH CMD [ARG...]    run CMD in the userland (proc and dev
#                                                     mounted while it runs), e.g.
#       tools/userland_worker.sh run aarch64 /root/copapy-worker/venv/bin/dask worker \
#           tcp://127.0.0.1:8786 --nthreads 1 --no-nanny
#
# DIR defaults to $COPAPY_USERLANDS/ARCH (or .userlands/ARCH). PYTHON (default python3) is the
# client's Python: its dask, distributed and cloudpickle versions are installed. The wheels of
# those packages for ARCH come from PyPI through pip download on this machine, the wheel of
# copapy is built inside (no PyPI access is needed in the userland).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?usage: tools/userland_worker.sh setup ARCH SDIST [DIR] | run ARCH CMD...}
arch=${2:?the userland: aarch64 | armv7l | i686}
shift 2
case "$arch" in
    aarch64) platforms="manylinux2014_aarch64 manylinux_2_17_aarch64 manylinux_2_28_aarch64" ;;
    armv7l) platforms="manylinux2014_armv7l manylinux_2_17_armv7l manylinux_2_31_armv7l" ;;
    i686) platforms="manylinux2014_i686 manylinux_2_17_i686 manylinux_2_28_i686" ;;
    *) echo "unknown architecture $arch (aarch64, armv7l, i686)" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "chroot needs root" >&2; exit 2; }

mounted=()
cleanup() {
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" || true; done
}
mount_in() {  # proc, dev and dev/pts of the userland $1 (undone on exit)
    for m in proc dev dev/pts; do
        mkdir -p "$1/$m"
        if ! mountpoint -q "$1/$m"; then
            case $m in
                proc) mount -t proc proc "$1/proc" ;;
                *) mount --bind "/$m" "$1/$m" ;;
            esac
            mounted+=("$1/$m")
        fi
    done
}
trap cleanup EXIT
in_userland() {  # in_userland DIR CMD...: CMD in the chroot with a clean environment
    local dir=$1
    shift
    chroot "$dir" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
        COPAPY_PROGRESS=0 "$@"
}

if [ "$mode" = run ]; then
    [ $# -gt 0 ] || { echo "run ARCH CMD: no command" >&2; exit 2; }
    dir=${COPAPY_USERLANDS:-$root/.userlands}/$arch
    [ -e "$dir/.copapy-userland" ] || { echo "no userland at $dir" >&2; exit 2; }
    mount_in "$dir"
    # in the background so that a SIGTERM to this script reaches the command (and the
    # mounts are undone after it ends)
    in_userland "$dir" "$@" &
    child=$!
    trap 'kill -TERM $child 2>/dev/null || true' TERM INT
    rc=0
    wait $child || rc=$?
    wait $child 2>/dev/null || true
    exit $rc
fi

[ "$mode" = setup ] || { echo "mode is setup or run, not $mode" >&2; exit 2; }
sdist=$(realpath "${1:?the sdist (python -m build --sdist)}")
dir=${2:-${COPAPY_USERLANDS:-$root/.userlands}/$arch}
[ -e "$dir/.copapy-userland" ] || { echo "no userland at $dir: tools/make_userland.sh $arch" >&2
                                     exit 2; }
python=${PYTHON:-python3}
read -r dask distributed cloudpickle pyver < <("$python" -c '
import sys, dask, distributed, cloudpickle
print(dask.__version__, distributed.__version__, cloudpickle.__version__,
      f"{sys.version_info[0]}{sys.version_info[1]}")')
there=$(chroot "$dir" /usr/bin/python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
[ "$pyver" = "$there" ] || { echo "the client's Python is 3.${pyver#3}, the userland's \
3.${there#3}: cloudpickle sends functions between them only for the same version" >&2; exit 2; }

work=$dir/root/copapy-worker
rm -rf "$work"
mkdir -p "$work/wheels" "$work/dist"
t0=$(date +%s)
plat=()
for p in $platforms; do plat+=(--platform "$p"); done
"$python" -m pip download -q --only-binary=:all: "${plat[@]}" --python-version "$pyver" \
    --implementation cp -d "$work/wheels" "dask==$dask" "distributed==$distributed" \
    "cloudpickle==$cloudpickle"
t1=$(date +%s)
cp "$sdist" "$work/"
mount_in "$dir"
in_userland "$dir" /bin/bash -euo pipefail -c '
cd /root/copapy-worker
python3 -m pip wheel -q --no-build-isolation --no-deps -w dist ./*.tar.gz
python3 -m venv --system-site-packages venv
# Debian bookworm numpy is 1.24 (no armv7l/i686 wheels of newer ones on PyPI): no deps
venv/bin/pip install -q --no-deps dist/*.whl
venv/bin/pip install -q --no-index --find-links wheels dask distributed cloudpickle
venv/bin/python -c "import copapy, distributed; print(copapy.__file__, distributed.__version__)"
'
t2=$(date +%s)
echo "$arch dask $dask distributed $distributed cloudpickle $cloudpickle" > "$work/READY"
echo "RESULT $arch worker ready: downloads $((t1 - t0)) s, wheel build and venv $((t2 - t1)) s"
