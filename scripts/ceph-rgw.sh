#!/usr/bin/env bash
# Starts a single-node Ceph on loopback for the S3 provider's tests: one monitor, one OSD on
# memstore (RAM only, nothing on disk but logs) and a RADOS Gateway answering S3 on
# 127.0.0.1:${SHEDLOCK_RGW_PORT:-7480}, with an S3 user whose keys are the test defaults below.
# Idempotent: exits at once when the gateway already answers with those keys; otherwise stops
# the daemons it started before (by their pid files), wipes its directory and starts afresh.
# Installs the Debian packages when missing (needs root, as on the CI machines).
# About 15 s to start and 120 MB of RAM. Usage: scripts/ceph-rgw.sh [stop]
set -euo pipefail
DIR=${SHEDLOCK_CEPH_DIR:-/tmp/shedlock-ceph}
PORT=${SHEDLOCK_RGW_PORT:-7480}
MON_PORT=${SHEDLOCK_CEPH_MON_PORT:-6789}
# Test-only credentials of a throwaway store on loopback; test/support reads the same defaults.
ACCESS_KEY=${SHEDLOCK_S3_ACCESS_KEY:-shedlocktest}
SECRET_KEY=${SHEDLOCK_S3_SECRET_KEY:-shedlocktestsecret}
CONF=$DIR/ceph.conf

log() { printf 'ceph-rgw: %s\n' "$*"; }
fail() { printf 'ceph-rgw: %s\n' "$*" >&2; exit 1; }

stop() {
  for pidfile in "$DIR"/run/*.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

# The gateway is up with our user when a signed request is not refused (curl signs SigV4 itself;
# RGW wants the payload hash header, here the SHA-256 of the empty body, which curl 7.88 omits).
answers() {
  curl -fsS -o /dev/null --max-time 3 --aws-sigv4 "aws:amz:us-east-1:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
    -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" "http://127.0.0.1:$PORT/"
}

if [ "${1:-}" = stop ]; then stop; exit 0; fi

if ! type -P radosgw >/dev/null || ! type -P ceph-mon >/dev/null || ! type -P ceph-osd >/dev/null || ! type -P curl >/dev/null; then
  log "installing radosgw ceph-mon ceph-osd (about 70 s)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq radosgw ceph-mon ceph-osd curl >/dev/null
fi

if answers 2>/dev/null; then log "already up on 127.0.0.1:$PORT"; exit 0; fi

stop
rm -rf "$DIR"
mkdir -p "$DIR"/{mon,osd,run,log}
FSID=$(cat /proc/sys/kernel/random/uuid)
cat >"$CONF" <<EOF
[global]
fsid = $FSID
mon host = v1:127.0.0.1:$MON_PORT
public network = 127.0.0.0/8
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
osd crush chooseleaf type = 0
run dir = $DIR/run
log file = $DIR/log/\$name.log
admin socket = $DIR/run/\$name.asok
pid file = $DIR/run/\$name.pid
[mon.a]
mon data = $DIR/mon
[osd.0]
osd data = $DIR/osd
osd objectstore = memstore
# With auth none the OSD asks the monitor before it knows the cluster's fsid, and the monitor
# refuses its crush updates ("wrong fsid"); the script places the OSD in the crush map itself.
osd class update on start = false
osd crush update on start = false
memstore device bytes = 536870912
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$PORT
rgw data = $DIR/rgw
rgw dns name = localhost
rgw enable usage log = false
# One log line per request otherwise: megabytes per test run.
debug rgw = 0/0
EOF

log "starting the monitor"
monmaptool --create --fsid "$FSID" --add a "127.0.0.1:$MON_PORT" "$DIR/monmap" >/dev/null
ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" >/dev/null
ceph-mon -c "$CONF" -i a
ceph() { command ceph -c "$CONF" --connect-timeout 20 "$@"; }

log "starting the OSD (memstore)"
OSD_UUID=$(cat /proc/sys/kernel/random/uuid)
ceph osd new "$OSD_UUID" 0 >/dev/null
ceph osd crush add-bucket localhost host >/dev/null 2>&1
ceph osd crush move localhost root=default >/dev/null 2>&1
ceph osd crush add osd.0 1.0 host=localhost >/dev/null 2>&1
ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$OSD_UUID" >/dev/null 2>&1
ceph-osd -c "$CONF" -i 0 2>>"$DIR/log/osd.0.stderr"

log "starting the gateway on 127.0.0.1:$PORT"
mkdir -p "$DIR/rgw"
radosgw -c "$CONF" -n client.rgw.a
for _ in $(seq 240); do
  if radosgw-admin -c "$CONF" user info --uid=shedlock >/dev/null 2>&1 ||
    radosgw-admin -c "$CONF" user create --uid=shedlock --display-name=shedlock --access-key="$ACCESS_KEY" --secret="$SECRET_KEY" >/dev/null 2>&1; then
    break
  fi
  sleep 0.25
done
for _ in $(seq 240); do answers 2>/dev/null && { log "up on 127.0.0.1:$PORT (data in $DIR)"; exit 0; }; sleep 0.25; done
fail "the gateway does not answer on 127.0.0.1:$PORT after 60 s; logs in $DIR/log"
