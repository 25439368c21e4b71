#!/usr/bin/env node
// Render single characters in headless Chromium and screenshot each one: the proof that
// Chinese and Japanese text is drawn with real glyphs, not tofu boxes (tests/server/
// test_cjk_fonts.py compares the pictures).
//
// Reads one JSON job on stdin:
//   {"cells": [{"id": "c0", "text": "永", "lang": "zh-Hans"}, ...], "out_dir": "/abs/dir",
//    "font_size": 64, "page_shot": "/abs/page.png" | null}
// and writes one JSON object on stdout:
//   {"cells": [{"id", "text", "lang", "png": "/abs/dir/c0.png", "width": px,
//               "fonts": [{"familyName", "glyphCount", "isCustomFont"}]}],
//    "page_shot": path | null, "versions": {"chromium"}}
// `fonts` is what Chromium really drew the cell with (DevTools CSS.getPlatformFontsForNode).
// The page is built with setContent: no network, no web fonts — only the system's fonts.
//
// Environment: CHROMIUM_PATH (default /usr/bin/chromium).

import { join } from 'node:path'
import { chromium } from 'playwright-core'

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium'

const CHROMIUM_ARGS = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-dev-shm-usage',
    '--disable-extensions',
    '--font-render-hinting=none',
]

const readStdin = async () => {
    const chunks = []
    for await (const chunk of process.stdin) chunks.push(chunk)
    return Buffer.concat(chunks).toString('utf8')
}

const escapeHtml = s => String(s).replace(/[&<>"]/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c])

async function main() {
    const job = JSON.parse(await readStdin())
    const size = job.font_size || 64
    const cells = job.cells.map(c =>
        `<span class="cell" id="${escapeHtml(c.id)}" lang="${escapeHtml(c.lang)}">${escapeHtml(c.text)}</span>`
    ).join('')
    const html = `<!doctype html><html lang="zh"><head><meta charset="utf-8"><style>
        html, body { margin: 0; background: #fff; color: #000; }
        body { padding: 8px; font-family: sans-serif; font-size: ${size}px; line-height: 1; }
        .cell { display: inline-block; width: ${Math.round(size * 1.25)}px; height: ${Math.round(size * 1.25)}px;
                text-align: center; line-height: ${Math.round(size * 1.25)}px; margin: 2px; }
        </style></head><body>${cells}</body></html>`
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
    try {
        const page = await browser.newPage({ viewport: { width: 1000, height: 400 }, deviceScaleFactor: 1 })
        await page.route('**/*', route => route.abort())
        await page.setContent(html, { waitUntil: 'load' })
        await page.evaluate(() => document.fonts.ready)
        const cdp = await page.context().newCDPSession(page)
        await cdp.send('DOM.enable')
        await cdp.send('CSS.enable')
        const { root } = await cdp.send('DOM.getDocument', { depth: -1 })
        const out = { cells: [], page_shot: null, versions: { chromium: browser.version() } }
        for (const c of job.cells) {
            const png = join(job.out_dir, `${c.id}.png`)
            const el = await page.$(`#${c.id}`)
            await el.screenshot({ path: png, type: 'png' })
            const box = await el.boundingBox()
            const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector: `#${c.id}` })
            const { fonts } = await cdp.send('CSS.getPlatformFontsForNode', { nodeId })
            out.cells.push({ ...c, png, width: box.width, fonts })
        }
        if (job.page_shot) {
            await page.screenshot({ path: job.page_shot, type: 'png' })
            out.page_shot = job.page_shot
        }
        process.stdout.write(JSON.stringify(out))
    } finally {
        await browser.close()
    }
}

main().catch(err => {
    process.stderr.write(`${err.stack || err}\n`)
    process.exit(1)
})
