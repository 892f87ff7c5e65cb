#!/usr/bin/env bash
# `make container-test`: the container deployment built and run for real, with podman and
# podman-compose on Debian 12 (no Docker engine and no image registry needed).
#
#  1. Installs, when missing: podman, runc, netavark, aardvark-dns, iptables, debootstrap
#     (Debian), podman-compose and websockets (PyPI, in a virtualenv under $CACHE).
#  2. Writes /etc/containers/containers.conf when there is none (runc, cgroupfs, file events,
#     default ulimits: what podman needs in our sandboxes), and says so; an existing one is
#     left alone, and what it lacks is said.
#  3. Makes the base image localhost/debian:bookworm-slim once with debootstrap, slimmed as
#     the official image is (kept in podman's storage for later runs), then local images of
#     Debian's PostgreSQL 15 and nginx on it (docker/test/, layer-cached), and the condense
#     image from the release binary of `make build` (docker/Dockerfile, target `prebuilt`);
#     prints its size and each layer's and fails above 400 MB; writes the binaries' debug info
#     to target/release/*.debug and checks the image's stripped binaries point to it.
#  4. Brings up docker/compose.yaml with docker/test/compose.test.yaml: main on PostgreSQL,
#     worker1 and worker2 linked (worker2 through nginx), nginx with docker/nginx.conf in
#     front, a shared media volume holding clips made now with the host's ffmpeg; drives it
#     over HTTP and WebSocket from outside (scripts/container-test-drive.py); stops it,
#     `down`, `up` again, and checks that nothing was lost.
#  5. Removes its containers, volumes, network and temporary folder, even on failure. The
#     images stay: the base images as a cache, localhost/condense:container-test to inspect.
#
# Prints one line per check ("ok   ..."), exits non-zero on the first failure. Runs as root
# (rootful podman); started as another user, it runs itself again with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ "$(id -u)" -ne 0 ]; then
  exec sudo --preserve-env=CONDENSE_CONTAINER_TEST_CACHE,DEBIAN_MIRROR bash "$0" "$@"
fi

CACHE=${CONDENSE_CONTAINER_TEST_CACHE:-/var/cache/condense-container-test}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PROJECT=condense-container-test
BASE_IMAGE=localhost/debian:bookworm-slim
POSTGRES_IMAGE=localhost/condense-test/postgres:15
NGINX_IMAGE=localhost/condense-test/nginx:bookworm
IMAGE=localhost/condense:container-test
BINARY=target/release/condense
started=$(date +%s)

say() { echo "container-test: $*"; }
ok() { echo "ok   $*"; }
die() { echo "FAIL $*" >&2; exit 1; }
elapsed() { echo "$(( $(date +%s) - started )) s"; }

# --- 1. Host packages and tools ------------------------------------------------------------
# The project's bootstrap installs what is missing of its own list (ffmpeg among them) and
# of these.
BOOTSTRAP_EXTRA_PACKAGES="podman runc netavark aardvark-dns iptables debootstrap" timeout 1200 bash scripts/bootstrap.sh

venv=$CACHE/venv
if ! "$venv/bin/python" -c 'import podman_compose, websockets.sync.client' 2>/dev/null; then
  say "installing podman-compose and websockets from PyPI into $venv"
  mkdir -p "$CACHE"
  rm -rf "$venv"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
  timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check podman-compose websockets
fi
PODMAN_COMPOSE=$venv/bin/podman-compose

# --- 2. containers.conf --------------------------------------------------------------------
conf=/etc/containers/containers.conf
declare -A wanted=(
  [runtime]='runtime = "runc"'
  [cgroup_manager]='cgroup_manager = "cgroupfs"'
  [events_logger]='events_logger = "file"'
  [default_ulimits]='default_ulimits = ["nofile=20000:20000","nproc=32768:32768"]'
)
if [ ! -e "$conf" ]; then
  mkdir -p /etc/containers
  cat > "$conf" <<EOF
