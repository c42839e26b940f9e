#!/usr/bin/env bash
# Starts, on loopback, the stores the provider tests use, unless they already run, and waits
# until each answers. Installs missing Debian packages (needs root, as on the CI machines).
# Usage: scripts/services.sh [postgres] [mysql] [redis] [nats] [etcd] [zookeeper] [memcached] [chromium]
#   [spanner] [firestore] [datastore]
# (no argument: all of them). Exits non-zero, naming the store, if one does not come up.
# Google's emulators (Spanner, Firestore, Datastore) come from Debian packages of the base image whose
# source is switched off: they cannot be installed here, so a missing one fails, naming its package.
set -euo pipefail
STATE=${SHEDLOCK_SERVICES_DIR:-/tmp/shedlock-services}
mkdir -p "$STATE"

log() { printf 'services: %s\n' "$*"; }
fail() { printf 'services: %s\n' "$*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_for() { # wait_for <what> <seconds> <command...>
  local what=$1 seconds=$2; shift 2
  for _ in $(seq "$((seconds * 4))"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  fail "$what did not come up within ${seconds}s (logs in $STATE)"
}
apt_updated=
need() { # need <command> <debian package>
  # type -P, not command -v: this script's own functions are named etcd and memcached.
  if type -P "$1" >/dev/null || [ -x "/usr/sbin/$1" ] || [ -x "/usr/share/zookeeper/bin/$1" ]; then return 0; fi
  log "installing $2"
  [ -n "$apt_updated" ] || { apt-get update -qq >/dev/null; apt_updated=1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

postgres() {
  need pg_ctlcluster postgresql
  if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    log "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start || true
  fi
  wait_for "PostgreSQL (127.0.0.1:5432)" 60 pg_isready -q -h 127.0.0.1 -p 5432
  psql -h 127.0.0.1 -U postgres -Atqc "SELECT 1 FROM pg_database WHERE datname = 'test'" postgres | grep -q 1 ||
    psql -h 127.0.0.1 -U postgres -qc 'CREATE DATABASE test' postgres
}

mysql() {
  need mariadbd mariadb-server
  if ! mariadb-admin -h 127.0.0.1 -uroot ping >/dev/null 2>&1; then
    log "starting MariaDB"
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  fi
  wait_for "MariaDB (127.0.0.1:3306)" 60 mariadb-admin -h 127.0.0.1 -uroot ping
  mariadb -h 127.0.0.1 -uroot -e 'CREATE DATABASE IF NOT EXISTS test'
}

redis() {
  need redis-server redis-server
  if ! port_open 6379; then
    log "starting Redis"
    mkdir -p "$STATE/redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no --dir "$STATE/redis" --logfile "$STATE/redis.log"
  fi
  wait_for "Redis (127.0.0.1:6379)" 30 redis-cli -h 127.0.0.1 -p 6379 ping
}

nats() {
  need nats-server nats-server
  if ! port_open 4222; then
    log "starting NATS with JetStream"
    mkdir -p "$STATE/nats"
    nohup nats-server -a 127.0.0.1 -p 4222 -js -sd "$STATE/nats" >"$STATE/nats.log" 2>&1 &
  fi
  wait_for "NATS (127.0.0.1:4222)" 30 port_open 4222
}

etcd() {
  need etcd etcd-server
  need curl curl
  if ! port_open 2379; then
    log "starting etcd"
    rm -rf "$STATE/etcd"
    nohup /usr/bin/etcd --name shedlock-test --data-dir "$STATE/etcd" \
      --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
      --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
      --initial-cluster shedlock-test=http://127.0.0.1:2380 >"$STATE/etcd.log" 2>&1 &
  fi
  wait_for "etcd (127.0.0.1:2379)" 60 curl -fsS http://127.0.0.1:2379/health
}

zookeeper() {
  need zkServer.sh zookeeper
  if ! port_open 2181; then
    log "starting ZooKeeper"
    mkdir -p "$STATE/zookeeper/conf" "$STATE/zookeeper/data"
    cat >"$STATE/zookeeper/conf/zoo.cfg" <<CFG
tickTime=2000
dataDir=$STATE/zookeeper/data
clientPort=2181
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok
CFG
    cp /etc/zookeeper/conf/log4j.properties "$STATE/zookeeper/conf/" 2>/dev/null || true
    ZOO_LOG_DIR="$STATE/zookeeper" /usr/share/zookeeper/bin/zkServer.sh start "$STATE/zookeeper/conf/zoo.cfg" >"$STATE/zookeeper.log" 2>&1
  fi
  wait_for "ZooKeeper (127.0.0.1:2181)" 60 bash -c 'exec 3<>/dev/tcp/127.0.0.1/2181; printf ruok >&3; read -t 2 -n 4 r <&3; [ "$r" = imok ]'
}

memcached() {
  need memcached memcached
  if ! port_open 11211; then
    log "starting memcached"
    command memcached -d -u nobody -l 127.0.0.1 -p 11211 -P "$STATE/memcached.pid"
  fi
  wait_for "memcached (127.0.0.1:11211)" 30 port_open 11211
}

# Google's emulators, all in memory and fresh on each start. Test clients find them through
# SPANNER_EMULATOR_HOST, FIRESTORE_EMULATOR_HOST and DATASTORE_EMULATOR_HOST (test/helpers/google-emulators.ts).
GOOGLE_SDK=${SHEDLOCK_GOOGLE_SDK:-/usr/lib/google-cloud-sdk}
GOOGLE_PROJECT=test-project
need_emulator() { # need_emulator <binary path> <debian package>
  [ -x "$1" ] || fail "$1 is missing: install the Debian package $2 (its source is switched off here, so it comes with the base image)"
}
http_ok() { curl -fs -o /dev/null --max-time 2 "$1"; }

spanner() {
  local bin=$GOOGLE_SDK/bin/cloud_spanner_emulator
  need_emulator "$bin/gateway_main" google-cloud-cli-spanner-emulator
  need_emulator "$bin/emulator_main" google-cloud-cli-spanner-emulator
  need curl curl
  if ! port_open 9010; then
    log "starting the Spanner emulator"
    # gateway_main serves REST on 9020 and runs emulator_main (gRPC, 9010) as its child.
    (cd "$bin" && nohup ./gateway_main --hostname 127.0.0.1 --grpc_port 9010 --http_port 9020 \
      --grpc_binary "$bin/emulator_main" >"$STATE/spanner.log" 2>&1 &)
  fi
  local api=http://127.0.0.1:9020/v1/projects/$GOOGLE_PROJECT/instances
  wait_for "Spanner emulator (127.0.0.1:9010, REST 9020)" 60 http_ok "$api"
  # The emulator starts with no instance; the tests use test-instance and its database test.
  if ! http_ok "$api/test-instance"; then
    curl -fsS -o /dev/null -X POST "$api" -H 'Content-Type: application/json' \
      -d '{"instanceId":"test-instance","instance":{"config":"emulator-config","displayName":"shedlock tests","nodeCount":1}}'
  fi
  if ! http_ok "$api/test-instance/databases/test"; then
    curl -fsS -o /dev/null -X POST "$api/test-instance/databases" -H 'Content-Type: application/json' \
      -d '{"createStatement":"CREATE DATABASE `test`"}'
  fi
  wait_for "Spanner database test-project/test-instance/test" 30 http_ok "$api/test-instance/databases/test"
}

firestore() {
  local bin=$GOOGLE_SDK/platform/cloud-firestore-emulator/cloud_firestore_emulator
  need_emulator "$bin" google-cloud-cli-firestore-emulator
  need java openjdk-17-jre-headless
  need curl curl
  if ! port_open 8686; then
    log "starting the Firestore emulator"
    nohup "$bin" start --host=127.0.0.1 --port=8686 >"$STATE/firestore.log" 2>&1 &
  fi
  wait_for "Firestore emulator (127.0.0.1:8686)" 60 http_ok http://127.0.0.1:8686/
}

datastore() {
  local bin=$GOOGLE_SDK/platform/cloud-datastore-emulator/cloud_datastore_emulator
  need_emulator "$bin" google-cloud-cli-datastore-emulator
  need java openjdk-17-jre-headless
  need curl curl
  if ! port_open 8687; then
    log "starting the Datastore emulator"
    # Its project directory holds only the index configuration: the data stays in memory. No
    # index of our own, and --require_indexes: a query that needs a composite index fails, as it
    # would on Google's Datastore without one (the provider, inspector and ledger need none).
    [ -d "$STATE/datastore/WEB-INF" ] || "$bin" create "$STATE/datastore" >"$STATE/datastore.log" 2>&1
    printf 'indexes:\n' >"$STATE/datastore/WEB-INF/index.yaml"
    nohup "$bin" start --host=127.0.0.1 --port=8687 --consistency=1.0 --store_on_disk=false \
      --require_indexes "$STATE/datastore" >>"$STATE/datastore.log" 2>&1 &
  fi
  wait_for "Datastore emulator (127.0.0.1:8687)" 60 http_ok http://127.0.0.1:8687/
}

# Not a store: the browser the dashboard's tests drive (test/dashboard/browser.test.ts, through
# playwright-core; Debian's build, as no other download works offline).
chromium() {
  need chromium chromium
}

services=("$@")
[ ${#services[@]} -gt 0 ] || services=(postgres mysql redis nats etcd zookeeper memcached chromium spanner firestore datastore)
for service in "${services[@]}"; do
  case $service in
    postgres | mysql | redis | nats | etcd | zookeeper | memcached | chromium | spanner | firestore | datastore) "$service" ;;
    *) fail "unknown service '$service'" ;;
  esac
done
log "up: ${services[*]}"
