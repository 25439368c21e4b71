// Parse mindory's OPDS feeds with Thorium's OPDS parser (r2-opds-js), in plain node.
//
// Input (stdin, JSON): {"opds2": {name: feedJson}, "publications": {name: pubJson},
//   "auth": {name: authJson}, "opds1": {name: atomXml}, "entries": {name: entryXml}}.
// Output (stdout, JSON): {name: {ok: true, parsed: <r2's OPDS 2 model, serialized>} |
//   {ok: false, error: "..."}} — OPDS 1 feeds and entries converted to OPDS 2 the way
//   Thorium shows them (convertOpds1ToOpds2), plus {versions: {...}}.
//
// Run by tests/server/test_opds.py (cwd: tests/browser).

import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'

const require = createRequire(import.meta.url)
require('reflect-metadata')
const dist = 'dist/es8-es2017/src'
const { initGlobalConverters_OPDS } = require(`r2-opds-js/${dist}/opds/init-globals`)
const { initGlobalConverters_GENERIC } = require(`r2-shared-js/${dist}/init-globals`)
const { OPDSFeed } = require(`r2-opds-js/${dist}/opds/opds2/opds2`)
const { OPDSPublication } = require(`r2-opds-js/${dist}/opds/opds2/opds2-publication`)
const { OPDSAuthenticationDoc } = require(`r2-opds-js/${dist}/opds/opds2/opds2-authentication-doc`)
const { OPDS } = require(`r2-opds-js/${dist}/opds/opds1/opds`)
const { Entry } = require(`r2-opds-js/${dist}/opds/opds1/opds-entry`)
const {
    convertOpds1ToOpds2,
    convertOpds1ToOpds2_EntryToPublication,
} = require(`r2-opds-js/${dist}/opds/converter`)
const { TaJsonDeserialize, TaJsonSerialize } = require(`r2-lcp-js/${dist}/serializable`)
const { XML } = require(`r2-utils-js/${dist}/_utils/xml-js-mapper`)
const { DOMParser } = require('@xmldom/xmldom')

initGlobalConverters_GENERIC()
initGlobalConverters_OPDS()

function xmlDocument(text) {
    const errors = []
    const onError = (level, msg) => { if (level !== 'warning') errors.push(msg) }
    const doc = new DOMParser({ onError }).parseFromString(text, 'application/xml')
    if (errors.length) throw new Error(`XML: ${errors.join('; ')}`)
    return doc
}

const parsers = {
    opds2: json => TaJsonSerialize(TaJsonDeserialize(json, OPDSFeed)),
    publications: json => TaJsonSerialize(TaJsonDeserialize(json, OPDSPublication)),
    auth: json => TaJsonSerialize(TaJsonDeserialize(json, OPDSAuthenticationDoc)),
    opds1: xml => TaJsonSerialize(convertOpds1ToOpds2(XML.deserialize(xmlDocument(xml), OPDS))),
    entries: xml => TaJsonSerialize(
        convertOpds1ToOpds2_EntryToPublication(XML.deserialize(xmlDocument(xml), Entry))),
}

const job = JSON.parse(readFileSync(0, 'utf8'))
const out = {}
for (const [kind, parse] of Object.entries(parsers)) {
    for (const [name, input] of Object.entries(job[kind] || {})) {
        try {
            out[name] = { ok: true, parsed: parse(input) }
        } catch (err) {
            out[name] = { ok: false, error: String(err && err.stack || err) }
        }
    }
}
const version = pkg => JSON.parse(readFileSync(require.resolve(`${pkg}/package.json`), 'utf8')).version
out.versions = { 'r2-opds-js': version('r2-opds-js'), node: process.version }
process.stdout.write(JSON.stringify(out))
