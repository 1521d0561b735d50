#!/usr/bin/env bash
# Build every image deploy/docker-compose.yml uses, from local sources only: for machines whose
# Docker engine cannot pull (no registry). Usage:
#   bash deploy/build-images.sh              # local sources (the default)
#   bash deploy/build-images.sh --registry   # official base images: `compose build`
#   bash deploy/build-images.sh --swarm      # also the test swarm's node (deploy/swarm)
# Local sources: Debian bookworm root filesystems made with mmdebstrap from the Debian mirror the
# host's apt uses, imported with `docker import`, and a wheelhouse built on the host with
# `pip wheel`; the Dockerfile then installs with PIP_OFFLINE=1. Idempotent and cached: a base
# image is remade only when its package list or the mirror changes, the wheelhouse only when
# pyproject.toml's requirements change, and Docker's layer cache does the rest (a second run
# with nothing changed takes seconds). Prints what it built, with sizes.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "build-images: $*" >&2; exit 1; }
say() { echo "build-images: $*"; }

MODE=local
SWARM=0
for arg in "$@"; do
  case "$arg" in
    --registry) MODE=registry ;;
    --swarm) SWARM=1 ;;
    --local) MODE=local ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (use --registry, --local, --swarm or --help)" ;;
  esac
done

command -v docker >/dev/null 2>&1 \
  || die "docker is not installed: install Docker Engine (Debian: apt-get install docker.io)"
docker info >/dev/null 2>&1 \
  || die "cannot reach the Docker engine: start it (systemctl start docker) or join the docker group"

PROJECT_IMAGES=(minibroker:dev minibroker-loadgen:dev minibroker-zookeeper:dev minibroker-netfault:dev)

if [ "$MODE" = registry ]; then
  if docker compose version >/dev/null 2>&1; then
    docker compose -f deploy/docker-compose.yml --profile loadgen --profile tools build
  else
    docker-compose -f deploy/docker-compose.yml --profile loadgen --profile tools build
  fi
  docker image ls --format '  {{.Repository}}:{{.Tag}}  {{.Size}}' | grep -E '^  minibroker' || true
  exit 0
fi

STATE=deploy/.build
mkdir -p "$STATE" deploy/wheels

# ---- base images: Debian bookworm root filesystems -------------------------------------------
if ! command -v mmdebstrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's mmdebstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null \
      || { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
           && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null; }
  else
    die "mmdebstrap is missing: install it as root (apt-get install mmdebstrap)"
  fi
fi
[ "$(id -u)" = 0 ] || die "making a root filesystem needs root (mmdebstrap's root mode): run with sudo"

# The Debian archive lines of the host's apt sources (one-line and deb822 formats), for bookworm.
debian_sources() {
  {
    grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
      | awk '{print $2, $3}'
    awk '/^URIs:/{u=$2} /^Suites:/{for (i = 2; i <= NF; i++) s[i] = $i; n = NF}
         /^$/{if (u) for (i = 2; i <= n; i++) print u, s[i]; u = ""; n = 0}
         END{if (u) for (i = 2; i <= n; i++) print u, s[i]}' \
      /etc/apt/sources.list.d/*.sources 2>/dev/null
  } | awk '$1 ~ /\/debian(-security)?\/?$/ && $2 ~ /^bookworm/ {print "deb " $1 " " $2 " main"}' \
    | sort -u
}
SOURCES=()
while IFS= read -r line; do SOURCES+=("$line"); done < <(debian_sources)
[ "${#SOURCES[@]}" -gt 0 ] || SOURCES=("deb http://deb.debian.org/debian bookworm main")

make_base() {  # NAME PACKAGES(comma-separated)
  local name=$1 packages=$2 key
  key=$(printf '%s\n' v1 "$packages" "${SOURCES[@]}" | sha256sum | cut -c1-16)
  if [ "$(docker image inspect "$name" --format '{{index .Config.Labels "org.minibroker.base-key"}}' \
        2>/dev/null)" = "$key" ]; then
    say "$name: up to date"
    return
  fi
  say "$name: mmdebstrap bookworm with $packages (~20-60 s)"
  # No documentation, manuals or translations; no Recommends; /usr merged by a hook instead of
  # the usrmerge package (which would pull in perl); the JRE's postinst needs man1 to exist.
  if ! { mmdebstrap --quiet --variant=essential --include="$packages" \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --essential-hook='mkdir -p "$1/usr/share/man/man1"' \
    --customize-hook='rm -rf "$1/var/lib/apt/lists/"* "$1/var/cache/apt/"*.bin' \
    bookworm - "${SOURCES[@]}" \
    | docker import --change "LABEL org.minibroker.base-key=$key" \
        --change 'CMD ["python3"]' - "$name" >/dev/null; } 2> "$STATE/base-${name%%:*}.log"; then
    tail -n 30 "$STATE/base-${name%%:*}.log" >&2
    die "making $name failed (whole log: $STATE/base-${name%%:*}.log)"
  fi
}
# The four root filesystems and the wheelhouse (below) are made side by side: most of their time
# is spent waiting on the mirror, PyPI and dpkg, not on the cores (one after the other they took
# 9 min on a clean 2-core machine).
BASE_JOBS=()
make_base minibroker-base:bookworm python3,passwd,libstdc++6 & BASE_JOBS+=($!)
make_base minibroker-base-build:bookworm python3,python3-venv,python3-dev,gcc,libc6-dev & BASE_JOBS+=($!)
make_base minibroker-base-java:bookworm python3,passwd,openjdk-17-jre-headless,libzookeeper-java \
  & BASE_JOBS+=($!)
