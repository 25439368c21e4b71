// mindory reader page: plain ES module, no build step.
//
// Coordinates (docs/coordinates.md): a chunk's `utf16_start`/`utf16_end` are the
// places JavaScript counts — UTF-16 code units — in the book's source coordinates:
// file-global for plain text (a section starts at `utf16_start` of its section),
// section-local for EPUB (the section's source text is the text of every text node
// under <body> of its content document, in document order). So a span becomes a DOM
// Range by walking the section's text nodes and counting `node.data.length`.
//
// Rendering: an EPUB section is its XHTML resource in a sandboxed, same-origin
// iframe (served by GET /books/{id}/resources/{href}); a plain-text section is its
// source text in one <pre> text node (textContent keeps every character, CR included),
// so DOM offsets are source offsets. Highlights use the CSS Custom Highlight API,
// which paints ranges without touching the DOM, so offsets stay valid.
//
// Reading positions (docs/reading-state.md, "Reader page"): the place the page keeps is the
// first character on screen (after a link, a hit or a restore: exactly that place until the
// reader scrolls), as (section, book source offset in code points). When the
// reader stops moving for SAVE_DELAY_MS (and when the page is hidden) it is PUT to
// /books/{id}/position with this browser's device id and the client's time; opening a book
// without a place restores the newest position; the URL fragment names the book and the
// place (#book=ID&section=N&offset=M, or &cfi=epubcfi(...)) and a fragment given opens
// that place and highlights it.
//
// Everything a test needs is on `window.mindoryReader` (see the end of this file).

const HIT = 'mindory-hit'
const MATCH = 'mindory-match'
const SAVED = 'mindory-saved'
// Colours a highlight may have (the server's names); each is painted by its own registry entry.
const COLORS = { yellow: '#ffe17a', green: '#a5e3b0', blue: '#a9d3ff', pink: '#ffb8d2', purple: '#d6c0ff', orange: '#ffc98a' }
const QUOTE_CHARS = 32 // prefix / suffix of a saved highlight, in code points (as the server)
const SEARCH_K = 30 // hits asked of GET /search
const CHUNK_PAGE = 5000
const SAVE_DELAY_MS = 1000 // a position is saved this long after the reader stops moving
const PLACE_QUOTE_CHARS = 32 // code points painted at a point place (the server's quote)
const DEVICE_KEY = 'mindory_device'
// What a 401 tells the reader: the token is their own (readers: docs/reading-state.md).
const SIGN_IN_HELP = 'enter your own reader token above. `mindory users add NAME` prints it once, ' +
    'when the reader is made: ask whoever runs this server for yours. Catalogue apps (OPDS, ' +
    'KOReader) sign in with your user name and password instead (`mindory users passwd NAME` ' +
    'sets it). A server started with MINDORY_TOKEN also takes that token here.'

const $ = sel => document.querySelector(sel)

const state = {
    token: sessionStorage.getItem('mindory_token') || null,
    books: [],
    book: null, // GET /books/{id}
    section: null, // GET /books/{id}/sections/{n}
    view: null, // {kind: 'epub'|'text', doc, win, root}
    chunks: new Map(), // book id -> chunk list (all of the current derivation)
    hits: [],
    search: null, // the last GET /search answer
    highlight: null, // {hit, range}
    saved: [], // the open book's highlights (W3C annotations from GET /books/{id}/highlights)
    savedBook: null,
    lastSaved: null, // {selection, annotation} of the last saveSelection()
    pending: null, // the last text selection in the chapter (typing a note takes the focus)
    busy: 0,
    place: null, // {book, section, offset, utf16}: the first character on screen (book source coordinates)
    anchor: null, // {view, section, u16, scroll}: the place the page scrolled to itself (see anchorPlace)
    savedPlace: null, // the place the server keeps (saved, restored or adopted): no need to PUT it again
    position: null, // the last position answer of the server (PUT, GET or a 409's detail.current)
    positionLog: [], // what the page sent and got: {kind: 'put'|'restore'|'conflict'|'error', ...}
    clock: 0, // the newest `modified` (ms) seen or sent: a later write is never older
    link: null, // the deep link opened last (parsed fragment)
    moveTimer: null,
    saving: Promise.resolve(),
}

// ------------------------------------------------------------------ HTTP

class ApiError extends Error {
    constructor(status, message, detail) {
        super(message)
        this.status = status
        this.detail = detail
    }
}

async function request(path, options = {}) {
    const headers = new Headers(options.headers || {})
    if (state.token) headers.set('Authorization', 'Bearer ' + state.token)
    const res = await fetch(path, { ...options, headers })
    if (res.status === 401) {
        $('#token-form').hidden = false
        throw new ApiError(401, (state.token ? 'this token is not accepted: ' : 'this server needs your token: ') +
            SIGN_IN_HELP)
    }
    if (!res.ok) {
        let body = null
        try { body = await res.json() } catch { /* not JSON */ }
        throw new ApiError(res.status, (body && body.error) || `${res.status} ${res.statusText}`,
            body && body.detail)
    }
    return res
}

const getJSON = async path => (await request(path)).json()

const sendJSON = async (method, path, body, options = {}) => (await request(path, {
    ...options, method, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
})).json()

const bookPath = id => `/books/${encodeURIComponent(id)}`
const resourceURL = (id, href) =>
    `${bookPath(id)}/resources/${href.split('/').map(encodeURIComponent).join('/')}`

function setStatus(text, isError = false) {
    const el = $('#status')
    el.textContent = text
    el.classList.toggle('error', isError)
}

async function busy(fn) {
    state.busy++
    document.body.dataset.status = 'loading'
    try {
        return await fn()
    } catch (e) {
        setStatus(e.message || String(e), true)
        throw e
    } finally {
        if (--state.busy === 0) document.body.dataset.status = 'ready'
    }
}

// ------------------------------------------------------------------ text positions

/** Code points in `s` (a JS string of UTF-16 units). */
function codePoints(s) {
    let n = 0
    for (let i = 0; i < s.length; i++) {
        const c = s.charCodeAt(i)
        if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
            const d = s.charCodeAt(i + 1)
            if (d >= 0xdc00 && d <= 0xdfff) i++
        }
        n++
    }
    return n
}

