#!/usr/bin/env bash
# Kafka's kafka-configs.sh over minibroker (minibroker/kafkatools; bin/README.md).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${MINIBROKER_PYTHON:-$here/../.venv/bin/python}"
[ -x "$python" ] || python=python3
exec "$python" -m minibroker.kafkatools kafka-configs "$@"
