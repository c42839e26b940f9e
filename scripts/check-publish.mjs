#!/usr/bin/env node
// prepublishOnly of both packages: refuses to publish a package.json without `repository`,
// `homepage` and `bugs`. They are left out while the repository's URL is not decided, and npm
// resolves the README's relative links against `repository`: without it they break on npm.
// Run from the package's folder (npm does so); exits 1 naming the missing fields.
import { readFileSync } from 'node:fs'

const json = JSON.parse(readFileSync('package.json', 'utf8'))
const missing = ['repository', 'homepage', 'bugs'].filter((field) => json[field] === undefined)
if (missing.length > 0) {
  process.stderr.write(
    `check-publish: ${json.name} has no ${missing.join(', ')} in package.json; set them (see CONTRIBUTING.md, Releasing) before publishing\n`,
  )
  process.exit(1)
}
