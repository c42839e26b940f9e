#!/usr/bin/env node
// Checks the links of every Markdown file of the repository (node_modules excepted), so that
// the README and docs/ work both on GitHub and from the npm package:
//
// - a relative link must name an existing file or folder;
// - an anchor (`#anchor`, `file.md#anchor`) must name a heading of that file, by GitHub's slug
//   rules (lower case, spaces to `-`, punctuation dropped except `-` and `_`, `-1`, `-2`... for
//   repeated headings), or an explicit `<a id="...">`;
// - no link is root-relative (`/docs/x.md`), which npm cannot resolve;
// - no link is absolute to a repository (github.com, gitlab.com...): this repository's URL is
//   not decided, so links into it stay relative. The few other projects linked on purpose are
//   listed in EXTERNAL_REPOSITORIES;
// - a Markdown file that an npm package ships (its `files`, plus README and LICENSE) links only
//   to files that the same package ships, never outside its folder: what is not in the tarball
//   is a broken link on npm.
//
// Exits 1 listing each broken link as `file:line: link: why`, 0 when every link works.
//
//   node scripts/check-docs.mjs                      check every link
//   node scripts/check-docs.mjs --snippets-only-list list every ```ts / ```typescript block
//                                                    with its file and line, check nothing
//
// A TypeScript block is type-checked as an ES module. Words after the language on the fence
// choose the module systems instead (GitHub and npm show only the language): ```ts commonjs
// compiles it in a CommonJS project, ```ts esm commonjs in both; the list shows them after the
// language (`--- README.md:70 ts esm commonjs (40 lines)`).
//   node scripts/check-docs.mjs --root DIR           check another tree (the tests use it)
//
// Plain Node, no dependencies.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, posix, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

/** Other projects' repositories that the docs may link to absolutely (lower case `owner/name`). */
const EXTERNAL_REPOSITORIES = new Set(['lukas-krecan/shedlock'])

/** Hosts whose URLs are repositories; a link to one needs its repository in EXTERNAL_REPOSITORIES. */
const REPOSITORY_HOSTS = new Set([
  'github.com',
  'www.github.com',
  'gitlab.com',
  'bitbucket.org',
  'codeberg.org',
  'raw.githubusercontent.com',
])

const SKIPPED_FOLDERS = new Set(['node_modules', '.git'])

function usage() {
  return 'Usage: node scripts/check-docs.mjs [--root DIR] [--snippets-only-list]\n'
}

function parseArguments(argv) {
  const options = { root: resolve(dirname(fileURLToPath(import.meta.url)), '..'), snippets: false }
  for (let i = 0; i < argv.length; i++) {
    const argument = argv[i]
    if (argument === '--snippets-only-list') options.snippets = true
    else if (argument === '--root' && argv[i + 1] !== undefined) options.root = resolve(argv[++i])
    else if (argument === '-h' || argument === '--help') {
      process.stdout.write(usage())
      process.exit(0)
    } else {
      process.stderr.write(`check-docs: unknown argument ${JSON.stringify(argument)}\n${usage()}`)
      process.exit(2)
    }
  }
  return options
}

/** Every Markdown file under `root`, as paths relative to it with `/`, sorted. */
function markdownFiles(root) {
  const found = []
  const walk = (folder) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      if (SKIPPED_FOLDERS.has(entry.name)) continue
      const path = join(folder, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.isFile() && /\.md$/i.test(entry.name)) found.push(toPosix(relative(root, path)))
    }
  }
  walk(root)
  return found.sort()
}

function toPosix(path) {
  return path.split(sep).join('/')
}

/**
 * Splits a Markdown text into its lines, marking those inside fenced code blocks, and collects
 * the fenced blocks themselves (info string, first line of code, code).
 */
