#!/usr/bin/env node
// Resolve EPUB CFIs in headless Chromium with two real reader engines.
//
// Reads one JSON job on stdin:
//   {"epub": "/abs/book.epub",
//    "items": [{"href": "OEBPS/ch01.xhtml", "cfi": "epubcfi(...)", "cfi_epubjs": "epubcfi(...)"}]}
// and writes one JSON object on stdout:
//   {"results": [{"foliate": str|null, "epubjs": str|null,
//                 "foliate_error": str|null, "epubjs_error": str|null,
//                 "foliate_href": str|null, "epubjs_href": str|null,
//                 "foliate_parsed_as": "application/xhtml+xml"|"text/html"|...|null}],
//    "versions": {...}, "timings_ms": {...}}
//
// foliate-js: the content document named by `href` (or, when `href` is null, the one the
// CFI's spine step points at) is taken out of the ZIP with JSZip, decoded as its BOM/XML
// declaration says, parsed with DOMParser as its manifest media type (XHTML falls back to
// HTML on a parser error, as foliate's own loader does), and the CFI is resolved the way
// foliate's EPUB.resolveCFI does it: parse(), drop the spine step, toRange(doc, parts).
// `foliate_href` is the document the spine step points at (foliate's toElement on the OPF).
//
// epub.js: ePub(arrayBuffer), await book.opened, await book.getRange(cfi_epubjs).
// `epubjs_href` is the spine item epub.js picked for the CFI.
//
// Both engines run in one page; all items go through one page.evaluate. The EPUB, the
// page and the libraries are served by a throwaway HTTP server on 127.0.0.1; every other
// request is aborted.
//
// Environment: CHROMIUM_PATH (default /usr/bin/chromium), MINDORY_BROWSER_DEBUG=1 to echo
// the page's console on stderr.

import { createServer } from 'node:http'
import { readFile, stat } from 'node:fs/promises'
import { createReadStream, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'

const HERE = dirname(fileURLToPath(import.meta.url))
const NM = join(HERE, 'node_modules')
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium'
const DEBUG = process.env.MINDORY_BROWSER_DEBUG === '1'

const CHROMIUM_ARGS = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-dev-shm-usage',
    '--disable-default-apps',
    '--disable-extensions',
    '--no-default-browser-check',
    '--metrics-recording-only',
    '--password-store=basic',
]

const pkgVersion = name =>
    JSON.parse(readFileSync(join(NM, name, 'package.json'), 'utf8')).version

const readStdin = async () => {
    const chunks = []
    for await (const chunk of process.stdin) chunks.push(chunk)
    return Buffer.concat(chunks).toString('utf8')
}

