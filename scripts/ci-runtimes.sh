#!/usr/bin/env bash
# The runtimes part of CI, for .ci/run to call after `npm ci` (which built dist/) and
# scripts/services.sh (the stores on loopback), on the Node that ran `npm ci`:
#
#   WORK=$WORK bash scripts/ci-runtimes.sh || status=$?
#
# Installs Node lines, Bun and Deno from the npm registry into $WORK (nothing global), then
#   - each Node line: `npm run test:runtime` (vitest.runtime.config.ts: the core executor and
#     integrations, the package's exports and dist, the CLI, the demo, the multi-process apps,
#     SQLite, PGlite, and pg's and ioredis's sockets) on the same node_modules;
#   - Bun and Deno: test/runtimes/smoke.mjs on the built package (executor, SQLite through
#     bun:sqlite / node:sqlite, PostgreSQL through pg, Redis through ioredis and node-redis), and
#     `shedlock demo` (the built bin forking 3 processes over one SQLite file).
# The whole suite runs on Node 20 in .ci/run itself.
#
# Appends `passed failed skipped` lines to $WORK/counts and one line per failed test to
# $WORK/failures (per test that passed only on its retry to $WORK/flaky), as .ci/run's own runs
# do, so its summary counts these too. Prints how long each install and run took. Exits 1 when
# anything failed or did not install, 0 otherwise; it always runs every step.
# Only some runtimes: `bash scripts/ci-runtimes.sh node26 bun` (any nodeNN, bun, deno; by default
# node22 node26 bun deno).
set -uo pipefail
cd "$(dirname "$0")/.."
export CI=true
if [ -z "${WORK:-}" ]; then
  WORK=$(mktemp -d /tmp/shedlock-runtimes.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
status=0
log() { printf '\n== %s\n' "$*"; }
note_failure() { # note_failure <label> <what>
  printf '%s: %s\n' "$1" "$2" >>"$WORK/failures"
  printf '0 1 0\n' >>"$WORK/counts"
  status=1
}
seconds_since() { echo $(($(date +%s) - $1)); }

# Installs an npm package that carries a runtime binary into $WORK/<label>; prints its bin folder.
install_runtime() { # install_runtime <label> <package> <binary>
  local label=$1 package=$2 binary=$3 started
  started=$(date +%s)
  if ! timeout --foreground --kill-after=30 600 npm install --prefix "$WORK/$label" --no-save --no-package-lock --no-audit --no-fund "$package" >"$WORK/$label-install.log" 2>&1; then
    tail -20 "$WORK/$label-install.log" >&2
    return 1
  fi
  [ -x "$WORK/$label/node_modules/.bin/$binary" ] || return 1
  printf '%s: installed %s in %ss\n' "$label" "$package" "$(seconds_since "$started")" >&2
  echo "$WORK/$label/node_modules/.bin"
}

# The test:runtime subset on the node in <bin>, with counts and failures for .ci/run's summary.
run_subset() { # run_subset <label> <bin>
  local label=$1 bin=$2 report="$WORK/vitest-$1.json" started rc=0
  started=$(date +%s)
  log "test:runtime (vitest.runtime.config.ts) on $label ($("$bin/node" --version))"
  # vitest directly, not `npm run test:runtime`: dist/ is built already (npm ci), and tsc's output
  # does not depend on the Node line, so rebuilding would cost 20 s a line for nothing. Its
  # watchdog names a hung file (test/helpers/watchdog.ts); timeout stops a line that hangs anyway
  # (--foreground: it stays in .ci/run's stage's process group, which that stage's timeout stops).
  PATH="$bin:$PATH" timeout --foreground --kill-after=30 600 "$bin/node" node_modules/vitest/vitest.mjs run --config vitest.runtime.config.ts \
    --reporter=dot --reporter=json --outputFile.json="$report" || rc=$?
  if [ -f "$report" ]; then
    node -e '
      const fs = require("fs")
      const [report, label, counts, failures, flaky] = process.argv.slice(1)
      const r = JSON.parse(fs.readFileSync(report, "utf8"))
      const skipped = r.numPendingTests + r.numTodoTests
      fs.appendFileSync(counts, `${r.numPassedTests} ${r.numFailedTests} ${skipped}\n`)
      console.log(`${label}: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${skipped} skipped`)
      const first = (text) => (text ?? "").split("\n")[0].slice(0, 300)
      for (const file of r.testResults) {
        const where = `${label}: ${file.name.replace(process.cwd() + "/", "")}`
        const failed = file.assertionResults.filter((a) => a.status === "failed")
        for (const t of failed) fs.appendFileSync(failures, `${where} > ${t.fullName}: ${first(t.failureMessages[0])}\n`)
        for (const t of file.assertionResults.filter((a) => a.status === "passed" && a.failureMessages.length > 0)) {
          fs.appendFileSync(flaky, `${where} > ${t.fullName}: ${first(t.failureMessages[0])}\n`)
        }
        if (file.status === "failed" && failed.length === 0) fs.appendFileSync(failures, `${where}: ${first(file.message)}\n`)
      }
    ' "$report" "$label" "$WORK/counts" "$WORK/failures" "$WORK/flaky"
  else
    note_failure "$label" "vitest wrote no report (exit $rc$([ "$rc" -eq 124 ] && echo ': stopped after 600 s'))"
  fi
  [ "$rc" -eq 0 ] || status=1
  printf '%s: test:runtime took %ss\n' "$label" "$(seconds_since "$started")"
}

# test/runtimes/smoke.mjs on Bun or Deno (one count per check), then the demo (one count).
run_smoke() { # run_smoke <label> <binary> [arguments before the script...]
  local label=$1 started out="$WORK/smoke-$1.log" rc=0
  shift
  started=$(date +%s)
  log "smoke test of the built package on $label ($("$1" --version 2>/dev/null | head -1))"
  timeout 300 "$@" test/runtimes/smoke.mjs >"$out" 2>&1 || rc=$?
  cat "$out"
  local passed
  passed=$(grep -c '^ok ' "$out")
  printf '%s 0 0\n' "$passed" >>"$WORK/counts"
  if [ "$rc" -ne 0 ]; then
    note_failure "$label" "$(grep -m1 '^FAIL' "$out" || tail -1 "$out") (exit $rc)"
  fi
  # The CLI's demo on this runtime: 3 processes forked by the built bin, exit 0 only when no tick ran twice.
  local demo="$WORK/demo-$label.log"
  rc=0
  timeout 120 "$@" dist/cli/main.js demo --seconds 4 >"$demo" 2>&1 || rc=$?
  head -1 "$demo"
  tail -1 "$demo"
  if [ "$rc" -eq 0 ]; then printf '1 0 0\n' >>"$WORK/counts"; else note_failure "$label" "shedlock demo exited $rc: $(tail -1 "$demo")"; fi
  printf '%s: smoke test and demo took %ss\n' "$label" "$(seconds_since "$started")"
}

wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(node22 node26 bun deno)
[ -f dist/index.js ] || npm run build

for target in "${wanted[@]}"; do
  case $target in
    node[0-9][0-9])
      log "installing Node ${target#node} from the npm registry"
      if bin=$(install_runtime "$target" "node@${target#node}" node); then
        run_subset "$target" "$bin"
      else
        note_failure "$target" "node@${target#node} did not install"
      fi
      ;;
    bun)
      log "installing Bun from the npm registry"
      if bin=$(install_runtime bun bun bun); then run_smoke bun "$bin/bun"; else note_failure bun "bun did not install"; fi
      ;;
    deno)
      log "installing Deno from the npm registry"
      # -A: the smoke test reads environment variables, opens sockets, and writes a temporary SQLite file.
      if bin=$(install_runtime deno deno deno); then run_smoke deno "$bin/deno" run -A; else note_failure deno "deno did not install"; fi
      ;;
    *)
      echo "ci-runtimes: unknown target $target (nodeNN, bun, deno)" >&2
      exit 2
      ;;
  esac
done
exit $status