# Written by condense's scripts/container-test.sh because there was none: podman's defaults
# (crun, systemd cgroups and journald events, the host's ulimits) fail in our sandboxes.
[containers]
${wanted[default_ulimits]}

[engine]
${wanted[runtime]}
${wanted[cgroup_manager]}
${wanted[events_logger]}
EOF
  say "wrote $conf (none was there): ${wanted[runtime]}, ${wanted[cgroup_manager]}, ${wanted[events_logger]}, ${wanted[default_ulimits]}"
else
  lacking=()
  for key in runtime cgroup_manager events_logger default_ulimits; do
    # Spaces do not matter; the value must be the one above.
    want=$(tr -d ' ' <<<"${wanted[$key]}")
    grep -v '^\s*#' "$conf" | tr -d ' \t' | grep -qxF "$want" || lacking+=("${wanted[$key]}")
  done
  if [ ${#lacking[@]} -gt 0 ]; then
    say "$conf exists and is left as it is; it lacks: $(printf '%s; ' "${lacking[@]}")going on (where podman's defaults work, crun and systemd, that is fine; in our sandboxes they fail)"
  fi
fi

# --- Work folder and cleanup ---------------------------------------------------------------
WORK=$(mktemp -d /tmp/condense-container-test.XXXXXX)
chmod 0755 "$WORK"
compose_files=(-f docker/compose.yaml -f docker/test/compose.test.yaml)
compose() {
  # No pod: every service gets its own network namespace and name, as with Docker Compose.
  timeout "${COMPOSE_TIMEOUT:-600}" "$PODMAN_COMPOSE" --in-pod false -p "$PROJECT" \
    --env-file "$WORK/compose.env" "${compose_files[@]}" "$@"
}
of_project() { podman "$@" --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Name}}' 2>/dev/null || true; }
container_of() {
  podman ps -a --filter "label=io.podman.compose.project=$PROJECT" \
    --filter "label=com.docker.compose.service=$1" --format '{{.Names}}' | head -n 1
}
remove_project() {
  local c v n
  c=$(podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}' 2>/dev/null || true)
  [ -z "$c" ] || podman rm -f -t 5 $c >/dev/null 2>&1 || true
  v=$(of_project volume ls)
  [ -z "$v" ] || podman volume rm -f $v >/dev/null 2>&1 || true
  n=$(of_project network ls)
  [ -z "$n" ] || podman network rm -f $n >/dev/null 2>&1 || true
}
cleanup() {
  local rc=$?
  trap - EXIT
  if [ "$rc" -ne 0 ]; then
    for c in $(podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}' 2>/dev/null); do
      echo "--- last lines of $c:" >&2
      podman logs --tail 30 "$c" 2>&1 | sed 's/^/    /' >&2 || true
    done
  fi
  [ ! -f "$WORK/compose.env" ] || COMPOSE_TIMEOUT=180 compose down -v -t 10 >/dev/null 2>&1 || true
  remove_project
  rm -rf "$WORK"
  say "cleaned up: containers, volumes and network of project $PROJECT, $WORK; kept the images" \
    "$BASE_IMAGE, $POSTGRES_IMAGE, $NGINX_IMAGE (cache) and $IMAGE"
  [ "$rc" -eq 0 ] && say "passed in $(elapsed)" || say "FAILED (exit $rc) after $(elapsed)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
remove_project   # leftovers of a run that was killed

# --- 3. Images -----------------------------------------------------------------------------
# The base stands in for the official debian:bookworm-slim (no image registry is reachable
# here), so it is slimmed as that image is (debuerreotype's "slim" variant): no documentation,
# manual pages or translations, the same dpkg excludes for later packages, apt keeping no
# .debs. A base made by an older version of this script (121 MB, not slimmed: the size check
# of the condense image below would count 47 MB that debian:bookworm-slim does not have) is
# made again: its label names the recipe.
BASE_RECIPE=slim-1
if [ "$(podman image inspect --format '{{index .Labels "org.condense.container-test.base"}}' "$BASE_IMAGE" 2>/dev/null)" != "$BASE_RECIPE" ]; then
  say "making $BASE_IMAGE with debootstrap --variant=minbase bookworm, slimmed (once; about three minutes)"
  old_base=$(podman image inspect --format '{{.Id}}' "$BASE_IMAGE" 2>/dev/null || true)
  rootfs=$WORK/rootfs
  timeout 900 debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap bookworm from $DEBIAN_MIRROR"; }
  # As the official image: sources with updates and security, no package lists or archives.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs/etc/apt/sources.list"
  cat > "$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $DEBIAN_MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # The official slim image's dpkg excludes and apt cleaning (the same settings as its
  # /etc/dpkg/dpkg.cfg.d/docker and /etc/apt/apt.conf.d/docker-clean), then what the excludes
  # would have kept out, removed from the packages already installed.
  printf '%s\n' \
    'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
    'path-exclude /usr/share/groff/*' 'path-exclude /usr/share/info/*' \
    'path-exclude /usr/share/linda/*' 'path-exclude /usr/share/lintian/*' \
    'path-exclude /usr/share/locale/*' 'path-include /usr/share/locale/locale.alias' \
    'path-exclude /usr/share/man/*' >"$rootfs/etc/dpkg/dpkg.cfg.d/docker"
  clean='rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true'
  printf '%s\n' "DPkg::Post-Invoke { \"$clean\"; };" "APT::Update::Post-Invoke { \"$clean\"; };" \
    'Dir::Cache::pkgcache "";' 'Dir::Cache::srcpkgcache "";' >"$rootfs/etc/apt/apt.conf.d/docker-clean"
  # ${rootfs:?}: never the host's own /usr/share.
  find "${rootfs:?}/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "${rootfs:?}/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "${rootfs:?}/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  for d in groff info linda lintian man; do rm -rf "${rootfs:?}/usr/share/$d"/*; done
  tar -C "$rootfs" -c . | podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "LABEL org.condense.container-test.base=$BASE_RECIPE" \
    --change 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
  # The images made on the old base are built again below, on this one.
  if [ -n "$old_base" ]; then podman rmi "$old_base" >/dev/null 2>&1 || true; fi
fi
ok "base image $BASE_IMAGE (debootstrap minbase bookworm, slimmed as debian:bookworm-slim; $(podman image inspect --format '{{.Size}}' "$BASE_IMAGE" | numfmt --to=si --suffix=B))"

build() {  # build TAG CONTEXT [podman build options...]
  local tag=$1 context=$2 old new
  shift 2
  old=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
  timeout 900 podman build --quiet --pull=never --format docker -t "$tag" "$@" "$context" >"$WORK/build.log" 2>&1 \
    || { tail -30 "$WORK/build.log" >&2; die "podman build $tag"; }
  new=$(podman image inspect --format '{{.Id}}' "$tag")
  # The image this tag named before, now untagged: nothing else uses it.
  if [ -n "$old" ] && [ "$old" != "$new" ]; then podman rmi "$old" >/dev/null 2>&1 || true; fi
}
build "$POSTGRES_IMAGE" docker/test/postgres --build-arg BASE_IMAGE="$BASE_IMAGE"
build "$NGINX_IMAGE" docker/test/nginx --build-arg BASE_IMAGE="$BASE_IMAGE"
ok "local images from Debian's packages: $POSTGRES_IMAGE, $NGINX_IMAGE ($(podman run --rm "$NGINX_IMAGE" nginx -v 2>&1 | sed 's/.*version: //'))"

[ -x "$BINARY" ] && [ -x "$BINARY-media" ] || die "$BINARY or $BINARY-media is missing: run \`make build\` first (\`make container-test\` does)"
mkdir "$WORK/context"
install -m 0755 "$BINARY" "$WORK/context/condense"
install -m 0755 "$BINARY-media" "$WORK/context/condense-media"
build "$IMAGE" "$WORK/context" -f docker/Dockerfile --target prebuilt --build-arg RUNTIME_IMAGE="$BASE_IMAGE"
ok "podman build --target prebuilt: $IMAGE from $BINARY (the ldd guard passed)"

# Its size, layer by layer, against the limit of docker/README.md, "Image size" (issue 41:
# 711 MB before). MB as podman prints them: 10^6 bytes, uncompressed.
SIZE_LIMIT_MB=400
podman history --format json "$IMAGE" | python3 -c '
import json, re, sys
for layer in reversed(json.load(sys.stdin)):
    if layer["size"] == 0:
        continue
    step = re.sub(r"^(\|\d+ \S+ )?/bin/sh -c (#\(nop\) )?", "", layer["CreatedBy"])
    what = next((w for key, w in [
        ("ADD file:", "the base image (RUNTIME_IMAGE)"),
        ("apt-get install", "FFmpeg 5.1 runtime libraries and what they need, tini"),
        ("groupadd", "the user condense, /data and /media"),
        ("COPY", "condense and condense-media, stripped"),
        ("ldd", "the ldd guard"),
    ] if key in step), step[:60])
    size = layer["size"] / 1e6
    print(f"       {size:8.1f} MB  {what}")
'
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
size_mb=$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1e6 }')
[ "$size" -le $((SIZE_LIMIT_MB * 1000000)) ] \
  || die "image size: $IMAGE is $size_mb MB, over the limit of $SIZE_LIMIT_MB MB (its layers above; docker/README.md, \"Image size\")"
ok "image size: $size_mb MB, within $SIZE_LIMIT_MB MB (its layers above)"

# The binaries in the image are stripped; their debug info comes out of the same build
# (target prebuilt-debug-files) into target/release/, and each binary's .gnu_debuglink (the
# file's name and CRC-32) names exactly that file.
timeout 300 podman build --quiet --pull=never --format docker -f docker/Dockerfile --target prebuilt-debug-files \
  --build-arg RUNTIME_IMAGE="$BASE_IMAGE" -o "type=local,dest=$WORK/debug" "$WORK/context" >"$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log" >&2; die "podman build --target prebuilt-debug-files"; }
