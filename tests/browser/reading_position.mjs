#!/usr/bin/env node
// Reading positions and deep links of mindory's reader page (GET /) in headless Chromium.
//
// Reads one JSON job on stdin:
//   {"origin": "http://127.0.0.1:PORT",
//    "cover": {"book": ID},                         // an EPUB whose first section is a cover image
//    "restore": {"book": ID, "section": N, "wheel": PIXELS},  // TOC click, then the wheel
//    "conflict": {"book": ID, "place": {"section": N, "offset": M}, "device": "...",
//                 "modified": "ISO time newer than the page's", "later_place": {"section", "offset"}},
//    "links": ["book=ID&section=N&offset=M", "book=ID&cfi=epubcfi(...)", ...],
//    "bad_link": "book=ID&section=N&offset=OUTSIDE" | null}
// and writes one JSON object on stdout:
//   {"cover": snapshot, "restore": {"opened", "saved", "reloaded", "same_device", "other_device",
//    "leaving", "returned": snapshots}, "conflict": {"before", "other", "adopted", "after"},
//    "links": [snapshot + {link, painted}], "links_moved": snapshot, "bad_link": snapshot,
//    "page_errors": [...],
//    "expected_errors": [...], "versions": {...}, "timings_ms": {...}}
//
// Everything a reader does is real: clicks on the book list and the table of contents,
// mouse-wheel scrolling over the chapter (the pane, or the EPUB's iframe), reloading the
// page, opening a URL with a fragment, changing the fragment. What the page keeps is read
// back through window.mindoryReader. Every request that does not go to `origin` is aborted.
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

/** Wait until the page has a book and section open and nothing is loading. */
async function settledOn(page, book) {
    await page.waitForFunction(id => {
        const s = window.mindoryReader.state
        return s.book?.id === id && s.section && s.view && document.body.dataset.status === 'ready'
    }, book, { timeout: STEP_TIMEOUT })
}

/** Click a book in the list (a real click) and wait until it is open. */
async function clickBook(page, book) {
    await page.click(`#books button[data-book=${css(book)}]`)
    await settledOn(page, book)
}

/** Where the page is: what it keeps and what is on screen. */
const snapshot = page => page.evaluate(() => {
    const r = window.mindoryReader
    const s = r.state
    return {
        book: s.book?.id ?? null,
        section: s.section?.ordinal ?? null,
        place: s.place,
        savedPlace: s.savedPlace,
        visible: r.visibleRange(),
        current: r.currentPlace(),
        position: s.position,
        hash: location.hash,
        fragment: (() => { try { return r.parseFragment() } catch (e) { return { error: String(e) } } })(),
        log: s.positionLog,
        device: r.deviceId(),
        status: document.querySelector('#status').textContent,
        positionStatus: document.querySelector('#position-status').textContent,
        highlight: r.highlightInfo(),
        view: s.view?.kind ?? null,
        textLength: s.view ? r.viewText().length : null,
        probe: probe(),
    }
    // What the browser itself says is on screen, independently of the page's own bisection:
    // the caret at a point near the top and at a quarter of the scroller's height, as a
    // section-local UTF-16 offset (book coordinates: + the section's utf16_start).
    function probe() {
        const v = s.view
        if (!v) return null
        const box = v.kind === 'epub'
            ? { left: 0, top: 0, width: v.win.innerWidth, height: v.win.innerHeight }
            : document.querySelector('#pane').getBoundingClientRect()
        const at = y => {
            const c = v.doc.caretRangeFromPoint(box.left + box.width * 0.3, y)
            if (!c || !v.root.contains(c.startContainer)) return null
            const rr = v.doc.createRange()
            rr.setStart(v.root, 0)
            rr.setEnd(c.startContainer, c.startOffset)
            return s.section.utf16_start + rr.toString().length
        }
        return { top: at(box.top + 3), quarter: at(box.top + box.height * 0.25) }
    }
})

/** Wait until the reader stopped moving and the page has sent what it had to send. */
async function quiet(page) {
    await page.waitForFunction(() => {
        const s = window.mindoryReader.state
        return s.moveTimer === null && document.body.dataset.status === 'ready'
    }, null, { timeout: STEP_TIMEOUT })
    await page.evaluate(() => window.mindoryReader.state.saving)
}