const PAGE = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>mindory CFI harness</title>
<script src="/lib/jszip.min.js"></script>
<script src="/lib/epub.min.js"></script>
</head><body></body></html>`

// Everything below runs inside the page.
async function resolveInPage({ items }) {
    const t0 = performance.now()
    const CFI = await import('/lib/foliate/epubcfi.js')
    const buf = await (await fetch('/book.epub')).arrayBuffer()
    const tFetched = performance.now()
    const errText = e => (e && (e.stack || e.message)) ? String(e.message || e) : String(e)

    // ---- foliate-js -------------------------------------------------------------
    const zip = await JSZip.loadAsync(buf)
    const parser = new DOMParser()
    const sniffEncoding = bytes => {
        if (bytes[0] === 0xEF && bytes[1] === 0xBB && bytes[2] === 0xBF) return 'utf-8'
        if (bytes[0] === 0xFE && bytes[1] === 0xFF) return 'utf-16be'
        if (bytes[0] === 0xFF && bytes[1] === 0xFE) return 'utf-16le'
        if (bytes[0] === 0x00 && bytes[1] === 0x3C) return 'utf-16be'
        if (bytes[0] === 0x3C && bytes[1] === 0x00) return 'utf-16le'
        const head = new TextDecoder('latin1').decode(bytes.subarray(0, 1024))
        const m = head.match(/^<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:-]+)["']/)
        return m ? m[1].toLowerCase() : 'utf-8'
    }
    const decode = bytes => {
        const enc = sniffEncoding(bytes)
        try {
            return new TextDecoder(enc).decode(bytes) // strips a matching BOM
        } catch {
            return new TextDecoder('utf-8').decode(bytes)
        }
    }
    const zipText = async path => {
        const entry = zip.file(path)
        if (!entry) throw new Error(`no ZIP entry ${JSON.stringify(path)}`)
        return decode(await entry.async('uint8array'))
    }
    const resolvePath = (base, href) => {
        // href relative to the directory of `base`, percent-decoded, as a ZIP path
        const url = new URL(href, 'epub:/' + base)
        return decodeURIComponent(url.pathname.replace(/^\/+/, ''))
    }

    let opf = null
    let opfPath = null
    let manifest = new Map() // id -> {href, mediaType}
    let mediaTypes = new Map() // zip path -> media type
    try {
        const container = parser.parseFromString(
            await zipText('META-INF/container.xml'), 'application/xml')
        opfPath = container.getElementsByTagNameNS('*', 'rootfile')[0].getAttribute('full-path')
        opf = parser.parseFromString(await zipText(opfPath), 'application/xml')
        for (const item of opf.getElementsByTagNameNS('*', 'item')) {
            const path = resolvePath(opfPath, item.getAttribute('href'))
            const mediaType = item.getAttribute('media-type')
            manifest.set(item.getAttribute('id'), { path, mediaType })
            mediaTypes.set(path, mediaType)
        }
    } catch (e) {
        console.warn('foliate: cannot read the package document: ' + errText(e))
    }

    // foliate's EPUB.resolveCFI, spine half: which document does the spine step name?
    const spineHref = top => {
        if (!opf) return null
        let itemref = CFI.toElement(opf, top)
        if (itemref && itemref.localName !== 'itemref') {
            top.at(-1).id = null
            itemref = CFI.toElement(opf, top)
        }
        const idref = itemref?.getAttribute?.('idref')
        return manifest.get(idref)?.path ?? null
    }

    const docs = new Map() // path -> Promise<Document>
    const loadDoc = path => {
        if (!docs.has(path)) docs.set(path, (async () => {
            const str = await zipText(path)
            let mediaType = mediaTypes.get(path) || 'application/xhtml+xml'
            if (!['application/xhtml+xml', 'text/html', 'image/svg+xml',
                'application/xml', 'text/xml'].includes(mediaType))
                mediaType = 'application/xhtml+xml'
            let doc = parser.parseFromString(str, mediaType)
            if (mediaType === 'application/xhtml+xml' && (doc.querySelector('parsererror')
                || !doc.documentElement?.namespaceURI)) {
                console.warn(`foliate: ${path} is not well-formed XHTML, parsed as HTML`)
                doc = parser.parseFromString(str, 'text/html')
            }
            return { doc, parsedAs: doc.contentType }
        })())
        return docs.get(path)
    }

    const foliate = async item => {
        const out = { foliate: null, foliate_error: null, foliate_href: null, foliate_parsed_as: null }
        if (!item.cfi) return out
        try {
            const parts = CFI.parse(item.cfi)
            const top = (parts.parent ?? parts).shift()
            out.foliate_href = spineHref(top.map(p => ({ ...p })))
            const path = item.href ?? out.foliate_href
            if (!path) throw new Error('no href and the spine step resolves to nothing')
            const { doc, parsedAs } = await loadDoc(path)
            out.foliate_parsed_as = parsedAs
            const range = CFI.toRange(doc, parts)
            out.foliate = range.toString()
        } catch (e) {
            out.foliate_error = errText(e)
        }
        return out
    }

    // ---- epub.js ----------------------------------------------------------------
    let book = null
    let bookError = null
    const tBook0 = performance.now()
    try {
        book = ePub(buf.slice(0))
        await book.opened
    } catch (e) {
        bookError = 'epub.js could not open the book: ' + errText(e)
    }
    const tBook1 = performance.now()

    const epubjs = async item => {
        const out = { epubjs: null, epubjs_error: null, epubjs_href: null }
        if (!item.cfi_epubjs) return out
        if (bookError) return { ...out, epubjs_error: bookError }
        try {
            const cfi = new ePub.CFI(item.cfi_epubjs)
            out.epubjs_href = book.spine.get(cfi.spinePos)?.href ?? null
            if (out.epubjs_href) out.epubjs_href = resolvePath(opfPath ?? '', out.epubjs_href)
            const range = await book.getRange(item.cfi_epubjs)
            if (!range) throw new Error('getRange returned no range')
            out.epubjs = range.toString()
        } catch (e) {
            out.epubjs_error = errText(e)
        }
        return out
    }

    const results = []
    const tItems0 = performance.now()
    for (const item of items) {
        results.push({ ...(await foliate(item)), ...(await epubjs(item)) })
    }
    const tItems1 = performance.now()
    return {
        results,
        timings_ms: {
            fetch_epub: Math.round(tFetched - t0),
            epubjs_open: Math.round(tBook1 - tBook0),
            items: Math.round(tItems1 - tItems0),
        },
    }
}

const main = async () => {
    const tStart = Date.now()
    const job = JSON.parse(await readStdin())
    if (!job || typeof job.epub !== 'string' || !Array.isArray(job.items))
        throw new Error('job must be {"epub": path, "items": [...]}')
    const epubSize = (await stat(job.epub)).size

    const files = {
        '/': { path: null, body: PAGE, type: 'text/html; charset=utf-8' },
        '/lib/jszip.min.js': { path: join(NM, 'jszip/dist/jszip.min.js'), type: 'text/javascript' },
        '/lib/epub.min.js': { path: join(NM, 'epubjs/dist/epub.min.js'), type: 'text/javascript' },
        '/lib/foliate/epubcfi.js': {
            path: join(NM, 'foliate-js/epubcfi.js'), type: 'text/javascript' },
        '/book.epub': { path: job.epub, type: 'application/epub+zip', stream: true },
        '/favicon.ico': { path: null, body: '', type: 'image/x-icon' },
    }
    const server = createServer(async (req, res) => {
        const f = files[new URL(req.url, 'http://x').pathname]
        if (!f) {
            res.writeHead(404).end()
            return
        }
        try {
            if (f.stream) {
                res.writeHead(200, { 'content-type': f.type, 'content-length': epubSize })
                createReadStream(f.path).pipe(res)
            } else {
                const body = f.path ? await readFile(f.path) : f.body
                res.writeHead(200, { 'content-type': f.type, 'cache-control': 'no-store' })
                res.end(body)
            }
        } catch (e) {
            res.writeHead(500).end(String(e))
        }
    })
    await new Promise(resolve => server.listen(0, '127.0.0.1', resolve))
    const origin = `http://127.0.0.1:${server.address().port}`

    let browser
    try {
        const tLaunch = Date.now()
        browser = await chromium.launch({
            executablePath: CHROMIUM,
            headless: true,
            args: CHROMIUM_ARGS,
            timeout: 60_000,
        })
        const launchMs = Date.now() - tLaunch
        const context = await browser.newContext({ serviceWorkers: 'block' })
        await context.route('**/*', route =>
            route.request().url().startsWith(origin + '/') ? route.continue() : route.abort())
        const page = await context.newPage()
        const pageErrors = []
        page.on('pageerror', e => pageErrors.push(String(e)))
        page.on('console', msg => {
            if (DEBUG) process.stderr.write(`[page ${msg.type()}] ${msg.text()}\n`)
        })
        await page.goto(origin + '/')
        const out = await page.evaluate(resolveInPage, { items: job.items })
        const result = {
            results: out.results,
            versions: {
                chromium: browser.version(),
                'playwright-core': pkgVersion('playwright-core'),
                epubjs: pkgVersion('epubjs'),
                'foliate-js': pkgVersion('foliate-js'),
                jszip: pkgVersion('jszip'),
                node: process.version,
            },
            timings_ms: { launch: launchMs, ...out.timings_ms, total: Date.now() - tStart },
        }
        if (pageErrors.length) result.page_errors = pageErrors
        process.stdout.write(JSON.stringify(result) + '\n')
    } finally {
        if (browser) await browser.close()
        server.close()
    }
}

main().catch(e => {
    process.stderr.write(`resolve_cfis: ${e && e.stack ? e.stack : e}\n`)
    process.exit(1)
})
