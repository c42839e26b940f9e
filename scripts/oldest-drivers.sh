#!/usr/bin/env bash
# Runs each store's tests on the OLDEST driver version shedlock states it supports
# (scripts/drivers.mjs), once: `npm test` runs them on the newest that package-lock.json pins.
# Installs over node_modules with `npm i --no-save` (package.json and package-lock.json stay as
# they are), and puts the locked versions back with `npm ci` at the end, except under CI=true,
# where .ci/run calls it last and the clone is thrown away. Needs the stores `npm test` needs.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\n== [%4ss] %s\n' "$SECONDS" "$*"; }

mapfile -t SPECS < <(node -e 'import("./scripts/drivers.mjs").then(({ DRIVERS }) => { for (const [name, d] of Object.entries(DRIVERS)) console.log(`${name}@${d.oldest}`) })')
mapfile -t TESTS < <(node -e 'import("./scripts/drivers.mjs").then(({ DRIVERS }) => { for (const t of new Set(Object.values(DRIVERS).flatMap((d) => d.tests))) console.log(t) })')

# A table that does not load leaves both lists empty, and npm i and vitest would then run on everything.
[ "${#SPECS[@]}" -gt 0 ] && [ "${#TESTS[@]}" -gt 0 ] || { echo "oldest-drivers: scripts/drivers.mjs gave no drivers or no tests" >&2; exit 1; }

restore() {
  if [ "${CI:-}" != true ]; then
    log "npm ci: back to the locked versions"
    npm ci --no-audit --no-fund >/dev/null
  fi
}
trap restore EXIT

log "installing the oldest supported drivers: ${SPECS[*]}"
# --legacy-peer-deps: devDependencies (typeorm 1) declare optional peers on the newest drivers.
timeout --foreground --kill-after=30 600 npm i --no-save --no-audit --no-fund --legacy-peer-deps "${SPECS[@]}" >/dev/null
node -e '
  const { createRequire } = require("node:module");
  const req = createRequire(process.cwd() + "/");
  const { readFileSync } = require("node:fs");
  for (const spec of process.argv.slice(1)) {
    const at = spec.lastIndexOf("@");
    const name = spec.slice(0, at), want = spec.slice(at + 1);
    // Not require(name/package.json): some packages do not export it.
    const got = JSON.parse(readFileSync(`node_modules/${name}/package.json`, "utf8")).version;
    if (got !== want) { console.error(`oldest-drivers: ${name} is ${got}, expected ${want}`); process.exit(1) }
  }
  console.log("installed:", process.argv.slice(1).join(" "));
' "${SPECS[@]}"

# The CLI tests run the built bin (dist/), which loads the drivers installed here.
[ -f dist/cli/main.js ] || npm run build >/dev/null
log "vitest on the oldest drivers: ${TESTS[*]}"
# Within 15 min (about 7 on 2 cores); vitest's watchdog names a hung file (test/helpers/watchdog.ts).
# --foreground: in the process group of .ci/run's stage, which its own timeout stops whole.
timeout --foreground --kill-after=30 900 npx vitest run "${TESTS[@]}" "$@"
log "oldest drivers: done"
