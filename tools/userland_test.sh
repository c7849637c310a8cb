#!/usr/bin/env bash
# Builds copapy's wheel from its sdist inside a Debian userland of another CPU (made by
# tools/make_userland.sh) and tests it there: a smoke program (LocalTarget runs native code of
# that CPU, `copapy runner --pty` serves a SerialTarget, @cp.jit, a saved program) and a
# representative subset of the test suite against the installed wheel. Needs root (chroot).
#
#   tools/userland_test.sh ARCH SDIST [DIR]     ARCH: aarch64 | armv7l | i686
#
# DIR defaults to $COPAPY_USERLANDS/ARCH (or .userlands/ARCH). Prints "RESULT <arch> ..."
# lines with the emulated build and test times (docs/architectures.md records them); the
# wheel is left in DIR/root/copapy-test/dist.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
arch=${1:?usage: tools/userland_test.sh aarch64|armv7l|i686 SDIST [DIR]}
sdist=$(realpath "${2:?the sdist (python -m build --sdist)}")
dir=${3:-${COPAPY_USERLANDS:-$root/.userlands}/$arch}
[ -e "$dir/.copapy-userland" ] || { echo "no userland at $dir: tools/make_userland.sh $arch" >&2
                                     exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "chroot needs root" >&2; exit 2; }
# the subset of the tests (tools/wheel_tests.txt; SUBSET overrides it with other pytest
# arguments), run against the installed wheel from the unpacked sdist
subset=${SUBSET:-$(grep -v '^#' "$root/tools/wheel_tests.txt" | tr '\n' ' ')}
# under qemu-user the 10 kHz motor PID cannot run in real time: qemu translates each new code
# block when it first runs (the runner's first jobs take 2-4 ms against a 100 µs period), so
# every attempt skips releases and the tick-for-tick comparison with LocalTarget never runs
# (docs/architectures.md); the smoke run checks a saved program in `--image --start` instead
if [ "$arch" != i686 ] && [ -z "${SUBSET:-}" ]; then
    subset="$subset --deselect=tests/test_saved.py::test_runner_image_start_matches_local_target"
fi

work=$dir/root/copapy-test
rm -rf "$work"
mkdir -p "$work"
cp "$sdist" "$work/"
tar -C "$work" -xzf "$sdist"
tree=$(basename "$sdist" .tar.gz)
cp -r "$root/tests" "$root/examples" "$work/$tree/"
rm -rf "$work/$tree/tests/__pycache__"
# the tests must use the installed wheel, not the sources of the unpacked sdist
mv "$work/$tree/src/copapy" "$work/$tree/src/copapy.sources"

mounted=()
cleanup() {
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" || true; done
}
trap cleanup EXIT
for m in proc dev dev/pts; do
    mkdir -p "$dir/$m"
    if ! mountpoint -q "$dir/$m"; then
        case $m in
            proc) mount -t proc proc "$dir/proc" ;;
            dev) mount --bind /dev "$dir/dev" ;;
            dev/pts) mount --bind /dev/pts "$dir/dev/pts" ;;
        esac
        mounted+=("$dir/$m")
    fi
done

cp "$root/tools/wheel_smoke.py" "$work/smoke.py"

# i686 runs natively on the x86_64 kernel: setarch makes uname (and so the wheel tag) say i686
personality=()
[ "$arch" = i686 ] && personality=(setarch i686)
"${personality[@]}" chroot "$dir" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
    HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-emulated} SUBSET="$subset" TREE="$tree" /bin/bash -euo pipefail -c '
cd /root/copapy-test
t0=$(date +%s)
python3 -m pip wheel -q --no-build-isolation --no-deps -w dist ./*.tar.gz
t1=$(date +%s)
python3 -m venv --system-site-packages venv
# Debian bookworm numpy is 1.24 (no armv7l/i686 wheels of newer ones on PyPI): no deps
venv/bin/pip install -q --no-deps dist/*.whl
env PATH=/root/copapy-test/venv/bin venv/bin/python smoke.py  # no compiler on PATH
t2=$(date +%s)
cd "$TREE"
set +e
../venv/bin/python -m pytest -v -rfs -p no:cacheprovider -o addopts="" $SUBSET \
    > ../pytest.log 2>&1
rc=$?
set -e
t3=$(date +%s)
tail -n 25 ../pytest.log
echo "RESULT $(uname -m) wheel $(ls ../dist) build $((t1 - t0)) s smoke $((t2 - t1)) s" \
     "tests $((t3 - t2)) s: $(tail -n 1 ../pytest.log)"
exit $rc
'