/** UTF-16 offset of code point `cp` in `s`. */
function cpToUtf16(s, cp) {
    let i = 0
    for (let k = 0; k < cp && i < s.length; k++) {
        const c = s.charCodeAt(i)
        i += (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length &&
            (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) ? 2 : 1
    }
    return i
}

const isHigh = c => c >= 0xd800 && c <= 0xdbff
const isLow = c => c >= 0xdc00 && c <= 0xdfff

/** Text nodes (and CDATA sections) under `root`, in document order. */
function textNodes(doc, root) {
    const walker = doc.createTreeWalker(root, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_CDATA_SECTION)
    const out = []
    for (let n = walker.nextNode(); n; n = walker.nextNode()) out.push(n)
    return out
}

/** The text a view's DOM holds: must equal the section's source text. */
function viewText(view = state.view) {
    if (!view) return null
    return textNodes(view.doc, view.root).map(n => n.data).join('')
}

/** A DOM Range over [start, end) UTF-16 units of the text under `root`. */
function rangeFromUtf16(doc, root, start, end) {
    if (!(Number.isInteger(start) && Number.isInteger(end)) || start < 0 || end < start)
        throw new RangeError(`bad UTF-16 span [${start}, ${end})`)
    const nodes = textNodes(doc, root)
    const range = doc.createRange()
    let pos = 0
    let startSet = false
    let endSet = false
    for (const node of nodes) {
        const len = node.data.length
        if (!startSet && start < pos + len) {
            range.setStart(node, start - pos)
            startSet = true
        }
        if (startSet && !endSet && end <= pos + len) {
            range.setEnd(node, end - pos)
            endSet = true
            break
        }
        pos += len
    }
    if (!startSet || !endSet) {
        if (start === end && start === pos && nodes.length) { // the very end of the text
            const last = nodes[nodes.length - 1]
            range.setStart(last, last.data.length)
            range.setEnd(last, last.data.length)
            return range
        }
        throw new RangeError(`UTF-16 span [${start}, ${end}) is outside the text (${pos} units)`)
    }
    return range
}

/** UTF-16 offset of a DOM boundary point, counted over the text under `root`. */
function utf16Offset(doc, root, node, offset) {
    const r = doc.createRange()
    r.setStart(root, 0)
    r.setEnd(node, offset)
    return r.toString().length
}

// ------------------------------------------------------------------ painting

function registry(view) {
    const win = view.win
    return win.CSS && win.CSS.highlights ? win.CSS.highlights : null
}

function makeHighlight(view, ranges) {
    const Ctor = view.win.Highlight || window.Highlight
    return new Ctor(...ranges)
}

function paint(name, ranges, view = state.view) {
    if (!view) return
    const reg = registry(view)
    if (!reg) {
        // No Highlight API: fall back to the selection (still no DOM change).
        if (name === HIT && ranges.length) {
            const sel = view.doc.getSelection()
            sel.removeAllRanges()
            sel.addRange(ranges[0])
        }
        return
    }
    if (!ranges.length) reg.delete(name)
    else reg.set(name, makeHighlight(view, ranges))
}

function highlightStyle() {
    let css = `::highlight(${SAVED}){background-color:${COLORS.green};color:inherit}`
    for (const [name, colour] of Object.entries(COLORS))
        css += `::highlight(${SAVED}-${name}){background-color:${colour};color:inherit}`
    return css +
        `::highlight(${HIT}){background-color:#ffd54f;color:inherit}` +
        `::highlight(${MATCH}){background-color:#f5a623;color:inherit}`
}

function injectHighlightStyle(doc) {
    const style = doc.createElementNS('http://www.w3.org/1999/xhtml', 'style')
    style.textContent = highlightStyle()
    ;(doc.head || doc.documentElement).appendChild(style)
}

/**
 * Scroll a range into view along the block axis: horizontal text puts its top 30% down the
 * view; vertical text (columns, scrolled sideways: a negative scrollLeft in vertical-rl)
 * puts its first column 30% in from the block-start edge (the right in vertical-rl, the
 * left in vertical-lr) — less when that keeps a range that fits wholly on screen.
 */
function scrollToRange(range, view = state.view) {
    const rect = range.getBoundingClientRect()
    const axis = blockAxis(view)
    if (axis !== 'tb') {
        const box = scrollBox(view)
        const width = box.right - box.left
        const first = nonEmptyRects(range)[0] || rect
        const pad = Math.max(first.width / 2, Math.min(width * 0.3, (width - rect.width) / 2))
        const left = axis === 'rl' ? rect.right - (box.right - pad) : rect.left - (box.left + pad)
        scroller(view).scrollBy({ top: 0, left: Math.round(left), behavior: 'instant' })
        return
    }
    if (view.kind === 'epub') {
        view.win.scrollBy({ top: rect.top - view.win.innerHeight * 0.3, left: 0, behavior: 'instant' })
    } else {
        const pane = $('#pane')
        const top = pane.getBoundingClientRect().top
        pane.scrollBy({ top: rect.top - top - pane.clientHeight * 0.3, left: 0, behavior: 'instant' })
    }
}

/** Whether (part of) the range is inside the visible area of its scroller (both axes in vertical text). */
function isRangeVisible(range, view = state.view) {
    if (blockAxis(view) !== 'tb') {
        const box = scrollBox(view)
        return nonEmptyRects(range).some(r =>
            r.right > box.left && r.left < box.right && r.bottom > box.top && r.top < box.bottom)
    }
    const rect = range.getBoundingClientRect()
    if (view.kind === 'epub') return rect.bottom > 0 && rect.top < view.win.innerHeight
    const pane = $('#pane').getBoundingClientRect()
    return rect.bottom > pane.top && rect.top < pane.bottom
}

/** The element (or window) that scrolls the view's text. */
const scroller = view => view.kind === 'epub' ? view.win : $('#pane')

/** Where the view's scroller is scrolled to. */
function scrollOffsets(view) {
    if (view.kind === 'epub') return { x: view.win.scrollX, y: view.win.scrollY }
    const pane = $('#pane')
    return { x: pane.scrollLeft, y: pane.scrollTop }
}

// ------------------------------------------------------------------ books and sections

async function loadBooks() {
    state.books = await getJSON('/books')
    const ul = $('#books')
    ul.replaceChildren()
    for (const b of state.books) {
        const li = document.createElement('li')
        const btn = document.createElement('button')
        btn.type = 'button'
        btn.dataset.book = b.id
        btn.textContent = b.title
        const small = document.createElement('small')
        small.textContent = `${b.format} · ${b.section_count} sections · ${b.chunk_count} chunks`
        btn.append(small)
        btn.addEventListener('click', () => openBook(b.id).catch(() => {}))
        if (state.book && state.book.id === b.id) btn.classList.add('active')
        li.append(btn)
        ul.append(li)
    }
    if (!state.books.length) $('#empty').textContent = 'No books yet: import one above.'
}

/**
 * Open a book: at `section` if given (its start), at a deep `link` (a parsed fragment:
 * opened and highlighted), else where the reader's newest position is (`restore`), else
 * at its first text.
 */
async function openBook(id, { section = null, link = null, restore = true } = {}) {
    return busy(async () => {
        await flushPosition()
        const book = await getJSON(bookPath(id))
        state.book = book
        state.section = null
        state.place = null
        state.savedPlace = null
        state.position = null
        for (const btn of document.querySelectorAll('#books button'))
            btn.classList.toggle('active', btn.dataset.book === book.id)
        renderToc(book)
        $('#search').value = ''
        await loadHighlights(book.id)
        if (link && link.place) await openLinkPlace(book, link)
        else if (section !== null && section !== undefined) await openSection(section)
        else if (restore) await restorePosition(book)
        else await openSection(firstSection(book))
        return book
    })
}

/**
 * Where a book opens without a place: its first section with text — not a cover that is
 * only an image, not an empty page. `normalized_length` is the text a reader sees (0 for a
 * page holding only an <img> or whitespace); linear sections first, then any.
 */
function firstSection(book) {
    const hasText = s => s.normalized_length > 0 && s.block_count > 0
    const pick = book.sections.find(s => s.linear && hasText(s)) || book.sections.find(hasText) ||
        book.sections.find(s => s.linear) || book.sections[0]
    return (pick || { ordinal: 0 }).ordinal
}

function renderToc(book) {
    const build = nodes => {
        const ul = document.createElement('ul')
        ul.className = 'tree'
        for (const node of nodes) {
            const li = document.createElement('li')
            const btn = document.createElement('button')
            btn.type = 'button'
            btn.textContent = node.title || '(untitled)'
            if (node.section !== null && node.section !== undefined) {
                btn.dataset.section = node.section
                btn.addEventListener('click', () => jumpTo(node.section, node.source_offset).catch(() => {}))
            } else {
                btn.disabled = true
            }
            li.append(btn)
            if (node.children && node.children.length) li.append(build(node.children))
            ul.append(li)
        }
        return ul
    }
    const nodes = book.toc.length ? book.toc : book.sections.map(s => ({
        title: s.title || `Section ${s.ordinal}`, section: s.ordinal, source_offset: s.source_start, children: [],
    }))
    $('#toc').replaceChildren(...build(nodes).children)
}

async function openSection(n) {
    if (!state.book) throw new Error('no book open')
    if (state.section && state.section.ordinal === n && state.view) return state.section
    return busy(async () => {
        const book = state.book
        const section = await getJSON(`${bookPath(book.id)}/sections/${n}`)
        if (state.book !== book) return section // another book was opened meanwhile
        state.section = section
        state.highlight = null
        await render(book, section)
        const count = book.sections.length
        $('#where').textContent = `${book.title} — ${section.title || 'section ' + n} (${n + 1}/${count})`
        $('#prev').disabled = n <= 0
        $('#next').disabled = n >= count - 1
        paintSaved()
        if (!$('#search').value.trim()) await showSectionChunks()
        placeMoved()
        return section
    })
}

async function render(book, section) {
    $('#empty').hidden = true
    const pre = $('#text-view')
    const frame = $('#epub-view')
    if (book.format === 'epub' && section.href && section.parser !== 'none') {
        pre.hidden = true
        pre.textContent = ''
        frame.hidden = false
        const loaded = new Promise((resolve, reject) => {
            frame.onload = () => resolve()
            frame.onerror = () => reject(new Error(`cannot load ${section.href}`))
        })
        frame.src = resourceURL(book.id, section.href)
        await loaded
        const doc = frame.contentDocument
        if (!doc || !doc.body) throw new Error(`${section.href} has no body to show`)
        injectHighlightStyle(doc)
        state.view = { kind: 'epub', doc, win: frame.contentWindow, root: doc.body }
        frame.contentWindow.addEventListener('scroll', placeMoved, { passive: true })
    } else {
        frame.hidden = true
        frame.removeAttribute('src')
        pre.hidden = false
        pre.textContent = section.source_text // one text node: DOM offsets = source offsets
        $('#pane').scrollTop = 0
        state.view = { kind: 'text', doc: document, win: window, root: pre }
    }
    state.pending = null
    watchSelection(state.view.doc)
    const text = viewText()
    state.view.matchesSource = text === section.source_text
    if (!state.view.matchesSource)
        setStatus(`warning: the page's text differs from the stored source text of section ${section.ordinal}`, true)
    else setStatus(`${book.title}: section ${section.ordinal} (${text.length} UTF-16 units)`)
}

async function jumpTo(sectionNo, sourceOffset) {
    const section = await openSection(sectionNo)
    if (sourceOffset === null || sourceOffset === undefined) return
    const local = Math.max(0, sourceOffset - section.source_start)
    const u16 = cpToUtf16(section.source_text, local)
    const range = rangeFromUtf16(state.view.doc, state.view.root, u16, u16)
    state.anchor = null
    scrollToRange(range)
}

// ------------------------------------------------------------------ the place on screen

const nonEmptyRects = range => [...range.getClientRects()].filter(r => r.width > 0 || r.height > 0)

/** The scroller's visible box, in the coordinates of the view's own window. */
function scrollBox(view) {
    if (view.kind === 'epub') return { top: 0, left: 0, bottom: view.win.innerHeight, right: view.win.innerWidth }
    const r = $('#pane').getBoundingClientRect()
    return { top: r.top, left: r.left, bottom: r.bottom, right: r.right }
}

/** The block direction of the view's text: 'tb' (lines go down), 'rl' or 'lr' (vertical). */
function blockAxis(view) {
    const mode = view.win.getComputedStyle(view.root).writingMode || 'horizontal-tb'
    if (mode.startsWith('vertical-rl') || mode === 'sideways-rl') return 'rl'
    if (mode.startsWith('vertical-lr') || mode === 'sideways-lr') return 'lr'
    return 'tb'
}

/** Where a rect's middle is along the block axis: -1 before the box, 0 inside, 1 after. */
function side(rect, box, axis) {
    if (axis === 'tb') {
        const c = (rect.top + rect.bottom) / 2
        return c < box.top ? -1 : c > box.bottom ? 1 : 0
    }
    const c = (rect.left + rect.right) / 2
    if (axis === 'rl') return c > box.right ? -1 : c < box.left ? 1 : 0
    return c < box.left ? -1 : c > box.right ? 1 : 0
}

/** The view's text nodes that are laid out (have a box), with their UTF-16 start. */
function boxedNodes(view) {
    if (view.boxed) return view.boxed
    const out = []
    let pos = 0
    const r = view.doc.createRange()
    for (const node of textNodes(view.doc, view.root)) {
        if (node.data.length) {
            r.selectNodeContents(node)
            if (nonEmptyRects(r).length) out.push({ node, pos })
        }
        pos += node.data.length
    }
    view.boxed = out
    view.textLength = pos
    return out
}

/** The first box of the node's text from offset k on (null: nothing laid out after k). */
function rectFrom(doc, node, k) {
    const r = doc.createRange()
    const len = node.data.length
    r.setStart(node, k)
    r.setEnd(node, Math.min(len, k + 32))
    let rects = nonEmptyRects(r)
    if (!rects.length && k + 32 < len) {
        r.setEnd(node, len)
        rects = nonEmptyRects(r)
    }
    return rects.length ? rects[0] : null
}

const nodeRects = (doc, node) => {
    const r = doc.createRange()
    r.selectNodeContents(node)
    return nonEmptyRects(r)
}

/** Smallest i in [lo, hi) with pred(i), hi if none (pred must be monotone). */
function bisect(lo, hi, pred) {
    while (lo < hi) {
        const mid = (lo + hi) >> 1
        if (pred(mid)) hi = mid
        else lo = mid + 1
    }
    return lo
}

/**
 * The visible part of the section's text: [start, end) in section-local UTF-16 units —
 * the first character whose line is (at least half) on screen, and the end of the last.
 */
function visibleUtf16(view = state.view) {
    const nodes = boxedNodes(view)
    const total = view.textLength
    if (!nodes.length) return { start: 0, end: total }
    const box = scrollBox(view)
    const axis = blockAxis(view)
    const doc = view.doc
    const at = (rect, want) => rect !== null && side(rect, box, axis) >= want
    // start: the first node whose last box is not before the screen, then its first such character
    let start = total
    const i = bisect(0, nodes.length, j => {
        const rects = nodeRects(doc, nodes[j].node)
        return side(rects[rects.length - 1], box, axis) >= 0
    })
    if (i < nodes.length) {
        const { node, pos } = nodes[i]
        let k = bisect(0, node.data.length, m => { const rc = rectFrom(doc, node, m); return rc === null || at(rc, 0) })
        if (k > 0 && k < node.data.length && isLow(node.data.charCodeAt(k)) && isHigh(node.data.charCodeAt(k - 1))) k--
        start = pos + k
    }
    // end: the last node whose first box is not after the screen, up to its first character after it
    let end = nodes[0].pos
    const after = bisect(0, nodes.length, j => side(nodeRects(doc, nodes[j].node)[0], box, axis) > 0)
    if (after > 0) {
        const { node, pos } = nodes[after - 1]
        const k = bisect(0, node.data.length, m => { const rc = rectFrom(doc, node, m); return rc === null || at(rc, 1) })
        end = k === node.data.length && after === nodes.length ? total : pos + k
    }
    return { start, end: Math.max(start, end) }
}

/** A section-local UTF-16 offset as a place in book source coordinates. */
function placeAt(section, u16) {
    const local = codePoints(section.source_text.slice(0, u16))
    return { book: state.book.id, section: section.ordinal, offset: section.source_start + local, utf16: section.utf16_start + u16 }
}

/**
 * The place the reader is at: the first character on screen — or, right after the page itself
 * scrolled to a place (anchorPlace) and until the reader scrolls, exactly that place.
 */
function currentPlace() {
    if (!state.book || !state.section || !state.view) return null
    const anchored = anchoredUtf16()
    return placeAt(state.section, anchored ?? visibleUtf16().start)
}

/** What is on screen, in book source coordinates (code points and UTF-16). */
function visibleRange() {
    if (!state.book || !state.section || !state.view) return null
    const section = state.section
    const { start, end } = visibleUtf16()
    const a = placeAt(section, start)
    const b = placeAt(section, end)
    return { book: a.book, section: a.section, start: a.offset, end: b.offset, utf16Start: a.utf16, utf16End: b.utf16 }
}

const samePlace = (a, b) => Boolean(a && b && a.book === b.book && a.section === b.section && a.offset === b.offset)

/** Section-local UTF-16 offset of a book source offset (code points) in the open section. */
function localUtf16(section, offset) {
    return cpToUtf16(section.source_text, Math.max(0, offset - section.source_start))
}

/** Scroll so that section-local UTF-16 offset `u16` starts the first line on screen. */
function scrollPlaceToTop(u16, view = state.view) {
    const total = boxedNodes(view) && view.textLength
    let rect = null
    for (const end of [Math.min(total, u16 + 32), total]) {
        if (end <= u16) continue
        const rects = nonEmptyRects(rangeFromUtf16(view.doc, view.root, u16, end))
        if (rects.length) { rect = rects[0]; break }
    }
    if (!rect) {
        const to = Math.max(0, Math.min(total, u16)) // at the very end: the text before the place
        const rects = nonEmptyRects(rangeFromUtf16(view.doc, view.root, Math.max(0, to - 32), to))
        rect = rects.length ? rects[rects.length - 1] : null
    }
    if (!rect) return
    const box = scrollBox(view)
    const axis = blockAxis(view)
    // Vertical text: half a character more, for the ruby on the block-start side of the
    // column (and whole pixels: the column is never clipped by a rounded scroll offset).
    const pad = rect.width / 2
    const by = axis === 'tb' ? { top: rect.top - box.top, left: 0 }
        : axis === 'rl' ? { top: 0, left: Math.ceil(rect.right - box.right + pad) }
            : { top: 0, left: Math.floor(rect.left - box.left - pad) }
    scroller(view).scrollBy({ ...by, behavior: 'instant' })
}

/**
 * The page itself has just brought section-local UTF-16 offset `u16` on screen (a link, a
 * search hit, a highlight, a restored or adopted position): until the reader scrolls, that
 * is the place — exactly, not the first character of its line or column, nor the first
 * character on screen above a range shown 30% down the view. Nothing is anchored when the
 * place is not on screen (not laid out, or past where the scroller can go).
 */
function anchorPlace(u16, view = state.view) {
    state.anchor = null
    if (!view || !state.section) return
    const total = boxedNodes(view) && view.textLength
    if (!(u16 >= 0 && u16 < total)) return
    let rects = []
    try { rects = nonEmptyRects(rangeFromUtf16(view.doc, view.root, u16, Math.min(total, u16 + 32))) } catch { return }
    const box = scrollBox(view)
    const r = rects[0]
    if (!r || !(r.right > box.left && r.left < box.right && r.bottom > box.top && r.top < box.bottom)) return
    state.anchor = { view, section: state.section, u16, scroll: scrollOffsets(view) }
}

/** The anchored place's UTF-16 offset while the view has not moved since, else null. */
function anchoredUtf16() {
    const a = state.anchor
    if (!a) return null
    const now = state.view && scrollOffsets(state.view)
    if (a.view === state.view && a.section === state.section && now &&
        Math.abs(now.x - a.scroll.x) <= 1 && Math.abs(now.y - a.scroll.y) <= 1) return a.u16
    state.anchor = null // the reader moved on
    return null
}

/** Open `section` with `offset` (book source coordinates, code points) at the top. */
async function goToPlace(sectionNo, offset) {
    const section = await openSection(sectionNo)
    state.anchor = null
    if (offset !== null && offset !== undefined) {
        const u16 = localUtf16(section, offset)
        scrollPlaceToTop(u16)
        anchorPlace(u16)
    }
    state.place = currentPlace()
    return state.place
}

// ------------------------------------------------------------------ reading positions

/** This browser's device id (localStorage), sent with every position. */
function deviceId() {
    let id = null
    try { id = localStorage.getItem(DEVICE_KEY) } catch { /* storage off */ }
    if (!id) {
        const rnd = window.crypto && crypto.randomUUID ? crypto.randomUUID()
            : Array.from({ length: 4 }, () => Math.random().toString(16).slice(2, 10)).join('-')
        id = `web-${rnd}`
        try { localStorage.setItem(DEVICE_KEY, id) } catch { /* this page only */ }
    }
    return id
}

/** The client's time as ISO 8601 — never before a `modified` already seen (see the docs). */
function modifiedNow() {
    const t = Math.max(Date.now(), state.clock + 1)
    state.clock = t
    return new Date(t).toISOString()
}

function seen(position) {
    const t = position && Date.parse(position.modified)
    if (Number.isFinite(t) && t > state.clock) state.clock = t
}

function showPosition(text) {
    const el = $('#position-status')
    if (el) el.textContent = text
}

/** Something moved (a scroll, a new section): settle after SAVE_DELAY_MS. */
function placeMoved() {
    clearTimeout(state.moveTimer)
    state.moveTimer = setTimeout(() => { state.moveTimer = null; settle() }, SAVE_DELAY_MS)
}

/** The reader stopped: note the place, write the fragment, save it if it is new. */
function settle({ keepalive = false, force = false } = {}) {
    if (state.busy && !force) return placeMoved() // a section is loading: later
    const place = currentPlace()
    if (!place) return null
    if (!samePlace(place, state.place)) {
        state.place = place
        writeFragment(place)
    }
    if (samePlace(place, state.savedPlace)) return null
    return savePosition(place, { keepalive })
}

/** A pending move is saved now (page hidden, another book opened). */
function flushPosition({ keepalive = false } = {}) {
    if (state.moveTimer === null) return state.saving
    clearTimeout(state.moveTimer)
    state.moveTimer = null
    settle({ keepalive, force: true })
    return state.saving
}

/**
 * PUT /books/{id}/position: `{section, offset, unit: "codepoint", device, modified}`.
 * A 409 (a newer position is kept, from another device or clock) is adopted: the page
 * moves there and never writes over it.
 */
function savePosition(place, { keepalive = false } = {}) {
    state.savedPlace = place
    const body = {
        section: place.section, offset: place.offset, unit: 'codepoint',
        device: deviceId(), modified: modifiedNow(),
    }
    const run = async () => {
        try {
            const answer = await sendJSON('PUT', `${bookPath(place.book)}/position`, body, { keepalive })
            state.positionLog.push({ kind: 'put', body, status: 200, id: answer.id })
            seen(answer)
            if (state.book && state.book.id === place.book) state.position = answer
            showPosition(`position saved · §${place.section} · ${new Date(body.modified).toLocaleTimeString()}`)
        } catch (e) {
            if (e.status === 409 && e.detail && e.detail.current) {
                state.positionLog.push({ kind: 'conflict', body, status: 409, current: e.detail.current })
                await adoptPosition(place.book, e.detail.current)
            } else {
                state.positionLog.push({ kind: 'error', body, status: e.status ?? null, message: e.message })
                if (samePlace(state.savedPlace, place)) state.savedPlace = null
                showPosition(`position not saved: ${e.message}`)
            }
        }
    }
    state.saving = state.saving.then(run, run)
    return state.saving
}

/** The server keeps a newer position than ours: go there (if that book is open). */
async function adoptPosition(bookId, current) {
    seen(current)
    if (!state.book || state.book.id !== bookId) return
    state.position = current
    if (current.status !== 'anchored' || !current.locator) return
    const loc = current.locator
    await busy(() => goToPlace(loc.section, loc.source.start))
    state.savedPlace = state.place
    writeFragment(state.place)
    showPosition(`moved to the newer position from ${current.device} (${current.modified})`)
}

/**
 * The reader's newest position in the book, or null. Asked as
 * GET /books/{id}/position/history?limit=1 — the same position GET /books/{id}/position
 * answers, but an empty list instead of a 404 (which a browser logs as an error) when
 * there is none yet.
 */
async function fetchPosition(bookId) {
    const list = await getJSON(`${bookPath(bookId)}/position/history?limit=1`)
    return list.length ? list[0] : null
}

/**
 * The page is shown again: if another device kept a newer position in the open book
 * meanwhile (the reader went on on their phone), go there. A move of this page that is
 * still pending wins: it is newer.
 */
async function refreshPosition() {
    const book = state.book
    if (!book || state.moveTimer !== null || state.busy) return null
    let pos = null
    try { pos = await fetchPosition(book.id) } catch { return null }
    if (!pos || state.book !== book || state.moveTimer !== null) return null
    const mine = state.position
    if (mine && (pos.id === mine.id || Date.parse(pos.modified) <= Date.parse(mine.modified))) return null
    state.positionLog.push({ kind: 'refresh', id: pos.id, device: pos.device })
    await adoptPosition(book.id, pos)
    return pos
}

/** Open the book where the reader was (else at its first text); nothing is written. */
async function restorePosition(book) {
    let pos = null
    try {
        pos = await fetchPosition(book.id)
    } catch (e) {
        setStatus(`reading position not restored: ${e.message}`, true)
    }
    if (state.book !== book) return null
    state.position = pos
    seen(pos)
    state.positionLog.push({ kind: 'restore', id: pos ? pos.id : null })
    if (pos && pos.status === 'anchored' && pos.locator) {
        await goToPlace(pos.locator.section, pos.locator.source.start)
        showPosition(`position restored · from ${pos.device} · ${pos.modified}`)
    } else {
        await goToPlace(firstSection(book), null)
        showPosition(pos ? 'the kept position is orphaned (a new edition): opened at the first text' : '')
    }
    state.savedPlace = state.place
    if (state.place) writeFragment(state.place)
    return pos
}

// ------------------------------------------------------------------ deep links (URL fragment)

// Characters a fragment may carry unescaped (RFC 3986 pchar): CFIs stay readable.
const FRAGMENT_KEEP = { '%2F': '/', '%3A': ':', '%2C': ',', '%3B': ';', '%40': '@', '%24': '$' }
const fragmentValue = v => encodeURIComponent(String(v)).replace(/%(2F|3A|2C|3B|40|24)/g, m => FRAGMENT_KEEP[m])

/** `#book=ID&section=N&offset=M` … as an object (null: no book named). */
function parseFragment(hash = location.hash) {
    const raw = String(hash || '').replace(/^#/, '')
    if (!raw) return null
    const params = {}
    for (const part of raw.split('&')) {
        const eq = part.indexOf('=')
        if (eq <= 0) continue
        try { params[decodeURIComponent(part.slice(0, eq))] = decodeURIComponent(part.slice(eq + 1)) } catch { /* bad escape */ }
    }
    if (!params.book) return null
    const int = k => {
        if (params[k] === undefined) return null
        if (!/^\d+$/.test(params[k])) throw new Error(`deep link: ${k} must be a whole number, not ${JSON.stringify(params[k])}`)
        return Number(params[k])
    }
    const unit = params.unit || 'codepoint'
    if (unit !== 'codepoint' && unit !== 'utf16') throw new Error(`deep link: unit must be codepoint or utf16, not ${JSON.stringify(unit)}`)
    const link = {
        book: params.book, cfi: params.cfi || null, section: int('section'), offset: int('offset'),
        sectionOffset: int('section_offset'), end: int('end'), unit, place: false, raw,
    }
    const given = [link.cfi !== null, link.offset !== null, link.sectionOffset !== null].filter(Boolean).length
    if (given > 1) throw new Error('deep link: give a cfi, or section + offset, or section + section_offset — one of them')
    if (link.cfi === null && link.section === null && given) throw new Error('deep link: an offset needs its section')
    link.place = given > 0 || link.section !== null
    return link
}

function formatFragment(place) {
    return `book=${fragmentValue(place.book)}&section=${place.section}&offset=${place.offset}`
}

/** Put the place in the URL (replaceState: no history entry, no hashchange). */
function writeFragment(place) {
    if (!place) return
    const hash = '#' + formatFragment(place)
    if (location.hash !== hash) history.replaceState(history.state, '', hash)
}

/**
 * A deep link's place as a span of book source coordinates (code points) in a section:
 * a CFI through GET /books/{id}/locate (a range CFI: its range; a point: the point), a
 * `section` + `offset` (book coordinates, `unit` codepoint or utf16) or + `section_offset`
 * (from the section's start); `end` makes a range. A point is painted over the text the
 * server quotes at a place: the PLACE_QUOTE_CHARS code points after it (at a section's
 * very end, the ones before it).
 */
async function openLinkPlace(book, link) {
    let sectionNo = link.section
    let start = null
    let end = null
    if (link.cfi) {
        const loc = await getJSON(`${bookPath(book.id)}/locate?cfi=${encodeURIComponent(link.cfi)}`)
        sectionNo = loc.section
        start = loc.source.position
        end = loc.rangeEnd ?? null
    }
    const section = await openSection(sectionNo ?? firstSection(book))
    const text = section.source_text
    const length = section.source_end - section.source_start
    const toLocalCp = (n, base) => link.unit === 'utf16'
        ? codePoints(text.slice(0, Math.max(0, n - base))) : n - base
    if (!link.cfi) {
        if (link.offset !== null) start = section.source_start + toLocalCp(link.offset, link.unit === 'utf16' ? section.utf16_start : section.source_start)
        else if (link.sectionOffset !== null) start = section.source_start + toLocalCp(link.sectionOffset, 0)
        if (link.end !== null) end = section.source_start + toLocalCp(link.end, link.unit === 'utf16' ? section.utf16_start : section.source_start)
    }
    if (start === null) { // a section alone: its start
        await goToPlace(section.ordinal, null)
        return null
    }
    const local = start - section.source_start
    if (local < 0 || local > length || (end !== null && (end < start || end - section.source_start > length))) {
        throw new Error(`deep link: ${link.raw} is outside section ${section.ordinal} (book source ` +
            `coordinates ${section.source_start}–${section.source_end}, code points; a number counted ` +
            `from the section's start goes in section_offset=)`)
    }
    let a = local
    let b = end === null ? null : end - section.source_start
    const point = b === null
    if (point) [a, b] = local < length ? [local, Math.min(length, local + PLACE_QUOTE_CHARS)] : [Math.max(0, local - PLACE_QUOTE_CHARS), local]
    const u16a = cpToUtf16(text, a)
    const u16b = cpToUtf16(text, b)
    await openHit({
        book: book.id, section: section.ordinal, chunkId: null, link: link.raw,
        utf16Start: section.utf16_start + u16a, utf16End: section.utf16_start + u16b,
        sourceStart: section.source_start + a, sourceEnd: section.source_start + b,
        text: text.slice(u16a, u16b), highlight: text.slice(u16a, u16b), matches: [],
        align: point ? 'top' : 'range',
    })
    state.link = link
    state.place = currentPlace() // the fragment stays the link until the reader moves on
    // Opening a link moves the reader there: saved like any move — unless the server keeps
    // this very place already (a reload of a URL the page wrote).
    let pos = null
    try { pos = await fetchPosition(book.id) } catch { /* saved anyway */ }
    if (state.book === book) {
        state.position = pos
        seen(pos)
        if (pos && pos.status === 'anchored' && pos.locator && state.place &&
            pos.locator.section === state.place.section && pos.locator.source.start === state.place.offset)
            state.savedPlace = state.place
    }
    placeMoved()
    return { section: section.ordinal, start: section.source_start + a, end: section.source_start + b }
}

/** Open what the URL fragment names (at start, and when the fragment changes). */
async function openFragment(hash = location.hash) {
    let link
    try {
        link = parseFragment(hash)
    } catch (e) {
        setStatus(e.message, true)
        return null
    }
    if (!link) return null
    state.link = link
    const isOpen = state.book && (state.book.id === link.book ||
        (/^[0-9a-f]{4,}$/i.test(link.book) && state.book.id.startsWith(link.book.toLowerCase())))
    if (isOpen && link.place) {
        return busy(async () => {
            await flushPosition()
            return openLinkPlace(state.book, link)
        })
    }
    return openBook(link.book, { link, restore: true })
}

// ------------------------------------------------------------------ chunks, search, hits

async function bookChunks(bookId) {
    if (state.chunks.has(bookId)) return state.chunks.get(bookId)
    const all = []
    for (let offset = 0; ; offset += CHUNK_PAGE) {
        const page = await getJSON(`${bookPath(bookId)}/chunks?offset=${offset}&limit=${CHUNK_PAGE}`)
        all.push(...page.chunks)
        if (page.chunks.length < CHUNK_PAGE) break
    }
    state.chunks.set(bookId, all)
    return all
}

/** A chunk as a hit (the section's chunk list, shown while the search box is empty). */
function chunkHit(bookId, c) {
    return {
        book: bookId,
        section: c.section,
        chunkId: c.id,
        index: c.index,
        utf16Start: c.utf16_start, // book source coordinates, UTF-16 units
        utf16End: c.utf16_end,
        sourceStart: c.source_start,
        sourceEnd: c.source_end,
        cfi: c.cfi || null,
        text: c.text,
        highlight: null,
        matches: [],
    }
}

/**
 * A hit of GET /search: its Locator says where (section, UTF-16 and code-point spans in
 * the book's source coordinates, the CFI for EPUB) and what (`text.highlight`, the exact
 * source text); `matches` are the query's words inside it, with their own spans.
 */
function searchHit(h) {
    const loc = h.locator
    return {
        book: h.book.id,
        bookTitle: h.book.title,
        section: loc.section,
        chunkId: h.chunk,
        rank: h.rank,
        index: null,
        utf16Start: loc.source.utf16Start,
        utf16End: loc.source.utf16End,
        sourceStart: loc.source.start,
        sourceEnd: loc.source.end,
        cfi: loc.locations.cfi || null,
        text: loc.text.highlight,
        highlight: loc.text.highlight,
        matches: h.matches.map(m => ({ utf16Start: m.source.utf16Start, utf16End: m.source.utf16End })),
        locator: loc,
    }
}

async function showSectionChunks() {
    const book = state.book
    const section = state.section
    const page = await getJSON(`${bookPath(book.id)}/chunks?section=${section.ordinal}&limit=${CHUNK_PAGE}`)
    $('#hits-title').textContent = `Chunks in this section (${page.chunks.length})`
    showHits(page.chunks.map(c => chunkHit(book.id, c)))
}

/** Search (GET /search) the open book, or every book when none is open. */
async function search(query, { mode = null, k = SEARCH_K } = {}) {
    const q = query.trim()
    if (!q) {
        if (state.book && state.section) await showSectionChunks()
        return state.hits
    }
    const params = new URLSearchParams({ q, k: String(k), mode: mode || $('#search-mode').value || 'hybrid' })
    if (state.book) params.set('book', state.book.id)
    const result = await busy(() => getJSON(`/search?${params}`))
    if ($('#search').value.trim() !== q && document.activeElement === $('#search')) return state.hits // typed on
    state.search = result
    const found = result.hits.map(searchHit)
    const where = state.book ? 'this book' : 'all books'
    $('#hits-title').textContent = `“${q}” in ${where}: ${found.length} hit${found.length === 1 ? '' : 's'} (${result.mode})`
    if (result.warnings.length) setStatus(result.warnings.join('; '))
    showHits(found)
    return found
}

/** A hit's text around its first matched word, the words in it marked (UTF-16 spans). */
function snippet(hit) {
    const span = document.createElement('span')
    const text = hit.text
    const flat = t => t.replace(/\s+/g, ' ')
    const spans = (hit.matches || [])
        .map(m => [m.utf16Start - hit.utf16Start, m.utf16End - hit.utf16Start])
        .filter(([a, b]) => a >= 0 && b <= text.length && a < b)
    if (!spans.length) {
        const all = flat(text)
        span.textContent = all.slice(0, 120) + (all.length > 120 ? '…' : '')
        return span
    }
    const from = Math.max(0, spans[0][0] - 40)
    const to = Math.min(text.length, from + 180)
    if (from > 0) span.append('…')
    let pos = from
    for (const [a0, b0] of spans) {
        const a = Math.max(a0, pos)
        const b = Math.min(b0, to)
        if (b <= a) continue
        span.append(flat(text.slice(pos, a)))
        const mark = document.createElement('mark')
        mark.textContent = flat(text.slice(a, b))
        span.append(mark)
        pos = b
    }
    span.append(flat(text.slice(pos, to)) + (to < text.length ? '…' : ''))
    return span
}

function showHits(hits) {
    state.hits = hits
    const ol = $('#hits')
    ol.replaceChildren()
    for (const hit of hits) {
        const li = document.createElement('li')
        const btn = document.createElement('button')
        btn.type = 'button'
        btn.className = 'hit'
        btn.dataset.chunk = hit.chunkId
        btn.dataset.section = hit.section
        btn.dataset.rank = hit.rank ?? ''
        const where = document.createElement('span')
        where.className = 'where'
        where.textContent = (hit.rank ? `#${hit.rank} · ` : '') +
            (hit.bookTitle && (!state.book || state.book.id !== hit.book) ? `${hit.bookTitle} · ` : '') +
            `§${hit.section}` + (hit.index !== null && hit.index !== undefined ? ` · chunk ${hit.index}` : '') +
            ` · UTF-16 ${hit.utf16Start}–${hit.utf16End}`
        btn.append(where, snippet(hit))
        btn.addEventListener('click', () => openHit(hit).catch(() => {}))
        li.append(btn)
        ol.append(li)
    }
}

/** Open a hit's section, scroll to it and highlight exactly its span. */
async function openHit(hit) {
    return busy(async () => {
        if (!state.book || state.book.id !== hit.book) await openBook(hit.book, { section: hit.section })
        const section = await openSection(hit.section)
        const base = section.utf16_start // plain text: file-global; EPUB: 0
        const range = rangeFromUtf16(state.view.doc, state.view.root, hit.utf16Start - base, hit.utf16End - base)
        state.highlight = { hit, range }
        paint(HIT, [range])
        const words = []
        for (const m of hit.matches || []) {
            try {
                words.push(rangeFromUtf16(state.view.doc, state.view.root, m.utf16Start - base, m.utf16End - base))
            } catch { /* outside the section */ }
        }
        paint(MATCH, words)
        if (hit.align === 'top') scrollPlaceToTop(hit.utf16Start - base)
        else scrollToRange(range)
        anchorPlace(hit.utf16Start - base)
        placeMoved() // a move, saved like a scroll (also when the hit was on screen already)
        for (const btn of document.querySelectorAll('#hits button'))
            btn.classList.toggle('active', Boolean(hit.chunkId) && btn.dataset.chunk === hit.chunkId)
        setStatus(`§${hit.section} UTF-16 [${hit.utf16Start}, ${hit.utf16End}) — code points [${hit.sourceStart}, ${hit.sourceEnd})`)
        return highlightInfo()
    })
}

async function openChunk(bookId, chunkId) {
    const chunks = await bookChunks(bookId)
    const c = chunks.find(x => x.id === chunkId)
    if (!c) throw new Error(`no chunk ${chunkId} in book ${bookId}`)
    return openHit(chunkHit(bookId, c))
}

/** What is highlighted now: the painted text, read back from the highlight registry. */
function highlightedText() {
    const view = state.view
    if (!view || !state.highlight) return null
    const reg = registry(view)
    if (!reg) return state.highlight.range.toString()
    const h = reg.get(HIT)
    return h ? [...h].map(r => r.toString()).join('') : null
}

/** The words of the query painted inside the open hit. */
function matchedWords() {
    const view = state.view
    const reg = view && registry(view)
    const h = reg && reg.get(MATCH)
    return h ? [...h].map(r => r.toString()) : []
}

function highlightInfo() {
    if (!state.highlight) return null
    const { hit, range } = state.highlight
    return {
        book: hit.book,
        section: hit.section,
        chunkId: hit.chunkId,
        utf16Start: hit.utf16Start,
        utf16End: hit.utf16End,
        rank: hit.rank ?? null,
        expected: hit.highlight, // the Locator's text.highlight (search hits)
        text: highlightedText(),
        matchedWords: matchedWords(),
        visible: isRangeVisible(range),
        view: state.view.kind,
        matchesSource: state.view.matchesSource,
    }
}

// ------------------------------------------------------------------ selections → highlights

/** Select [start, end) UTF-16 units of the current section's text (section-local). */
function selectUtf16(start, end) {
    const view = state.view
    const range = rangeFromUtf16(view.doc, view.root, start, end)
    const sel = view.doc.getSelection()
    sel.removeAllRanges()
    sel.addRange(range)
    return range.toString()
}

/**
 * The current selection as a highlight to store: section, UTF-16 and code-point spans in
 * the book's source coordinates, and a W3C-style text quote (exact, prefix, suffix).
 * The selection is clipped to the section's text; a boundary inside a surrogate pair is
 * moved outwards. Returns null when nothing (or only outside the text) is selected.
 */
function selectionToHighlight() {
    const view = state.view
    const section = state.section
    if (!view || !section) return null
    const sel = view.doc.getSelection()
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return null
    const range = sel.getRangeAt(0).cloneRange()
    const whole = view.doc.createRange()
    whole.selectNodeContents(view.root)
    if (range.compareBoundaryPoints(Range.END_TO_START, whole) >= 0 ||
        range.compareBoundaryPoints(Range.START_TO_END, whole) <= 0) return null
    if (range.compareBoundaryPoints(Range.START_TO_START, whole) < 0)
        range.setStart(whole.startContainer, whole.startOffset)
    if (range.compareBoundaryPoints(Range.END_TO_END, whole) > 0)
        range.setEnd(whole.endContainer, whole.endOffset)
    const text = viewText(view)
    let start = utf16Offset(view.doc, view.root, range.startContainer, range.startOffset)
    let end = start + range.toString().length
    if (start > 0 && isLow(text.charCodeAt(start)) && isHigh(text.charCodeAt(start - 1))) start--
    if (end < text.length && isLow(text.charCodeAt(end)) && isHigh(text.charCodeAt(end - 1))) end++
    if (end <= start) return null
    const cpStart = codePoints(text.slice(0, start))
    const exact = text.slice(start, end)
    const cpEnd = cpStart + codePoints(exact)
    const before = [...text.slice(0, start)]
    const after = [...text.slice(end)]
    return {
        book: state.book.id,
        section: section.ordinal,
        href: section.href,
        utf16Start: section.utf16_start + start,
        utf16End: section.utf16_start + end,
        start: section.source_start + cpStart, // code points, book source coordinates
        end: section.source_start + cpEnd,
        exact,
        prefix: before.slice(Math.max(0, before.length - QUOTE_CHARS)).join(''),
        suffix: after.slice(0, QUOTE_CHARS).join(''),
    }
}

// ------------------------------------------------------------------ stored highlights

/** The open book's highlights from the server (W3C Web Annotations). */
async function loadHighlights(bookId) {
    state.saved = await getJSON(`${bookPath(bookId)}/highlights`)
    state.savedBook = bookId
    renderHighlights()
    return state.saved
}

const bodyValue = (a, purpose) => (a.body.find(b => b.purpose === purpose) || {}).value ?? null

function renderHighlights() {
    const ol = $('#highlights')
    ol.replaceChildren()
    for (const a of state.saved) {
        const li = document.createElement('li')
        li.className = 'saved'
        const btn = document.createElement('button')
        btn.type = 'button'
        btn.className = 'hit'
        btn.dataset.highlight = a.id
        const where = document.createElement('span')
        where.className = 'where'
        const colour = bodyValue(a, 'highlighting') || 'yellow'
        const swatch = document.createElement('i')
        swatch.className = 'swatch'
        swatch.style.background = COLORS[colour] || colour
        if (a.status === 'orphaned') {
            li.classList.add('orphaned')
            where.append(swatch, `orphaned — not found in this edition`)
            btn.disabled = true
        } else {
            where.append(swatch, `§${a.section} · code points ${a.source.start}–${a.source.end}`)
            btn.addEventListener('click', () => openHighlight(a).catch(() => {}))
        }
        const quote = document.createElement('span')
        const exact = a.target.selector[0].exact
        quote.textContent = exact.length > 100 ? exact.slice(0, 100) + '…' : exact
        btn.append(where, quote)
        const note = bodyValue(a, 'commenting')
        if (note) {
            const small = document.createElement('small')
            small.textContent = note
            btn.append(small)
        }
        const del = document.createElement('button')
        del.type = 'button'
        del.className = 'delete'
        del.title = 'Delete this highlight'
        del.textContent = '×'
        del.addEventListener('click', () => deleteHighlight(a.id).catch(() => {}))
        li.append(btn, del)
        ol.append(li)
    }
    $('#highlights-note').textContent = state.saved.length
        ? `${state.saved.length} saved (stored on the server as W3C Web Annotations).`
        : 'Select text in the chapter, then “Highlight selection”.'
}

/** Remember the last selection in the chapter: a click into the note field takes it away. */
function watchSelection(doc) {
    if (doc.mindoryWatched) return
    doc.mindoryWatched = true
    doc.addEventListener('selectionchange', () => {
        if (!state.view || state.view.doc !== doc) return
        const h = selectionToHighlight()
        if (h) {
            state.pending = h
            return
        }
        // A click in the text (a collapsed selection there) drops it; focus moving to the
        // note field (the selection leaves the text) keeps it.
        const sel = doc.getSelection()
        if (sel && sel.isCollapsed && sel.anchorNode && state.view.root.contains(sel.anchorNode))
            state.pending = null
    })
}

/** Paint the open section's stored highlights, by colour. */
function paintSaved() {
    const view = state.view
    const section = state.section
    if (!view || !section || !state.book) return
    const byColour = new Map()
    for (const a of state.saved) {
        if (a.status !== 'anchored' || a.book !== state.book.id || a.section !== section.ordinal) continue
        const colour = bodyValue(a, 'highlighting')
        const name = COLORS[colour] ? `${SAVED}-${colour}` : SAVED
        try {
            const range = rangeFromUtf16(view.doc, view.root,
                a.source.utf16Start - section.utf16_start, a.source.utf16End - section.utf16_start)
            if (!byColour.has(name)) byColour.set(name, [])
            byColour.get(name).push(range)
        } catch { /* a highlight of another text */ }
    }
    for (const name of [SAVED, ...Object.keys(COLORS).map(c => `${SAVED}-${c}`)])
        paint(name, byColour.get(name) || [])
}

/** What the stored highlights paint in the open section: one string per range. */
function savedText() {
    const view = state.view
    const reg = view && registry(view)
    if (!reg) return []
    const out = []
    for (const name of [SAVED, ...Object.keys(COLORS).map(c => `${SAVED}-${c}`)]) {
        const h = reg.get(name)
        if (h) for (const r of h) out.push(r.toString())
    }
    return out
}

async function openHighlight(a) {
    return openHit({
        book: a.book, section: a.section, chunkId: null, highlightId: a.id,
        utf16Start: a.source.utf16Start, utf16End: a.source.utf16End,
        sourceStart: a.source.start, sourceEnd: a.source.end,
        text: a.target.selector[0].exact, highlight: a.target.selector[0].exact, matches: [],
    })
}

/**
 * Save the current selection as a highlight: POST /books/{id}/highlights with its
 * section, UTF-16 span (book source coordinates) and quote, which the server checks.
 * Returns {selection, annotation}; the annotation joins the list and is painted.
 */
async function saveSelection({ note = null, color = null } = {}) {
    const h = selectionToHighlight() || state.pending
    if (!h) {
        setStatus('select some text of the section first')
        return null
    }
    const body = {
        section: h.section, start: h.utf16Start, end: h.utf16End, unit: 'utf16', exact: h.exact,
        color: color || $('#highlight-color').value || 'yellow',
    }
    const typed = note ?? $('#highlight-note').value.trim()
    if (typed) body.note = typed
    const annotation = await busy(() => sendJSON('POST', `${bookPath(h.book)}/highlights`, body))
    $('#highlight-note').value = ''
    state.pending = null
    if (state.book && state.book.id === h.book) {
        state.saved.push(annotation)
        state.saved.sort((x, y) => (x.status === y.status ? 0 : x.status === 'anchored' ? -1 : 1) ||
            (x.section ?? 0) - (y.section ?? 0) || (x.source?.start ?? 0) - (y.source?.start ?? 0))
        renderHighlights()
        paintSaved()
    }
    if (state.view) state.view.doc.getSelection().removeAllRanges()
    setStatus(`highlight saved: §${h.section} code points [${h.start}, ${h.end})`)
    state.lastSaved = { selection: h, annotation }
    return state.lastSaved
}

async function deleteHighlight(id) {
    if (!state.book) return null
    const gone = await busy(() => request(`${bookPath(state.book.id)}/highlights/${encodeURIComponent(id)}`,
        { method: 'DELETE' }).then(r => r.json()))
    state.saved = state.saved.filter(a => a.id !== id)
    renderHighlights()
    paintSaved()
    return gone
}

// ------------------------------------------------------------------ import

async function upload(file) {
    const status = $('#upload-status')
    const bar = $('#upload-progress')
    status.classList.remove('error')
    status.textContent = `uploading ${file.name}…`
    bar.hidden = false
    bar.value = 0
    const form = new FormData()
    form.append('file', file, file.name)
    let job
    try {
        job = await (await request('/books', { method: 'POST', body: form })).json()
    } catch (e) {
        status.textContent = e.message
        status.classList.add('error')
        bar.hidden = true
        throw e
    }
    const finished = await followJob(job, j => {
        bar.value = j.progress
        status.textContent = `${j.file_name}: ${j.state}${j.phase ? ' (' + j.phase + ')' : ''}`
    })
    bar.hidden = true
    if (finished.state === 'failed') {
        status.textContent = finished.error ? finished.error.error : `${finished.file_name}: failed`
        status.classList.add('error')
        return finished
    }
    const r = finished.result
    status.textContent = `${r.title}: ${r.status}, ${r.sections} sections, ${r.chunks} chunks`
    await loadBooks()
    return finished
}

function followJob(job, onUpdate) {
    return new Promise(resolve => {
        const source = new EventSource(`/jobs/${encodeURIComponent(job.id)}/events`)
        let last = job
        const finish = j => {
            source.close()
            resolve(j)
        }
        const handle = e => {
            last = JSON.parse(e.data)
            onUpdate(last)
            if (last.state === 'succeeded' || last.state === 'failed') finish(last)
        }
        source.addEventListener('progress', handle)
        source.addEventListener('done', handle)
        source.onerror = async () => {
            // The stream ended or broke: ask once more how the job stands.
            source.close()
            try {
                let j = await getJSON(`/jobs/${encodeURIComponent(job.id)}`)
                while (j.state !== 'succeeded' && j.state !== 'failed') {
                    onUpdate(j)
                    await new Promise(r => setTimeout(r, 500))
                    j = await getJSON(`/jobs/${encodeURIComponent(job.id)}`)
                }
                onUpdate(j)
                resolve(j)
            } catch (e) {
                resolve({ ...last, state: 'failed', error: { error: e.message } })
            }
        }
    })
}

// ------------------------------------------------------------------ wiring

function useToken(token) {
    state.token = token || null
    if (token) {
        sessionStorage.setItem('mindory_token', token)
        // The iframe and its images cannot send a header: the server also reads this cookie.
        document.cookie = `mindory_token=${encodeURIComponent(token)}; path=/; SameSite=Strict`
    }
}

function wire() {
    $('#upload').addEventListener('submit', e => {
        e.preventDefault()
        const file = $('#upload-file').files[0]
        if (file) upload(file).catch(() => {})
    })
    $('#token-form').addEventListener('submit', e => {
        e.preventDefault()
        useToken($('#token').value.trim())
        $('#token-form').hidden = true
        setStatus('') // the sign-in message is answered (a refusal brings it back)
        start().catch(() => {})
    })
    let timer = null
    $('#search').addEventListener('input', () => {
        clearTimeout(timer)
        timer = setTimeout(() => search($('#search').value).catch(() => {}), 150)
    })
    $('#search-form').addEventListener('submit', e => {
        e.preventDefault()
        clearTimeout(timer)
        search($('#search').value).catch(() => {})
    })
    $('#prev').addEventListener('click', () => state.section && openSection(state.section.ordinal - 1).catch(() => {}))
    $('#next').addEventListener('click', () => state.section && openSection(state.section.ordinal + 1).catch(() => {}))
    $('#save-highlight').addEventListener('click', () => saveSelection().catch(() => {}))
    $('#search-mode').addEventListener('change', () => search($('#search').value).catch(() => {}))
    $('#pane').addEventListener('scroll', placeMoved, { passive: true })
    // Leaving or hiding the page saves a pending move at once (keepalive outlives the page).
    window.addEventListener('pagehide', () => { flushPosition({ keepalive: true }) })
    document.addEventListener('visibilitychange', () => {
        if (document.visibilityState === 'hidden') flushPosition({ keepalive: true })
        else refreshPosition().catch(() => {})
    })
    window.addEventListener('hashchange', () => {
        const link = (() => { try { return parseFragment() } catch { return null } })()
        if (link && state.place && link.place && link.cfi === null && link.end === null &&
            link.book === state.place.book && link.section === state.place.section &&
            link.offset === state.place.offset && link.unit === 'codepoint') return // our own
        openFragment().catch(() => {})
    })
}

async function start() {
    if (state.token) useToken(state.token)
    await busy(loadBooks)
    if (location.hash) await openFragment().catch(() => {}) // a deep link (its errors are in the status line)
}

let resolveReady
const ready = new Promise(r => { resolveReady = r })

wire()
start().then(() => resolveReady(true), e => {
    setStatus(e.message || String(e), true)
    resolveReady(false)
})

window.mindoryReader = {
    ready,
    state,
    openBook,
    openSection,
    openHit,
    openChunk,
    search,
    jumpTo,
    highlightedText,
    highlightInfo,
    loadHighlights,
    savedText,
    deleteHighlight,
    selectUtf16,
    selectionToHighlight,
    saveSelection,
    viewText,
    rangeFromUtf16,
    codePoints,
    cpToUtf16,
    upload,
    // reading positions and deep links
    currentPlace,
    visibleRange,
    restorePosition,
    refreshPosition,
    fetchPosition,
    flushPosition,
    openFragment,
    parseFragment,
    formatFragment,
    deviceId,
    firstSection,
    SAVE_DELAY_MS,
}
