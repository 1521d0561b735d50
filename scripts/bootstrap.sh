#!/usr/bin/env bash
# Prepare a clone for the demo and the tests: .venv with the project (and its test tools)
# installed, and a ZooKeeper server (Debian's `zookeeper` package). Idempotent: a second run
# only checks, and takes about a second.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "bootstrap: Python 3.11 or newer is needed; set PYTHON=/path/to/python3.11" >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv"
  "$PYTHON" -m venv .venv
fi

# Reinstall when pyproject.toml or the C extension's source changed, or the install is broken.
stamp=.venv/.minibroker-installed
want=$(cat pyproject.toml minibroker/core/*.c | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] \
   || ! .venv/bin/python -c 'import minibroker.core._record_walk, minibroker.core._record_encode, grpc, kazoo, pyspark, pytest, aiohttp, selenium' 2>/dev/null; then
  echo "bootstrap: installing minibroker and its dependencies into .venv (first time: ~1 min)"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[loadgen,test]"
  echo "$want" > "$stamp"
fi

# Debian packages, as root (or through passwordless sudo); `what` names them for the message.
apt_install() {
  local what="$1"; shift
  if ! command -v apt-get >/dev/null 2>&1; then
    return 0
  fi
  local SUDO=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      SUDO="sudo -n"
    else
      echo "bootstrap: $what is missing. Install it as root: apt-get install $*" >&2
      exit 1
    fi
  fi
  echo "bootstrap: installing Debian's $*"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

zk_found() {
  .venv/bin/python -c 'from minibroker.runtime.zk_server import find_zookeeper; find_zookeeper()' \
    2>/dev/null
}
if ! zk_found; then
  apt_install ZooKeeper zookeeper
  if ! zk_found; then
    .venv/bin/python -c \
      'from minibroker.runtime.zk_server import INSTALL_HINT; print("bootstrap:", INSTALL_HINT)' >&2
    exit 1
  fi
fi

# --browser (the test command): Debian's chromium and chromedriver for the dashboard's browser
# tests; a browser download at install time cannot work on these machines. And Debian's kcat,
# the Kafka command-line client whose `kcat -L` the Kafka listener's tests run.
if [ "${1:-}" = "--browser" ] && ! { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; }; then
  apt_install "a browser for the dashboard tests" chromium chromium-driver
fi
if [ "${1:-}" = "--browser" ] && ! command -v kcat >/dev/null 2>&1; then
  apt_install "kcat for the Kafka client tests" kcat
fi
echo "bootstrap: ready (.venv, ZooKeeper${1:+, chromium})"
