#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, run and test condense.
# Idempotent, and quiet and fast when everything is already present.
# `--test` (make test, make e2e) also installs what only the tests need: Debian's chromium,
# which the dashboard's browser tests drive (no browser is ever downloaded), nginx-light and
# caddy, which run the reverse proxy examples of docker/, and the Python
# tools of the tests in target/tools/ (imageio-ffmpeg, schemathesis).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { [ "${BOOTSTRAP_QUIET:-0}" = 1 ] || echo "bootstrap: $*"; }

# Debian packages: FFmpeg 5.1 development libraries (rsmpeg links them), clang/libclang
# (bindgen), pkg-config, the ffmpeg program (test fixtures and benchmarks only), and what
# builds the libvmaf that the crate libvmaf-sys vendors (meson, ninja, nasm for its SIMD).
packages=(
  libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev
  libavfilter-dev libavdevice-dev libpostproc-dev clang libclang-dev pkg-config ffmpeg
  meson ninja-build nasm
)
if [ "${1:-}" = "--test" ]; then
  # nginx and Caddy run docker/'s reverse proxy examples (tests/it/common/proxies.rs).
  packages+=(chromium nginx-light caddy)
fi
if [ -n "${BOOTSTRAP_EXTRA_PACKAGES:-}" ]; then
  # shellcheck disable=SC2206
  packages+=(${BOOTSTRAP_EXTRA_PACKAGES})
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# rsmpeg's build script links with `pkg-config --static`, which pulls in every private
# dependency of Debian's FFmpeg and fails to link. Give it copies of the .pc files without
# their private sections, so it links dynamically against the system libraries.
pcdir=target/ffmpeg-pkgconfig
mkdir -p "$pcdir"
for lib in libavcodec libavdevice libavfilter libavformat libavutil libpostproc libswresample libswscale; do
  src=$(pkg-config --variable=pcfiledir "$lib" 2>/dev/null)/$lib.pc
  dst=$pcdir/$lib.pc
  if [ ! -f "$dst" ] || [ "$src" -nt "$dst" ]; then
    grep -v -E '^(Libs|Requires)\.private' "$src" > "$dst.tmp" && mv "$dst.tmp" "$dst"
  fi
done

# The tests' independent VMAF: the static ffmpeg with libvmaf that PyPI's imageio-ffmpeg
# ships (Debian's ffmpeg has no libvmaf filter). Tests only, in target/.
if [ "${1:-}" = "--test" ]; then
  vmaf_dir=target/tools/imageio-ffmpeg
  if ! compgen -G "$vmaf_dir/imageio_ffmpeg/binaries/ffmpeg-linux-*" >/dev/null; then
    say "installing imageio-ffmpeg 0.8.1 (a static ffmpeg with libvmaf) into $vmaf_dir"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps \
      --target "$vmaf_dir" imageio-ffmpeg==0.8.1
  fi
fi

# The API's contract check (scripts/schemathesis.sh): schemathesis from PyPI, at a pinned
# version, with its dependencies, in target/tools/ (tests only; nothing outside target/).
if [ "${1:-}" = "--test" ]; then
  contract_dir=target/tools/schemathesis
  contract_version=4.32.5
  if ! PYTHONPATH="$contract_dir" python3 -c "import importlib.metadata as m, sys; sys.exit(m.version('schemathesis') != '$contract_version')" 2>/dev/null; then
    say "installing schemathesis $contract_version into $contract_dir"
    rm -rf "$contract_dir"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
      --target "$contract_dir" "schemathesis==$contract_version"
  fi
fi

# Front-end packages, when the dashboard project is present.
if [ -f frontend/package.json ]; then
  if [ ! -d frontend/node_modules ] || [ frontend/package-lock.json -nt frontend/node_modules/.package-lock.json ]; then
    say "installing npm packages for frontend/"
    (cd frontend && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