function scanFences(text) {
  const lines = text.split(/\r?\n/)
  const inCode = new Array(lines.length).fill(false)
  const blocks = []
  let open
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]
    if (open) {
      inCode[i] = true
      const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(line)
      if (close && close[1][0] === open.fence[0] && close[1].length >= open.fence.length) {
        blocks.push({
          info: open.info,
          words: open.words,
          line: open.line + 1,
          code: lines.slice(open.line, i).join('\n'),
        })
        open = undefined
      }
      continue
    }
    const start = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)([^`]*)$/.exec(line)
    if (start) {
      inCode[i] = true
      open = {
        fence: start[1],
        info: start[2].toLowerCase(),
        words: start[3].trim().toLowerCase().split(/\s+/).filter(Boolean),
        line: i + 1,
      }
    }
  }
  return { lines, inCode, blocks, unclosed: open ? open.line : undefined }
}

/** The text of a heading as GitHub renders it: inline code, links, emphasis and HTML stripped. */
function headingText(raw) {
  return raw
    .replace(/\s+#+\s*$/, '') // closing hashes
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]*)\]\[[^\]]*\]/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/`+/g, '')
    .replace(/\*+/g, '')
    .replace(/(^|[^\p{L}\p{N}_])_+(?=\S)(.*?\S)_+(?=[^\p{L}\p{N}_]|$)/gu, '$1$2')
    .trim()
}

/** GitHub's anchor of a heading text: lower case, punctuation dropped (but `-` and `_`), spaces to `-`. */
function slug(text) {
  return headingText(text)
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-')
}

