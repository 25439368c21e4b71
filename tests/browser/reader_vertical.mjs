#!/usr/bin/env node
// Where mindory's reader page (GET /) puts a place on screen — in any writing mode
// (horizontal, vertical-rl, vertical-lr) — measured geometrically in headless Chromium.
//
// Reads one JSON job on stdin:
//   {"origin": "http://127.0.0.1:PORT",
//    "token": null | "...",            // put in sessionStorage before the page runs
//    "headers": {} | null,             // extra HTTP headers on every request of the browser
//    "steps": [
//      {"kind": "link", "hash": "book=ID&section=N&offset=M&end=E",   // a deep link, loaded
//       "target": {"section": N, "start": M, "end": E | null}, "screenshot": "/abs.png" | null},
//      {"kind": "hit", "book": ID, "query": "text", "chunk": CHUNK_ID, "mode": "lexical",
//       "target": {...}, "screenshot": ...},   // a click on the book, the search box, the hit
//      {"kind": "open", "hash": "book=ID",      // the book alone: where its position says
//       "target": {"section": N, "start": M, "end": null}, "screenshot": ...}
//    ]}
// `target` is in book source coordinates, code points (EPUB: from the section's start).
// Every step runs in a new tab of one browser profile (one device id), waits until the page
// has saved what it saves (SAVE_DELAY_MS and its PUT), then measures and asks
// GET /books/{id}/position. Writes one JSON object on stdout:
//   {"steps": [{"kind", "measure": {...}, "position": {"status", "body"}, "log": [...],
//               "place", "savedPlace", "hash", "status", "screenshot"}],
//    "page_errors": [...], "versions": {...}, "timings_ms": {...}}
// `measure` (all in the coordinates of the view's own window; see measureTarget below):
//   {section, writingMode, box, scroll, startChar: {offset, text, rect, inside, caret},
//    rects, bounds (their union), rectsInside, fullyInside, painted: [{text, rectsInside}], visibleRange, currentPlace}
// Every request that does not go to `origin` is aborted.
//
// Environment: CHROMIUM_PATH (default /usr/bin/chromium), MINDORY_BROWSER_DEBUG=1 echoes
// the page's console on stderr.

import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium } from 'playwright-core'

const HERE = dirname(fileURLToPath(import.meta.url))
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium'
const DEBUG = process.env.MINDORY_BROWSER_DEBUG === '1'
const STEP_TIMEOUT = 30_000

const CHROMIUM_ARGS = [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--disable-dev-shm-usage', '--disable-default-apps', '--disable-extensions',
    '--no-default-browser-check', '--metrics-recording-only', '--password-store=basic',
]

const readStdin = async () => {
    const chunks = []
    for await (const chunk of process.stdin) chunks.push(chunk)
    return Buffer.concat(chunks).toString('utf8')
}

const css = s => JSON.stringify(String(s))
const sleep = ms => new Promise(r => setTimeout(r, ms))

async function started(page) {
    const ok = await page.evaluate(() => window.mindoryReader.ready)
    if (!ok) throw new Error('the reader page did not start: ' + await page.textContent('#status'))
    await page.waitForFunction(() => document.body.dataset.status === 'ready', null, { timeout: STEP_TIMEOUT })
}

async function settledOn(page, book) {
    await page.waitForFunction(id => {
        const s = window.mindoryReader.state
        return s.book?.id === id && s.section && s.view && document.body.dataset.status === 'ready'
    }, book, { timeout: STEP_TIMEOUT })
}

/** Let the page's save debounce fire (and its PUT answer), with nothing loading. */
async function saved(page) {
    const ms = await page.evaluate(() => window.mindoryReader.SAVE_DELAY_MS)
    await sleep(ms + 500)
    await page.waitForFunction(() => {
        const s = window.mindoryReader.state
        return s.moveTimer === null && document.body.dataset.status === 'ready'
    }, null, { timeout: STEP_TIMEOUT })
    await page.evaluate(() => window.mindoryReader.state.saving)
}

/**
 * The target's geometry, measured in the page: its client rects against the scroller's
 * visible box (the iframe's viewport for EPUB, the pane for plain text), the first
 * character of it that is laid out (whitespace between blocks is not), what the browser's
 * own hit test (caretRangeFromPoint) finds at that character's middle, and what the
 * reader's hit highlight paints.
 */