/** Wait for the next PUT of the position after `n` log entries (its answer included). */
async function nextWrite(page, n, kind = null) {
    await page.waitForFunction(([k, want]) => {
        const s = window.mindoryReader.state
        return s.positionLog.slice(k).some(e => (want ? e.kind === want : e.kind === 'put' || e.kind === 'conflict')) &&
            s.moveTimer === null && document.body.dataset.status === 'ready'
    }, [n, kind], { timeout: STEP_TIMEOUT })
    await page.evaluate(() => window.mindoryReader.state.saving)
    await quiet(page)
}

const logLength = page => page.evaluate(() => window.mindoryReader.state.positionLog.length)

/** Scroll with the mouse wheel over the chapter (over the iframe for EPUB). */
async function wheel(page, dy) {
    const box = await page.locator('#pane').boundingBox()
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2)
    for (let left = dy; Math.abs(left) > 0;) {
        const step = Math.sign(left) * Math.min(Math.abs(left), 400)
        await page.mouse.wheel(0, step)
        left -= step
        await sleep(30)
    }
}

/** Wait until the place on screen stops changing (smooth scrolling), at most ~0.6 s. */
async function stillScrolling(page) {
    let last = null
    for (let i = 0; i < 8; i++) {
        await sleep(80)
        const now = await page.evaluate(() => JSON.stringify(window.mindoryReader.currentPlace()))
        if (now === last) return
        last = now
    }
}

/** Wait for the SAVE_DELAY_MS debounce (and a bit): no write must follow a restore. */
const waitDebounce = async page => {
    const ms = await page.evaluate(() => window.mindoryReader.SAVE_DELAY_MS)
    await sleep(ms + 600)
    await quiet(page)
}

async function newPage(context, errors, expected) {
    const page = await context.newPage()
    page.on('pageerror', e => errors.push(String(e)))
    page.on('console', msg => {
        if (msg.type() === 'error') {
            const text = msg.text()
            // The 409 the conflict step provokes on purpose is logged by the browser.
            if (/status of 409 \(Conflict\)/.test(text)) expected.push(text)
            else errors.push('console: ' + text)
        }
        if (DEBUG) process.stderr.write(`[page ${msg.type()}] ${msg.text()}\n`)
    })
    return page
}

async function newContext(browser, origin) {
    const context = await browser.newContext({
        serviceWorkers: 'block', viewport: { width: 1280, height: 760 }, deviceScaleFactor: 1,
    })
    await context.route('**/*', route =>
        route.request().url().startsWith(origin + '/') ? route.continue() : route.abort())
    return context
}

async function waitLink(page, raw) {
    await page.waitForFunction(r => {
        const s = window.mindoryReader.state
        return s.highlight && s.highlight.hit.link === r && document.body.dataset.status === 'ready'
    }, raw, { timeout: STEP_TIMEOUT })
}