/** The anchors of a Markdown file: one per heading (with GitHub's `-1`, `-2` suffixes) and explicit ids. */
function anchorsOf(scan) {
  const anchors = new Set()
  const seen = new Map()
  const add = (text) => {
    const base = slug(text)
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    anchors.add(count === 0 ? base : `${base}-${count}`)
  }
  const { lines, inCode } = scan
  for (let i = 0; i < lines.length; i++) {
    if (inCode[i]) continue
    const line = lines[i]
    const atx = /^ {0,3}#{1,6}(?:\s+(.*?))?\s*$/.exec(line)
    if (atx) add(atx[1] ?? '')
    else if (i + 1 < lines.length && !inCode[i + 1] && /^ {0,3}(=+|-+)\s*$/.test(lines[i + 1]) && isSetextText(line))
      add(line.trim())
    for (const match of line.matchAll(/<a\s[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']/gi)) anchors.add(match[1])
  }
  return anchors
}

/** Whether a line can be the text of a setext heading (not blank, not a list item, table row or quote). */
function isSetextText(line) {
  return line.trim() !== '' && !/^\s*([-*+]\s|\d+[.)]\s|\||>)/.test(line) && !/^ {0,3}(=+|-+)\s*$/.test(line)
}

/** Removes inline code spans, so that links shown as code are not checked. */
function withoutCodeSpans(line) {
  return line.replace(/(`+)(?:(?!\1)[\s\S])*?\1/g, (span) => ' '.repeat(span.length))
}

/** The link targets of one line of prose: inline links and images, reference definitions, autolinks, HTML href/src. */
function linksOf(line) {
  const text = withoutCodeSpans(line)
  const targets = []
  // [text](target "title") and ![alt](target); the text may hold one level of brackets.
  for (const match of text.matchAll(
    /!?\[(?:[^[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s)]*(?:\([^\s)]*\)[^\s)]*)*)(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)/g,
  )) {
    targets.push(match[1].replace(/^<|>$/g, ''))
  }
  const definition = /^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)/.exec(text)
  if (definition) targets.push(definition[1].replace(/^<|>$/g, ''))
  for (const match of text.matchAll(/<((?:https?|mailto):[^>\s]+)>/gi)) targets.push(match[1])
  for (const match of text.matchAll(/\b(?:href|src)\s*=\s*["']([^"']+)["']/gi)) targets.push(match[1])
  return targets
}

/** What npm puts in a package's tarball: its `files` (folders include their content), README, LICENSE, package.json. */
function shippedBy(packageJson) {
  const entries = (Array.isArray(packageJson.files) ? packageJson.files : []).map((entry) =>
    posix.normalize(String(entry).replace(/^\.\//, '')).replace(/\/$/, ''),
  )
  return (path) => {
    // path is relative to the package folder, with '/'
    if (path === 'package.json' || /^(readme|licen[cs]e)(\.[^/]*)?$/i.test(path)) return true
    if (!Array.isArray(packageJson.files)) return true // no `files`: npm ships everything not ignored
    return entries.some((entry) => path === entry || path.startsWith(`${entry}/`))
  }
}

/** The npm packages of the tree: the root and every folder under packages/ with a package.json. */
function packagesOf(root) {
  const packages = []
  const read = (folder) => {
    const file = join(root, folder, 'package.json')
    if (!existsSync(file)) return
    const json = JSON.parse(readFileSync(file, 'utf8'))
    packages.push({ folder, name: json.name ?? folder, isShipped: shippedBy(json), repository: repositoryOf(json) })
  }
  read('')
  const nested = join(root, 'packages')
  if (existsSync(nested)) {
    for (const entry of readdirSync(nested, { withFileTypes: true })) {
      if (entry.isDirectory()) read(`packages/${entry.name}`)
    }
  }
  // Deepest folder first, so that a file belongs to its innermost package.
  return packages.sort((a, b) => b.folder.length - a.folder.length)
}

/** `host/owner/name` of package.json's repository, lower case, if it names one. */
function repositoryOf(json) {
  const url = typeof json.repository === 'string' ? json.repository : json.repository?.url
  if (typeof url !== 'string') return undefined
  const match =
    /^(?:git\+)?(?:https?:\/\/|git:\/\/|ssh:\/\/git@|git@)?([^/:]+)[/:]([^/]+)\/([^/#?]+?)(?:\.git)?(?:[/#?].*)?$/i.exec(
      url,
    )
  return match ? `${match[1]}/${match[2]}/${match[3]}`.toLowerCase() : undefined
}

function packageOf(packages, file) {
  return packages.find((p) => p.folder === '' || file === p.folder || file.startsWith(`${p.folder}/`))
}

/** Why an absolute URL is not allowed, or undefined when it is. */
function absoluteProblem(target, packages) {
  let url
  try {
    url = new URL(target)
  } catch {
    return 'is not a valid URL'
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined
  const host = url.hostname.toLowerCase()
  const [owner = '', name = ''] = url.pathname.split('/').filter(Boolean)
  const repository = `${owner}/${name.replace(/\.git$/, '')}`.toLowerCase()
  for (const p of packages) {
    if (p.repository && `${host}/${repository}` === p.repository)
      return 'is an absolute link into this repository; use a relative link'
  }
  if (REPOSITORY_HOSTS.has(host) && !EXTERNAL_REPOSITORIES.has(repository)) {
    return `is an absolute link to a repository (${host}/${repository}); link this repository's files relatively, or add another project's repository to EXTERNAL_REPOSITORIES in scripts/check-docs.mjs`
  }
  return undefined
}

function check(root) {
  const files = markdownFiles(root)
  const packages = packagesOf(root)
  const scans = new Map()
  const scanOf = (file) => {
    if (!scans.has(file)) scans.set(file, scanFences(readFileSync(join(root, file), 'utf8')))
    return scans.get(file)
  }
  const problems = []
  let links = 0
  for (const file of files) {
    const scan = scanOf(file)
    if (scan.unclosed !== undefined) problems.push(`${file}:${scan.unclosed}: code block never closed`)
    const owner = packageOf(packages, file)
    const shipped = owner ? owner.isShipped(file.slice(owner.folder === '' ? 0 : owner.folder.length + 1)) : false
    scan.lines.forEach((line, index) => {
      if (scan.inCode[index]) return
      for (const target of linksOf(line)) {
        links++
        const problem = linkProblem(root, file, target, { scanOf, packages, owner: shipped ? owner : undefined })
        if (problem) problems.push(`${file}:${index + 1}: ${target}: ${problem}`)
      }
    })
  }
  return { files, links, problems, packages }
}

function linkProblem(root, file, target, { scanOf, packages, owner }) {
  if (target === '') return 'empty link'
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return absoluteProblem(target, packages)
  if (target.startsWith('//')) return 'is protocol-relative; use a relative path or a full URL'
  const hash = target.indexOf('#')
  const pathPart = hash === -1 ? target : target.slice(0, hash)
  const anchor = hash === -1 ? undefined : target.slice(hash + 1)
  const path = pathPart.replace(/\?.*$/, '')
  if (path.startsWith('/')) return 'is root-relative, which works on GitHub only; use a path relative to this file'
  let decoded
  try {
    decoded = decodeURIComponent(path)
  } catch {
    return 'is not a valid URL path'
  }
  const targetFile = decoded === '' ? file : posix.normalize(posix.join(posix.dirname(file), decoded))
  if (targetFile.startsWith('../')) return 'leaves the repository'
  const absolute = join(root, targetFile)
  if (!existsSync(absolute)) return `no such file: ${targetFile}`
  if (owner && decoded !== '') {
    const inside =
      owner.folder === ''
        ? targetFile
        : targetFile.startsWith(`${owner.folder}/`)
          ? targetFile.slice(owner.folder.length + 1)
          : undefined
    if (inside === undefined)
      return `leaves the npm package ${owner.name}, whose tarball holds ${file}: the link breaks on npm; name the other package's file in words, or link its npm page`
    if (!owner.isShipped(inside))
      return `${targetFile} is not shipped in the npm package ${owner.name} (its package.json "files"), but ${file} is: the link breaks on npm`
  }
  if (anchor === undefined || anchor === '') return anchor === '' ? 'empty anchor' : undefined
  if (statSync(absolute).isDirectory()) return 'an anchor on a folder'
  if (!/\.md$/i.test(targetFile)) return undefined // #L10 on source files: GitHub's, not checked
  let wanted
  try {
    wanted = decodeURIComponent(anchor)
  } catch {
    return 'is not a valid anchor'
  }
  const anchors = anchorsOf(scanOf(targetFile))
  if (anchors.has(wanted)) return undefined
  return `no heading with anchor #${wanted} in ${targetFile}`
}

/** The module systems a TypeScript block may name after its language; anything else is refused, so that a typo does not silently drop a check. */
const MODULE_WORDS = new Set(['esm', 'commonjs'])

function listSnippets(root) {
  let count = 0
  const problems = []
  for (const file of markdownFiles(root)) {
    const scan = scanFences(readFileSync(join(root, file), 'utf8'))
    for (const block of scan.blocks) {
      if (block.info !== 'ts' && block.info !== 'typescript') continue
      count++
      const unknown = block.words.filter((word) => !MODULE_WORDS.has(word))
      if (unknown.length > 0)
        problems.push(
          `${file}:${block.line - 1}: unknown word ${JSON.stringify(unknown[0])} after ${block.info}: only esm and commonjs`,
        )
      const lineCount = block.code === '' ? 0 : block.code.split('\n').length
      const words = block.words.length === 0 ? '' : ` ${block.words.join(' ')}`
      process.stdout.write(
        `--- ${file}:${block.line} ${block.info}${words} (${lineCount} lines)\n${block.code}${lineCount === 0 ? '' : '\n'}`,
      )
    }
  }
  process.stderr.write(`check-docs: ${count} TypeScript code blocks\n`)
  if (problems.length > 0) {
    for (const problem of problems) process.stderr.write(`  ${problem}\n`)
    process.exitCode = 1
  }
}

// `| head` closes the pipe early: that is no error.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw error
})

const options = parseArguments(process.argv.slice(2))
if (options.snippets) {
  listSnippets(options.root)
} else {
  const { files, links, problems } = check(options.root)
  if (problems.length > 0) {
    process.stderr.write(
      `check-docs: ${problems.length} broken link${problems.length === 1 ? '' : 's'} in ${files.length} Markdown files:\n`,
    )
    for (const problem of problems) process.stderr.write(`  ${problem}\n`)
    process.exitCode = 1
  } else {
    process.stdout.write(`check-docs: ${links} links in ${files.length} Markdown files, all fine\n`)
  }
}
