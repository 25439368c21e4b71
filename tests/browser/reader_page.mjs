#!/usr/bin/env node
// Drive mindory's reader page (GET /) in headless Chromium like a person would.
//
// Reads one JSON job on stdin:
//   {"origin": "http://127.0.0.1:PORT",
//    "token": null | "...",                      // put in sessionStorage before the page runs
//    "clicks": [{"book": ID, "query": "text to type in the search box", "chunk": CHUNK_ID,
//                "mode": "hybrid"|"lexical"|"vector" (optional)}],
//    "selections": [{"book": ID, "section": N, "start": U16, "end": U16}],   // section-local
//    "drags": [{"book": ID, "section": N, "start": U16, "end": U16}],        // mouse drag, saved
//    "saves": [{"book": ID, "section": N, "start": U16, "end": U16, "note": "...", "color": "..."}],
//    "screenshot": {"path": "/abs/file.png", "book": ID, "query": "...", "chunk": CHUNK_ID} | null}
// and writes one JSON object on stdout:
//   {"clicks": [{"info": highlightInfo(), "hits": n, "hit": the clicked hit}],
//    "selections": [selectionToHighlight()], "drags": [{highlight, saved}],
//    "saves": [{highlight, saved}], "read_back": [{id, painted, listed}],
//    "screenshot": path|null, "page_errors": [...], "versions": {...}, "timings_ms": {...}}
//
// Clicks are real clicks: the book in the book list, the search box (typed, Enter: the
// page asks GET /search), the hit in the hit list; then the page's own state is read back
// through window.mindoryReader. Saving clicks "Highlight selection" (POST .../highlights);
// after a reload of the page every saved highlight is opened again and its painted text
// read back (the page lists them from GET .../highlights).
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

const readStdin = async () => {
    const chunks = []
    for await (const chunk of process.stdin) chunks.push(chunk)
    return Buffer.concat(chunks).toString('utf8')
}

const css = s => JSON.stringify(String(s))

async function waitIdle(page) {
    await page.waitForFunction(() => document.body.dataset.status === 'ready', null,
        { timeout: STEP_TIMEOUT })
}

async function openBook(page, book) {
    const open = await page.evaluate(id => window.mindoryReader.state.book?.id === id, book)
    if (open) return
    await page.click(`#books button[data-book=${css(book)}]`)
    await page.waitForFunction(id => {
        const s = window.mindoryReader.state
        return s.book?.id === id && s.section && document.body.dataset.status === 'ready'
    }, book, { timeout: STEP_TIMEOUT })
}

async function clickHit(page, { book, query, chunk, mode }) {
    await openBook(page, book)
    await page.selectOption('#search-mode', mode || 'hybrid')
    await page.fill('#search', query)
    await page.press('#search', 'Enter')
    // The list shows the section's chunks until the answer of GET /search replaces it.
    await page.waitForFunction(q => {
        const s = window.mindoryReader.state
        return s.search && s.search.query === q && s.hits.every(h => h.rank) &&
            document.body.dataset.status === 'ready'
    }, query.trim(), { timeout: STEP_TIMEOUT })
    const hit = `#hits button[data-chunk=${css(chunk)}]`
    await page.waitForSelector(hit, { timeout: STEP_TIMEOUT })
    const hits = await page.locator('#hits button').count()
    await page.click(hit)
    await page.waitForFunction(id => {
        const info = window.mindoryReader.highlightInfo()
        return info && info.chunkId === id && document.body.dataset.status === 'ready'
    }, chunk, { timeout: STEP_TIMEOUT })
    const info = await page.evaluate(() => window.mindoryReader.highlightInfo())
    const clicked = await page.evaluate(id => {
        const h = window.mindoryReader.state.hits.find(x => x.chunkId === id)
        return h ? { rank: h.rank, chunk: h.chunkId, section: h.section, locator: h.locator } : null
    }, chunk)
    return { info, hits, hit: clicked }
}

async function saveSelection(page, before) {
    await page.click('#save-highlight')
    await page.waitForFunction(prev => {
        const s = window.mindoryReader.state
        return s.lastSaved && s.lastSaved.annotation.id !== prev && document.body.dataset.status === 'ready'
    }, before, { timeout: STEP_TIMEOUT })
    return page.evaluate(() => window.mindoryReader.state.lastSaved.annotation)
}

const lastSavedId = page => page.evaluate(() => window.mindoryReader.state.lastSaved?.annotation.id ?? null)

async function save(page, { book, section, start, end, note, color }) {
    await openSection(page, book, section)
    await page.evaluate(([s, e]) => window.mindoryReader.selectUtf16(s, e), [start, end])
    const highlight = await page.evaluate(() => window.mindoryReader.selectionToHighlight())
    if (note) await page.fill('#highlight-note', note)
    if (color) await page.selectOption('#highlight-color', color)
    const saved = await saveSelection(page, await lastSavedId(page))
    return { highlight, saved }
}

/** Open a stored highlight from the list (a real click) and read what is painted. */
async function readBack(page, annotation) {
    await openBook(page, annotation.book)
    const item = `#highlights button[data-highlight=${css(annotation.id)}]`
    await page.waitForSelector(item, { timeout: STEP_TIMEOUT })
    await page.click(item)
    await page.waitForFunction(n => {
        const s = window.mindoryReader.state
        return s.section?.ordinal === n && s.highlight && document.body.dataset.status === 'ready'
    }, annotation.section, { timeout: STEP_TIMEOUT })
    return page.evaluate(id => ({
        id,
        painted: window.mindoryReader.savedText(),
        opened: window.mindoryReader.highlightedText(),
        listed: window.mindoryReader.state.saved.find(a => a.id === id) || null,
    }), annotation.id)
}