release_dir=$(dirname "$BINARY")
for b in condense condense-media; do
  install -m 0644 -o "$(stat -c %u "$release_dir")" -g "$(stat -c %g "$release_dir")" "$WORK/debug/$b.debug" "$release_dir/$b.debug"
  podman run --rm --no-healthcheck --entrypoint cat "$IMAGE" "/usr/local/bin/$b" >"$WORK/$b.image"
  ! readelf -SW "$WORK/$b.image" | grep -qE '\.debug_(info|line) ' || die "/usr/local/bin/$b in the image still has debug sections"
  objcopy --dump-section .gnu_debuglink="$WORK/$b.link" "$WORK/$b.image" "$WORK/$b.scratch" \
    || die "/usr/local/bin/$b in the image has no .gnu_debuglink"
  python3 - "$WORK/$b.link" "$release_dir/$b.debug" <<'EOF' || die "/usr/local/bin/$b in the image: its .gnu_debuglink does not match $release_dir/$b.debug"
import os, sys, zlib
link = open(sys.argv[1], "rb").read()
name = link.split(b"\0", 1)[0].decode()
crc = int.from_bytes(link[-4:], "little")
debug = open(sys.argv[2], "rb").read()
sys.exit(0 if name == os.path.basename(sys.argv[2]) and crc == zlib.crc32(debug) else 1)
EOF
done
ok "binaries stripped in the image ($(podman run --rm --no-healthcheck --entrypoint stat "$IMAGE" -c '%n %s' /usr/local/bin/condense /usr/local/bin/condense-media | awk '{ sub(".*/", "", $1); printf "%s%s %.1f MB", sep, $1, $2 / 1e6; sep = ", " }')); debug info in $release_dir/condense.debug and condense-media.debug, which their .gnu_debuglink names (CRC checked)"