function measureTarget(target) {
    const r = window.mindoryReader
    const s = r.state
    const v = s.view
    const sec = s.section
    if (!v || !sec) return { error: 'no section open' }
    if (sec.ordinal !== target.section) return { error: `section ${sec.ordinal} is open, not ${target.section}`, section: sec.ordinal }
    const text = sec.source_text
    const u16 = cp => r.cpToUtf16(text, Math.max(0, cp - sec.source_start))
    const box = v.kind === 'epub'
        ? { left: 0, top: 0, right: v.win.innerWidth, bottom: v.win.innerHeight }
        : (() => { const b = document.querySelector('#pane').getBoundingClientRect(); return { left: b.left, top: b.top, right: b.right, bottom: b.bottom } })()
    const plain = q => ({ left: q.left, top: q.top, right: q.right, bottom: q.bottom, width: q.width, height: q.height })
    const nonEmpty = range => [...range.getClientRects()].filter(q => q.width > 0 || q.height > 0)
    const intersects = q => q.right > box.left && q.left < box.right && q.bottom > box.top && q.top < box.bottom
    const inside = q => q.left >= box.left - 1 && q.right <= box.right + 1 && q.top >= box.top - 1 && q.bottom <= box.bottom + 1
    const a = u16(target.start)
    // the first character at or after the start that has a box (not collapsed whitespace)
    let first = null
    for (let k = a; k < text.length && k < a + 400; k++) {
        const c = text.charCodeAt(k)
        if (c >= 0xdc00 && c <= 0xdfff) continue
        const w = c >= 0xd800 && c <= 0xdbff ? 2 : 1
        if (/\s/.test(text.slice(k, k + w))) continue
        const rects = nonEmpty(r.rangeFromUtf16(v.doc, v.root, k, k + w))
        if (!rects.length) continue
        const q = rects[0]
        const mid = { x: (q.left + q.right) / 2, y: (q.top + q.bottom) / 2 }
        let caret = null
        const cr = v.doc.caretRangeFromPoint(mid.x, mid.y)
        if (cr && v.root.contains(cr.startContainer)) {
            const rr = v.doc.createRange()
            rr.setStart(v.root, 0)
            rr.setEnd(cr.startContainer, cr.startOffset)
            caret = rr.toString().length
        }
        first = { offset: k, text: text.slice(k, k + w), rect: plain(q), inside: inside(q), caret }
        break
    }
    let rects = []
    if (target.end !== null && target.end !== undefined) {
        rects = nonEmpty(r.rangeFromUtf16(v.doc, v.root, a, u16(target.end)))
    }
    const painted = []
    const reg = v.win.CSS && v.win.CSS.highlights
    const hit = reg && reg.get('mindory-hit')
    if (hit) for (const range of hit) {
        const rs = nonEmpty(range)
        painted.push({ text: range.toString(), rects: rs.length, rectsInside: rs.filter(intersects).length })
    }
    const scroller = v.kind === 'epub' ? v.doc.scrollingElement : document.querySelector('#pane')
    return {
        section: sec.ordinal,
        kind: v.kind,
        writingMode: v.win.getComputedStyle(v.root).writingMode,
        box,
        scroll: { left: scroller.scrollLeft, top: scroller.scrollTop, width: scroller.scrollWidth, height: scroller.scrollHeight },
        startUtf16: a,
        startChar: first,
        rects: rects.length,
        bounds: rects.length ? {
            left: Math.min(...rects.map(q => q.left)), right: Math.max(...rects.map(q => q.right)),
            top: Math.min(...rects.map(q => q.top)), bottom: Math.max(...rects.map(q => q.bottom)),
        } : null,
        rectsInside: rects.filter(intersects).length,
        fullyInside: rects.length > 0 && rects.every(inside),
        painted,
        highlight: r.highlightInfo(),
        visibleRange: r.visibleRange(),
        currentPlace: r.currentPlace(),
    }
}

