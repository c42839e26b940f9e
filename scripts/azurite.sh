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

if [ "${1:-}" = stop ]; then
  [ -f "$DIR/azurite.pid" ] && kill "$(cat "$DIR/azurite.pid")" 2>/dev/null || true
  rm -f "$DIR/azurite.pid"
  exit 0
fi
if port_open "$PORT"; then echo "azurite: already up on 127.0.0.1:$PORT"; exit 0; fi
[ -x "$BIN" ] || { echo "azurite: $BIN is missing; run npm ci (azurite is a devDependency) or set AZURITE_BLOB" >&2; exit 1; }
mkdir -p "$DIR"
# --loose: accept the headers azurite does not implement; --skipApiVersionCheck: newer SDKs.
nohup "$BIN" --blobHost 127.0.0.1 --blobPort "$PORT" --inMemoryPersistence --loose --skipApiVersionCheck --disableTelemetry --silent >"$DIR/azurite.log" 2>&1 &
echo $! >"$DIR/azurite.pid"
for _ in $(seq 120); do port_open "$PORT" && { echo "azurite: up on 127.0.0.1:$PORT"; exit 0; }; sleep 0.25; done
echo "azurite: did not come up on 127.0.0.1:$PORT within 30 s (log: $DIR/azurite.log)" >&2
exit 1