inspect=$(podman image inspect --format '{{.Config.User}}|{{json .Config.Entrypoint}}|{{json .Config.Healthcheck.Test}}' "$IMAGE")
case "$inspect" in
  'condense:condense|["tini","--","condense"]|["CMD","bash","-c",'*'/healthz'*) ;;
  *) die "image config: user, entrypoint or health check not as in docker/Dockerfile: $inspect" ;;
esac
ok "image config: user condense, entrypoint tini -- condense, HEALTHCHECK GET /healthz"
version=$(podman run --rm --no-healthcheck "$IMAGE" version 2>&1) || die "condense version in the image: $version"
grep -q 'libavcodec' <<<"$version" || die "condense version names no FFmpeg library: $version"
ok "podman run $IMAGE version: $(head -n 2 <<<"$version" | paste -sd ' '), $(grep -o 'libavcodec .*' <<<"$version" | head -n 1)"

# --- 4. The stack --------------------------------------------------------------------------
# A licence of this run's own (FREE allows one node): a key pair, then a PRO key signed with it.
keys=$(podman run --rm --no-healthcheck "$IMAGE" license keygen)
private_key=$(sed -n 's/^private: *//p' <<<"$keys")
public_key=$(sed -n 's/^public: *//p' <<<"$keys")
[ -n "$private_key" ] && [ -n "$public_key" ] || die "condense license keygen: $keys"
license_key=$(podman run --rm --no-healthcheck -e CONDENSE_LICENSE_PRIVATE_KEY="$private_key" "$IMAGE" \
  license issue --tier PRO --licensee container-test)