make_base minibroker-base-net:bookworm iptables,kcat & BASE_JOBS+=($!)
if [ "$SWARM" = 1 ]; then
  make_base minibroker-base-dind:bookworm docker.io,fuse-overlayfs,iproute2,procps,ca-certificates \
    & BASE_JOBS+=($!)
fi
trap 'kill "${BASE_JOBS[@]}" 2>/dev/null || true' EXIT  # a failed wheelhouse stops them too

# ---- the wheelhouse: every Python package the images install, built on the host -------------
PYTHON="${PYTHON:-python3}"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null \
  || die "the wheelhouse must be built with Python 3.11 (the images' Python): set PYTHON=python3.11"
"$PYTHON" - > "$STATE/requirements.txt" <<'EOF'
import re, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["loadgen"]))
tools = re.search(r"grpcio-tools==[0-9.]+", open("pyproject.toml").read())
print(tools.group(0) if tools else "grpcio-tools")
print("setuptools>=77")
EOF
want=$(cat "$STATE/requirements.txt" | sha256sum | cut -c1-16)
# Wheels built once per machine and requirements, kept outside the checkout: another clone (CI's
# clean one) copies the very same files, so Docker's cache of the layers that install them holds
# (wheels built again from source differ in their bytes, and every layer after them would not).
CACHE="${MINIBROKER_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/minibroker/wheels}/$want"
if [ "$(cat "$STATE/wheels.stamp" 2>/dev/null)" = "$want" ] && ls deploy/wheels/*.whl >/dev/null 2>&1; then
  say "wheelhouse: up to date"
elif ls "$CACHE"/*.whl >/dev/null 2>&1; then
  say "wheelhouse: copied from $CACHE"
  find deploy/wheels -name '*.whl' -delete
  cp -p "$CACHE"/*.whl deploy/wheels/
  echo "$want" > "$STATE/wheels.stamp"
else
  say "wheelhouse: pip wheel into deploy/wheels (first time: a few minutes, pyspark is ~400 MB)"
  find deploy/wheels -name '*.whl' -delete
  "$PYTHON" -m pip wheel -q --disable-pip-version-check -w deploy/wheels -r "$STATE/requirements.txt"
  echo "$want" > "$STATE/wheels.stamp"
  if mkdir -p "$CACHE.tmp.$$" 2>/dev/null && cp -p deploy/wheels/*.whl "$CACHE.tmp.$$"/; then
    rm -rf "$CACHE" && mv "$CACHE.tmp.$$" "$CACHE" || rm -rf "$CACHE.tmp.$$"
  fi
fi

# ---- the project's images ----------------------------------------------------------------------
for job in "${BASE_JOBS[@]}"; do
  wait "$job" || die "a base image could not be made (its error is above)"
done
# MINIBROKER_BUILD_CPU_SHARES (the test command sets 2): the cgroup weight of the builds' RUN
# containers. They run under the Docker daemon, not under this script, so `nice` on the script
# does not reach them; a low weight does (the default is 1024), yielding the cores to tests.
BUILD_OPTS=(--force-rm)
[ -z "${MINIBROKER_BUILD_CPU_SHARES:-}" ] || BUILD_OPTS+=(--cpu-shares "$MINIBROKER_BUILD_CPU_SHARES")
build_target() {  # TARGET IMAGE
  local target=$1 image=$2
  say "$image: docker build --target $target"
  if ! docker build "${BUILD_OPTS[@]}" -f deploy/Dockerfile --target "$target" -t "$image" \
       --build-arg PYTHON_IMAGE=minibroker-base:bookworm \
       --build-arg BUILD_IMAGE=minibroker-base-build:bookworm \
       --build-arg JAVA_IMAGE=minibroker-base-java:bookworm \
       --build-arg NET_IMAGE=minibroker-base-net:bookworm \
       --build-arg PIP_OFFLINE=1 . > "$STATE/build-$target.log" 2>&1; then
    tail -n 30 "$STATE/build-$target.log" >&2
    die "building $image failed (whole log: $STATE/build-$target.log)"
  fi
}
# runtime and loadgen share the `build` stage: one after the other (the second finds it
# cached); zookeeper and netfault share nothing with them and are built beside them.
BUILD_JOBS=()
build_target zookeeper minibroker-zookeeper:dev & BUILD_JOBS+=($!)
build_target netfault minibroker-netfault:dev & BUILD_JOBS+=($!)
trap 'kill "${BUILD_JOBS[@]}" 2>/dev/null || true' EXIT
build_target runtime minibroker:dev
build_target loadgen minibroker-loadgen:dev
for job in "${BUILD_JOBS[@]}"; do
  wait "$job" || die "an image could not be built (its error is above)"
done
if [ "$SWARM" = 1 ]; then
  say "minibroker-swarm-node:dev: docker build deploy/swarm"
  if ! docker build "${BUILD_OPTS[@]}" -t minibroker-swarm-node:dev \
       --build-arg NODE_IMAGE=minibroker-base-dind:bookworm deploy/swarm \
       > "$STATE/build-swarm-node.log" 2>&1; then
    tail -n 30 "$STATE/build-swarm-node.log" >&2
    die "building minibroker-swarm-node:dev failed (whole log: $STATE/build-swarm-node.log)"
  fi
  PROJECT_IMAGES+=(minibroker-swarm-node:dev)
fi
# Images a rebuild replaced, and nothing else.
docker image prune -f --filter label=org.minibroker.image >/dev/null

say "built:"
for image in "${PROJECT_IMAGES[@]}" minibroker-base:bookworm minibroker-base-build:bookworm \
             minibroker-base-java:bookworm minibroker-base-net:bookworm; do
  size=$(docker image inspect "$image" --format '{{.Size}}' 2>/dev/null || echo "")
  if [ -n "$size" ]; then echo "  $image  $((size / 1000000)) MB"; else echo "  $image  missing"; fi
done