async function step(context, origin, spec, errors) {
    const page = await context.newPage()
    page.on('pageerror', e => errors.push(String(e)))
    page.on('console', msg => {
        if (msg.type() === 'error') errors.push('console: ' + msg.text())
        if (DEBUG) process.stderr.write(`[page ${msg.type()}] ${msg.text()}\n`)
    })
    let book
    if (spec.kind === 'link' || spec.kind === 'open') {
        book = decodeURIComponent(/(?:^|&)book=([^&]*)/.exec(spec.hash)[1])
        await page.goto(`${origin}/#${spec.hash}`)
        await started(page)
        if (spec.kind === 'link') {
            await page.waitForFunction(raw => {
                const s = window.mindoryReader.state
                return s.highlight && s.highlight.hit.link === raw && document.body.dataset.status === 'ready'
            }, spec.hash, { timeout: STEP_TIMEOUT })
        }
        await settledOn(page, await page.evaluate(() => window.mindoryReader.state.book?.id ?? null) || book)
    } else if (spec.kind === 'hit') {
        book = spec.book
        await page.goto(`${origin}/`)
        await started(page)
        await page.click(`#books button[data-book=${css(book)}]`)
        await settledOn(page, book)
        await saved(page)
        await page.selectOption('#search-mode', spec.mode || 'lexical')
        await page.fill('#search', spec.query)
        await page.press('#search', 'Enter')
        await page.waitForFunction(q => {
            const s = window.mindoryReader.state
            return s.search && s.search.query === q && s.hits.every(h => h.rank) &&
                document.body.dataset.status === 'ready'
        }, spec.query.trim(), { timeout: STEP_TIMEOUT })
        const hit = `#hits button[data-chunk=${css(spec.chunk)}]`
        await page.waitForSelector(hit, { timeout: STEP_TIMEOUT })
        await page.click(hit)
        await page.waitForFunction(id => {
            const info = window.mindoryReader.highlightInfo()
            return info && info.chunkId === id && document.body.dataset.status === 'ready'
        }, spec.chunk, { timeout: STEP_TIMEOUT })
    } else {
        throw new Error(`unknown step kind ${spec.kind}`)
    }
    await saved(page)
    const measure = await page.evaluate(measureTarget, spec.target)
    const state = await page.evaluate(() => {
        const s = window.mindoryReader.state
        return {
            book: s.book?.id ?? null, place: s.place, savedPlace: s.savedPlace, log: s.positionLog,
            hash: location.hash, status: document.querySelector('#status').textContent,
        }
    })
    const res = await context.request.get(`${origin}/books/${encodeURIComponent(state.book || book)}/position`)
    const position = { status: res.status(), body: res.status() === 200 ? await res.json() : await res.text() }
    let screenshot = null
    if (spec.screenshot) {
        await page.screenshot({ path: spec.screenshot, type: 'png' })
        screenshot = spec.screenshot
    }
    await page.close()
    return { kind: spec.kind, measure, position, ...state, screenshot }
}

const main = async () => {
    const tStart = Date.now()
    const job = JSON.parse(await readStdin())
    if (!job || typeof job.origin !== 'string') throw new Error('job must be {"origin": ..., ...}')
    const origin = job.origin.replace(/\/$/, '')
    const errors = []
    let browser
    try {
        browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 60_000 })
        const context = await browser.newContext({
            serviceWorkers: 'block', viewport: { width: 1280, height: 760 }, deviceScaleFactor: 1,
            extraHTTPHeaders: job.headers || {},
        })
        await context.route('**/*', route =>
            route.request().url().startsWith(origin + '/') ? route.continue() : route.abort())
        if (job.token) await context.addInitScript(t => sessionStorage.setItem('mindory_token', t), job.token)
        const steps = []
        for (const spec of job.steps || []) steps.push(await step(context, origin, spec, errors))
        const versions = {
            chromium: browser.version(),
            'playwright-core': JSON.parse(readFileSync(
                join(HERE, 'node_modules', 'playwright-core', 'package.json'), 'utf8')).version,
            node: process.version,
        }
        process.stdout.write(JSON.stringify({
            steps, page_errors: errors, versions, timings_ms: { total: Date.now() - tStart },
        }) + '\n')
    } finally {
        if (browser) await browser.close()
    }
}

main().catch(e => {
    process.stderr.write(`reader_vertical: ${e && e.stack ? e.stack : e}\n`)
    process.exit(1)
})