ok "condense license keygen and issue (in the image): a PRO key for this run"

# Clips on the shared volume, made now (nothing is committed): H.264 and AAC, 320x240, 4 s.
media=$WORK/media
mkdir -p "$media/clips"
for i in 1 2 3 4 5 6; do
  timeout 120 ffmpeg -nostdin -v error -f lavfi -i "testsrc2=size=320x240:rate=25:duration=4" \
    -f lavfi -i "sine=frequency=$((300 + 100 * i)):duration=4" -c:v libx264 -preset veryfast -crf 18 \
    -pix_fmt yuv420p -c:a aac -b:a 64k -shortest "$media/clips/clip$i.mp4"
done
chown -R 1000:1000 "$media"   # the image's user, who replaces the originals
ok "6 H.264 clips made with the host's ffmpeg in MEDIA_DIR=$media (owner uid 1000)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
secret() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
api_port=$(free_port); ui_port=$(free_port); proxy_port=$(free_port)
# Every variable of the two compose files, in the environment (which wins) and in the env
# file (so that a user's docker/.env is not read).
cat > "$WORK/compose.env" <<EOF
COMPOSE_PROFILES=workers,postgres
CONDENSE_IMAGE=$IMAGE
CONDENSE_TEST_POSTGRES_IMAGE=$POSTGRES_IMAGE
CONDENSE_TEST_NGINX_IMAGE=$NGINX_IMAGE
CONDENSE_TEST_NGINX_CONF=$ROOT/docker/nginx.conf
JWT_SECRET=$(secret)
CLUSTER_TOKEN=$(secret)
ADMIN_PASSWORD=$(secret)
POSTGRES_PASSWORD=$(secret)
MEDIA_DIR=$media
LICENSE_KEY=$license_key
LICENSE_PUBLIC_KEY=$public_key
PUBLISH_API_PORT=$api_port
PUBLISH_UI_PORT=$ui_port
PUBLISH_PROXY_PORT=$proxy_port
EOF
chmod 0600 "$WORK/compose.env"
set -a; . "$WORK/compose.env"; set +a
export API_URL=http://127.0.0.1:$api_port UI_URL=http://127.0.0.1:$ui_port PROXY_URL=http://127.0.0.1:$proxy_port
export STATE_FILE=$WORK/state.json
drive() { timeout 900 "$venv/bin/python" scripts/container-test-drive.py "$1"; }