const main = async () => {
    const tStart = Date.now()
    const job = JSON.parse(await readStdin())
    if (!job || typeof job.origin !== 'string') throw new Error('job must be {"origin": ..., ...}')
    const origin = job.origin.replace(/\/$/, '')
    const errors = []
    const expected = []
    const out = { cover: null, restore: null, conflict: null, links: [], bad_link: null }
    let browser
    try {
        browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 60_000 })
        const contextA = await newContext(browser, origin)
        const page = await newPage(contextA, errors, expected)
        await page.goto(origin + '/')
        await started(page)

        // 1. A book whose first section is a cover image opens on its first text.
        if (job.cover) {
            await clickBook(page, job.cover.book)
            await waitDebounce(page)
            out.cover = await snapshot(page)
        }

        // 2. Read somewhere, let the page save, come back: reload, a new tab, another device.
        if (job.restore) {
            const { book, section, wheel: dy } = job.restore
            await clickBook(page, book)
            const opened = await snapshot(page)
            await waitDebounce(page)
            const n0 = await logLength(page)
            await page.click(`#toc button[data-section=${css(section)}]`)
            await page.waitForFunction(n => window.mindoryReader.state.section?.ordinal === n &&
                document.body.dataset.status === 'ready', section, { timeout: STEP_TIMEOUT })
            await wheel(page, dy)
            await nextWrite(page, n0)
            const saved = await snapshot(page)

            await page.reload()
            await started(page)
            await settledOn(page, book)
            await waitDebounce(page)
            const reloaded = await snapshot(page)

            const tab = await newPage(contextA, errors, expected)
            await tab.goto(origin + '/')
            await started(tab)
            await clickBook(tab, book)
            await waitDebounce(tab)
            const sameDevice = await snapshot(tab)
            await tab.close()

            const contextB = await newContext(browser, origin)
            const other = await newPage(contextB, errors, expected)
            await other.goto(origin + '/')
            await started(other)
            await clickBook(other, book)
            await waitDebounce(other)
            const otherDevice = await snapshot(other)
            await contextB.close()

            // Leaving the page before the debounce fires: pagehide saves the place at once
            // (a keepalive PUT), and the next visit opens there.
            await wheel(page, 700)
            await stillScrolling(page) // the wheel's scrolling has ended; the 1 s debounce has not
            const leaving = await snapshot(page)
            await page.goto(origin + '/?again')
            await started(page)
            await clickBook(page, book)
            await waitDebounce(page)
            const returned = await snapshot(page)
            out.restore = {
                opened, saved, reloaded, same_device: sameDevice, other_device: otherDevice, leaving, returned,
            }
        }

        // 3. Another device kept a newer position meanwhile: the page's write is 409, the
        //    page adopts the newer position, and its next move is saved after it.
        if (job.conflict) {
            const { book, place, device, modified } = job.conflict
            const cpage = await newPage(contextA, errors, expected)
            await cpage.goto(origin + '/')
            await started(cpage)
            await clickBook(cpage, book)
            await waitDebounce(cpage)
            const before = await snapshot(cpage)
            const put = await contextA.request.put(`${origin}/books/${book}/position`,
                { data: { ...place, unit: 'codepoint', device, modified } })
            const other = { status: put.status(), body: await put.json() }
            const n0 = await logLength(cpage)
            await wheel(cpage, 500)
            await nextWrite(cpage, n0, 'conflict')
            const adopted = await snapshot(cpage)
            const n1 = await logLength(cpage)
            await wheel(cpage, 300)
            await nextWrite(cpage, n1)
            const after = await snapshot(cpage)
            // The reader goes on on the phone, then comes back to this tab: shown again,
            // the page takes the phone's newer position (no write, no conflict).
            const later = new Date(Date.parse(after.position.modified) + 60_000).toISOString()
            const put2 = await contextA.request.put(`${origin}/books/${book}/position`,
                { data: { ...job.conflict.later_place, unit: 'codepoint', device, modified: later } })
            const again = { status: put2.status(), body: await put2.json() }
            const n2 = await logLength(cpage)
            await cpage.evaluate(() => document.dispatchEvent(new Event('visibilitychange')))
            await cpage.waitForFunction(k => window.mindoryReader.state.positionLog.slice(k).some(e => e.kind === 'refresh') &&
                document.body.dataset.status === 'ready', n2, { timeout: STEP_TIMEOUT })
            await waitDebounce(cpage)
            const refreshed = await snapshot(cpage)
            await cpage.close()
            out.conflict = { before, other, adopted, after, again, refreshed }
        }

        // 4. Deep links: the first by loading the URL, the others by changing the fragment.
        if (job.links && job.links.length) {
            const lpage = await newPage(contextA, errors, expected)
            for (const [i, raw] of job.links.entries()) {
                if (i === 0) {
                    await lpage.goto(`${origin}/#${raw}`)
                    await started(lpage)
                } else {
                    await lpage.evaluate(h => { location.hash = h }, raw)
                }
                await waitLink(lpage, raw)
                const shown = await snapshot(lpage)
                shown.link = raw
                shown.painted = await lpage.evaluate(() => window.mindoryReader.highlightedText())
                out.links.push(shown)
            }
            // Reading on from the last link: the fragment follows the reader.
            const n0 = await logLength(lpage)
            await wheel(lpage, 600)
            await nextWrite(lpage, n0)
            out.links_moved = await snapshot(lpage)
            if (job.bad_link) {
                await lpage.evaluate(h => { location.hash = h }, job.bad_link)
                await lpage.waitForFunction(() => /deep link/.test(document.querySelector('#status').textContent) &&
                    document.body.dataset.status === 'ready', null, { timeout: STEP_TIMEOUT })
                out.bad_link = await snapshot(lpage)
            }
            await lpage.close()
        }

        const versions = {
            chromium: browser.version(),
            'playwright-core': JSON.parse(readFileSync(
                join(HERE, 'node_modules', 'playwright-core', 'package.json'), 'utf8')).version,
            node: process.version,
        }
        process.stdout.write(JSON.stringify({
            ...out, page_errors: errors, expected_errors: expected, versions,
            timings_ms: { total: Date.now() - tStart },
        }) + '\n')
    } finally {
        if (browser) await browser.close()
    }
}

main().catch(e => {
    process.stderr.write(`reading_position: ${e && e.stack ? e.stack : e}\n`)
    process.exit(1)
})
