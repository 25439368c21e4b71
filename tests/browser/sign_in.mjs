#!/usr/bin/env node
// The reader page on a library with readers: what it says before a token is given, after a
// wrong one, and that a reader's own token (typed in the token form) opens the library.
//
// Reads one JSON job on stdin: {"origin": "http://127.0.0.1:PORT", "token": "...", "wrong": "..."}
// and writes one JSON object on stdout:
//   {"first": {"status", "form_hidden", "placeholder"}, "wrong": {"status"},
//    "signed_in": {"status", "books"}, "page_errors": [...]}
// Environment: CHROMIUM_PATH (default /usr/bin/chromium).

import { chromium } from 'playwright-core'

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium'
const STEP_TIMEOUT = 30_000
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
    '--no-first-run', '--disable-background-networking', '--disable-extensions']

const readStdin = async () => {
    const chunks = []
    for await (const chunk of process.stdin) chunks.push(chunk)
    return Buffer.concat(chunks).toString('utf8')
}

async function submitToken(page, token) {
    await page.waitForSelector('#token-form:not([hidden])', { timeout: STEP_TIMEOUT })
    await page.fill('#token', token)
    await page.click('#token-form button[type=submit]')
}

async function main() {
    const job = JSON.parse(await readStdin())
    const origin = job.origin.replace(/\/$/, '')
    const browser = await chromium.launch({
        executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 60_000,
    })
    try {
        const context = await browser.newContext({ serviceWorkers: 'block' })
        await context.route('**/*', route =>
            route.request().url().startsWith(origin + '/') ? route.continue() : route.abort())
        const page = await context.newPage()
        const pageErrors = []
        page.on('pageerror', e => pageErrors.push(String(e)))
        await page.goto(origin + '/')
        const started = await page.evaluate(() => window.mindoryReader.ready)
        const first = {
            started,
            status: await page.textContent('#status'),
            form_hidden: await page.evaluate(() => document.querySelector('#token-form').hidden),
            placeholder: await page.getAttribute('#token', 'placeholder'),
        }

        await submitToken(page, job.wrong)
        await page.waitForFunction(() => /not accepted/.test(document.querySelector('#status').textContent),
            null, { timeout: STEP_TIMEOUT })
        const wrong = { status: await page.textContent('#status') }

        await submitToken(page, job.token)
        await page.waitForFunction(() => document.querySelectorAll('#books li').length > 0, null,
            { timeout: STEP_TIMEOUT })
        const signedIn = {
            status: await page.textContent('#status'),
            books: await page.evaluate(() => document.querySelectorAll('#books li').length),
        }
        process.stdout.write(JSON.stringify({ first, wrong, signed_in: signedIn, page_errors: pageErrors }))
    } finally {
        await browser.close()
    }
}

main().catch(e => {
    process.stderr.write(String(e && e.stack || e) + '\n')
    process.exit(1)
})