healthy() {  # healthy SERVICE SECONDS: the container's own health check passes
  local c deadline=$(( $(date +%s) + $2 ))
  c=$(container_of "$1")
  [ -n "$c" ] || die "no container for service $1"
  until podman healthcheck run "$c" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || die "$1 ($c) not healthy after $2 s: $(podman inspect --format '{{.State.Status}}' "$c")"
    sleep 2
  done
}

up() {
  # podman 4.3 cannot wait for `condition: service_healthy` (podman-compose skips it with a
  # warning), and main exits when its database does not answer: PostgreSQL goes first.
  compose up -d --no-build postgres >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; die "podman-compose up postgres"; }
  healthy postgres 90
  compose up -d --no-build >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; die "podman-compose up"; }
  healthy main 120
  healthy worker1 60
  healthy worker2 60
}

up
ok "podman-compose up: main, worker1, worker2, postgres, proxy; postgres's compose health check (pg_isready) and the image's HEALTHCHECK on main, worker1, worker2 pass"
main=$(container_of main)
[ "$(podman exec "$main" id -u)" = 1000 ] || die "main does not run as uid 1000"
[ "$(podman exec "$main" cat /proc/1/comm)" = tini ] || die "PID 1 of main is not tini"
podman exec "$main" sh -c 'touch /media/.w && rm /media/.w' || die "/media is not writable by the image's user"
ok "main runs as uid 1000 under tini (PID 1); /media is writable by it"

drive before

# A clean stop: SIGTERM through tini, every node exits 0 within its grace period. In Docker
# Compose's order, dependents first (podman-compose stops every service at once).
took=()
for group in "worker1 worker2" proxy main postgres; do
  t0=$(date +%s)
  # shellcheck disable=SC2086
  compose stop $group >"$WORK/stop.log" 2>&1 || { cat "$WORK/stop.log" >&2; die "podman-compose stop $group"; }
  took+=("${group/ /, } $(( $(date +%s) - t0 )) s")
done
for service in main worker1 worker2; do
  code=$(podman inspect --format '{{.State.ExitCode}}' "$(container_of "$service")")
  [ "$code" = 0 ] || die "$service stopped with exit status $code (not a clean SIGTERM stop)"
done
ok "podman-compose stop (workers, proxy, main, postgres): the nodes exit 0 on SIGTERM through tini ($(printf '%s; ' "${took[@]}" | sed 's/; $//'))"
# nginx logs a WebSocket when it closes: worker2's link, now that it has stopped.
proxy_log=$(podman logs "$(container_of proxy)" 2>&1)
grep -qE '"GET /cluster/link HTTP/1.1" 101 ' <<<"$proxy_log" \
  || die "nginx /cluster/link: no upgraded link in its access log: $(grep cluster/link <<<"$proxy_log" | tail -3)"
ok "nginx /cluster/link: worker2 (MAIN_NODE_URL=http://proxy:80) was linked through the proxy (101 in nginx's access log)"
compose down >"$WORK/down.log" 2>&1 || { cat "$WORK/down.log" >&2; die "podman-compose down"; }
[ -z "$(podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}')" ] \
  || die "containers left after down"
volumes=$(of_project volume ls | sort | paste -sd ' ')
for v in data worker1-data worker2-data pgdata media; do
  grep -qw "${PROJECT}_$v" <<<"$volumes" || die "volume ${PROJECT}_$v gone after down (have: $volumes)"
done
ok "podman-compose down: containers removed, volumes kept ($volumes)"

up
ok "podman-compose up again: every service healthy"
drive after
for service in worker1 worker2; do
  podman logs "$(container_of "$service")" 2>&1 | grep -q 'registered with the main node.*enrolled=false' \
    || die "$service did not link with its kept credential (no 'enrolled=false' in its log)"
done
ok "worker1 and worker2 linked with the credentials kept in their volumes (enrolled=false in their logs)"

ok "everything above, in $(elapsed)"
