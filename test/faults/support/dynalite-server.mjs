// dynalite (an in-process DynamoDB) as a server process of its own, so that the fault suite can
// kill and restart it like any other store. Usage: node dynalite-server.mjs <port> <data folder>
import { createRequire } from 'node:module'

const dynalite = createRequire(import.meta.url)('dynalite')
const [port, path] = process.argv.slice(2)
const server = dynalite({ path, createTableMs: 50, deleteTableMs: 50 })
server.listen(Number(port), '127.0.0.1')