async function openSection(page, book, section) {
    await openBook(page, book)
    await page.evaluate(n => window.mindoryReader.openSection(n), section)
    await waitIdle(page)
}

async function selectRange(page, { book, section, start, end }) {
    await openSection(page, book, section)
    const selected = await page.evaluate(([s, e]) => window.mindoryReader.selectUtf16(s, e), [start, end])
    const highlight = await page.evaluate(() => window.mindoryReader.selectionToHighlight())
    return { selected, highlight }
}

async function drag(page, { book, section, start, end }) {
    await openSection(page, book, section)
    const kind = await page.evaluate(() => window.mindoryReader.state.view.kind)
    if (kind !== 'text') throw new Error('drag works on plain-text sections only')
    // Scroll the start near the top of the pane, then find both places on screen.
    await page.evaluate(([s]) => {
        const r = window.mindoryReader
        const v = r.state.view
        const a = r.rangeFromUtf16(v.doc, v.root, s, s + 1)
        const pane = document.querySelector('#pane')
        pane.scrollBy(0, a.getBoundingClientRect().top - pane.getBoundingClientRect().top - 40)
    }, [start])
    const p = await page.evaluate(([s, e]) => {
        const r = window.mindoryReader
        const v = r.state.view
        const ra = r.rangeFromUtf16(v.doc, v.root, s, s + 1).getClientRects()[0]
        const rb = r.rangeFromUtf16(v.doc, v.root, e - 1, e).getClientRects()[0]
        return { x0: ra.left + 1, y0: ra.top + ra.height / 2, x1: rb.right - 1, y1: rb.top + rb.height / 2 }
    }, [start, end])
    await page.mouse.move(p.x0, p.y0)
    await page.mouse.down()
    await page.mouse.move((p.x0 + p.x1) / 2, (p.y0 + p.y1) / 2, { steps: 5 })
    await page.mouse.move(p.x1, p.y1, { steps: 5 })
    await page.mouse.up()
    const highlight = await page.evaluate(() => window.mindoryReader.selectionToHighlight())
    let saved = null
    if (highlight) saved = await saveSelection(page, await lastSavedId(page))
    return { highlight, saved }
}

const main = async () => {
    const tStart = Date.now()
    const job = JSON.parse(await readStdin())
    if (!job || typeof job.origin !== 'string') throw new Error('job must be {"origin": ..., ...}')
    const origin = job.origin.replace(/\/$/, '')
    let browser
    try {
        const tLaunch = Date.now()
        browser = await chromium.launch({
            executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 60_000,
        })
        const launchMs = Date.now() - tLaunch
        const context = await browser.newContext({
            serviceWorkers: 'block', viewport: { width: 1280, height: 760 }, deviceScaleFactor: 1,
        })
        await context.route('**/*', route =>
            route.request().url().startsWith(origin + '/') ? route.continue() : route.abort())
        if (job.token) {
            await context.addInitScript(t => sessionStorage.setItem('mindory_token', t), job.token)
        }
        const page = await context.newPage()
        const pageErrors = []
        page.on('pageerror', e => pageErrors.push(String(e)))
        page.on('console', msg => {
            if (msg.type() === 'error') pageErrors.push('console: ' + msg.text())
            if (DEBUG) process.stderr.write(`[page ${msg.type()}] ${msg.text()}\n`)
        })
        await page.goto(origin + '/')
        const ok = await page.evaluate(() => window.mindoryReader.ready)
        if (!ok) throw new Error('the reader page did not start: ' +
            await page.textContent('#status'))
        await waitIdle(page)

        const out = { clicks: [], selections: [], drags: [], saves: [], read_back: [], screenshot: null }
        const t0 = Date.now()
        for (const step of job.clicks || []) out.clicks.push(await clickHit(page, step))
        const t1 = Date.now()
        for (const step of job.selections || []) out.selections.push(await selectRange(page, step))
        for (const step of job.drags || []) out.drags.push(await drag(page, step))
        for (const step of job.saves || []) out.saves.push(await save(page, step))
        const stored = [...out.drags, ...out.saves].map(x => x.saved).filter(Boolean)
        if (stored.length) {
            await page.reload()
            const again = await page.evaluate(() => window.mindoryReader.ready)
            if (!again) throw new Error('the reader page did not start again')
            await waitIdle(page)
            for (const a of stored) out.read_back.push(await readBack(page, a))
        }
        if (job.screenshot) {
            await clickHit(page, job.screenshot)
            await page.screenshot({ path: job.screenshot.path, type: 'png' })
            out.screenshot = job.screenshot.path
        }
        const versions = {
            chromium: browser.version(),
            'playwright-core': JSON.parse(readFileSync(
                join(HERE, 'node_modules', 'playwright-core', 'package.json'), 'utf8')).version,
            node: process.version,
        }
        process.stdout.write(JSON.stringify({
            ...out,
            page_errors: pageErrors,
            versions,
            timings_ms: {
                launch: launchMs, clicks: t1 - t0, per_click: Math.round((t1 - t0) / Math.max(1, out.clicks.length)),
                total: Date.now() - tStart,
            },
        }) + '\n')
    } finally {
        if (browser) await browser.close()
    }
}

main().catch(e => {
    process.stderr.write(`reader_page: ${e && e.stack ? e.stack : e}\n`)
    process.exit(1)
})
