#!/usr/bin/env bash
# Starts azurite's Blob service (the Azure Storage emulator, npm `azurite`, a devDependency) on
# 127.0.0.1:${SHEDLOCK_AZURITE_PORT:-10000}, in memory, for the Azure Blob provider's tests,
# unless something already listens there; waits until it answers. About 1-5 s.
# AZURITE_BLOB names another azurite-blob binary (default: node_modules/.bin/azurite-blob).
# Usage: scripts/azurite.sh [stop]
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${SHEDLOCK_AZURITE_DIR:-/tmp/shedlock-azurite}
PORT=${SHEDLOCK_AZURITE_PORT:-10000}
BIN=${AZURITE_BLOB:-node_modules/.bin/azurite-blob}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Answers HTTP within 3 s: an azurite that spins at a core (seen some minutes after the bench's
# Azure measurements) still accepts connections but answers nothing, and the tests would hang.
answers() {
  timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"; printf "GET / HTTP/1.0\r\n\r\n" >&3; head -c 5 <&3' _ "$1" 2>/dev/null |
    grep -q '^HTTP/'
}
# Stops the azurite this script started: SIGTERM, then SIGKILL after 5 s (a spinning one ignores SIGTERM).
stop() {
  if [ -f "$DIR/azurite.pid" ]; then
    local pid
    pid=$(cat "$DIR/azurite.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$DIR/azurite.pid"
}

if [ "${1:-}" = stop ]; then stop; exit 0; fi
if port_open "$PORT"; then
  if answers "$PORT"; then echo "azurite: already up on 127.0.0.1:$PORT"; exit 0; fi
  [ -f "$DIR/azurite.pid" ] || {
    echo "azurite: something on 127.0.0.1:$PORT accepts connections but does not answer HTTP, and it is not ours ($DIR/azurite.pid): stop it or set SHEDLOCK_AZURITE_PORT" >&2
    exit 1
  }
  echo "azurite: ours on 127.0.0.1:$PORT does not answer; restarting it"
  stop
fi
[ -x "$BIN" ] || { echo "azurite: $BIN is missing; run npm ci (azurite is a devDependency) or set AZURITE_BLOB" >&2; exit 1; }
mkdir -p "$DIR"
# --loose: accept the headers azurite does not implement; --skipApiVersionCheck: newer SDKs.
nohup "$BIN" --blobHost 127.0.0.1 --blobPort "$PORT" --inMemoryPersistence --loose --skipApiVersionCheck --disableTelemetry --silent >"$DIR/azurite.log" 2>&1 &
echo $! >"$DIR/azurite.pid"
for _ in $(seq 120); do port_open "$PORT" && { echo "azurite: up on 127.0.0.1:$PORT"; exit 0; }; sleep 0.25; done
echo "azurite: did not come up on 127.0.0.1:$PORT within 30 s (log: $DIR/azurite.log)" >&2
exit 1
