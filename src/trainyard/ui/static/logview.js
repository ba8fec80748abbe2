// A job's log, live: streamed over SSE, kept as arrays of lines, and drawn with virtual scrolling (only
// the rows on screen are in the DOM), so a log of millions of lines stays usable. Follow, filter by
// attempt and replica, search over everything loaded, and a download of the whole log from the server.
import { css } from "./assets.js";
import { download, stream, toast } from "./api.js";
import { h } from "./ui.js";

const LINE_H = 18;            // px; fixed, so a line's place is its index times this
const MAX_LINES = 2_000_000;  // held in the browser; beyond it the oldest go, and the view says so
const DROP = 200_000;         // dropped at once when over, so dropping stays rare
const MAX_PX = 8_000_000;     // browsers cap an element's height: past it, scroll position maps to a line

// UTF-8 bytes of a text: chunk offsets count the log's bytes, not its characters
function bytes(text) {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < text.length) { n += 4; i++; }  // a surrogate pair
    else n += 3;
  }
  return n;
}

// `text` before its byte `n` (`tail` false) or from it (`tail` true); a character the edge cuts is dropped,
// as the server drops it where it cuts a log
function cutText(text, n, tail) {
  const raw = new TextEncoder().encode(text);
  while (n > 0 && n < raw.length && (raw[n] & 0xc0) === 0x80) n += tail ? 1 : -1;
  return new TextDecoder().decode(tail ? raw.subarray(n) : raw.subarray(0, n));
}

export class LogView {
  constructor(jobId) {
    css("/ui/views.css");
    this.jobId = jobId;
    this.lines = [];         // text of each line
    this.src = [];           // attempt * 65536 + replica of each line
    this.at = [];            // the byte of its source's log each line starts at (-1: a note of the server's)
    this.next = new Map();   // source -> the byte after the last chunk taken: a chunk further on follows a cut
    this.open = new Map();   // source -> index of its last line while it has no newline yet
    this.seen = new Map();   // source -> last chunk offset taken (a reconnect may send a chunk again)
    this.cursor = -1;        // the stream's cursor of the last chunk taken: what a note repeated would not pass
    this.sources = new Set();
    this.dropped = 0;
    this.filter = { attempt: "", replica: "" };
    this.shown = null;       // indices of lines passing the filter (null: all)
    this.query = "";
    this.matches = [];       // positions (in the shown lines) of search matches
    this.current = -1;
    this.follow = true;
    this.dirty = false;
    this.build();
  }

  build() {
    this.followBox = h("input", { type: "checkbox", checked: true, onchange: () => { this.follow = this.followBox.checked; if (this.follow) this.toBottom(); } });
    this.attemptSel = h("select", { name: "attempt", title: "attempt", onchange: () => this.setFilter() }, h("option", { value: "" }, "all attempts"));
    this.replicaSel = h("select", { name: "replica", title: "replica", onchange: () => this.setFilter() }, h("option", { value: "" }, "all replicas"));
    this.searchBox = h("input", { type: "search", name: "search", placeholder: "search the log", onkeydown: (e) => {
      if (e.key === "Enter") { e.preventDefault(); this.search(this.searchBox.value, e.shiftKey ? -1 : 1); }
    } });
    this.matchInfo = h("span.muted.matches");
    this.info = h("span.muted.count");
    this.banner = h("div.log-banner", { hidden: true });
    this.spacer = h("div.log-spacer");
    this.rows = h("div.log-rows");
    this.scroller = h("div.logview", { tabindex: 0, onscroll: () => this.onScroll() }, this.spacer, this.rows);
    this.el = h("div.logbox", {},
      h("div.row.log-tools", {},
        h("label", {}, this.followBox, " follow"), this.attemptSel, this.replicaSel, this.searchBox,
        h("button", { type: "button", title: "previous match", onclick: () => this.search(this.searchBox.value, -1) }, "↑"),
        h("button", { type: "button", title: "next match", onclick: () => this.search(this.searchBox.value, 1) }, "↓"),
        this.matchInfo, h("span.grow"), this.info,
        h("button", { type: "button", onclick: () => this.download() }, "Download")),
      this.banner, this.scroller);
    this.pool = [];
    // its height comes from views.css, linked when the page first shows: drawn before that sheet arrives, the
    // box is as tall as the whole log; drawn again once it has its own height
    new ResizeObserver(() => this.schedule()).observe(this.scroller);
  }

  // Follow the job's log from the start; returns the stop function
  start() {
    this.stop = stream(`jobs/${encodeURIComponent(this.jobId)}/logs`, {
      query: { follow: true, after: 0, cuts: true }, cursorParam: "after",
      onEvent: (ev) => {
        if (ev.event === "cut") this.cut(JSON.parse(ev.data));
        else if (ev.event !== "end") this.append(JSON.parse(ev.data), Number(ev.id));
      },
      onEnd: () => { this.ended = true; this.info.dataset.ended = "true"; this.schedule(); },
    });
    return () => this.stop && this.stop();
  }

  // One LogChunk {attempt, replica, offset, data} at stream cursor `id`: its text split into lines, a line without
  // its newline yet continued by the next chunk of the same source
  append(chunk, id = NaN) {
    const source = chunk.attempt * 65536 + chunk.replica;
    const note = chunk.offset < 0;
    if (note) {
      // the server's note (offset -1: where it began to drop a log past log_keep, metric names it stopped storing)
      // holds no bytes of the log, so no offset places it: it stands where the stream brings it, after the chunks
      // stored before it, which is where a reload reads it (the server's order), not skipped as an old offset
      if (id <= this.cursor) return;
    } else {
      if (this.seen.has(source) && chunk.offset <= this.seen.get(source)) return;
      this.seen.set(source, chunk.offset);
      // past a cut (bytes the server dropped) a line does not run on: the line the head ends in is not the line
      // the kept end starts in, live or on a reload
      if (chunk.offset > (this.next.get(source) ?? 0)) this.open.delete(source);
    }
    if (id > this.cursor) this.cursor = id;
    if (!this.sources.has(source)) { this.sources.add(source); this.addOptions(chunk); }
    // a note is lines of its own: its first line break (there to start it on a line in the plain text) neither
    // ends the log's open line nor makes an empty one, which would stand live where a reload has none
    const parts = (note ? chunk.data.replace(/^\n/, "") : chunk.data).split("\n");
    let i = 0;
    let pos = chunk.offset;  // the byte of the log the next line starts at
    if (!note && this.open.has(source)) {
      const at = this.open.get(source) - this.dropped;
      if (at >= 0) { this.lines[at] += parts[0]; this.recheck(at); i = 1; pos += bytes(parts[0]) + 1; }
      this.open.delete(source);
    }
    const last = parts.length - 1;
    for (; i <= last; i++) {
      if (i === last && parts[i] === "") break;  // the chunk ended with its newline
      this.lines.push(parts[i]);
      this.src.push(source);
      this.at.push(note ? -1 : pos);
      pos += bytes(parts[i]) + 1;
      this.take(this.lines.length - 1);
    }
    if (!note) {
      this.next.set(source, chunk.offset + bytes(chunk.data));
      if (parts[last] !== "") this.open.set(source, this.dropped + this.lines.length - 1);
    }
    if (this.lines.length > MAX_LINES) this.dropOldest();
    this.schedule();
  }

  // The server dropped bytes head…tail of a source's log (it passed log_keep; see LogCut): the lines they held go,
  // a line across an edge keeps its part outside it, so the view shows what a reload shows. Not following, the
  // line at the top of the view stays where it is (or, gone, the first kept after it)
  cut({ attempt, replica, head, tail }) {
    const source = attempt * 65536 + replica;
    const g = this.geometry();
    const top = this.scroller.scrollTop;
    // placed by the scroll fraction, what is on screen is what was drawn: lines that came since move the fraction
    const first = g.scaled && this.drawn ? this.drawn.first : this.firstAt(g, top);
    const anchor = this.follow || first >= g.n ? -1 : (this.shown ? this.shown[first] : first);
    const open = new Map([...this.open].map(([s, i]) => [i - this.dropped, s]));  // line -> source still on it
    const lines = [], src = [], at = [], moved = new Map();  // moved: old index -> new, of the lines kept
    let changed = false;
    const keep = (i, text, a) => { moved.set(i, lines.length); lines.push(text); src.push(this.src[i]); at.push(a); };
    for (let i = 0; i < this.lines.length; i++) {
      const a = this.at[i], text = this.lines[i];
      const end = a + bytes(text) + (open.has(i) ? 0 : 1);
      if (this.src[i] !== source || a < 0 || end <= head || a >= tail) { keep(i, text, a); continue; }
      changed = true;
      if (a < head) keep(i, cutText(text, head - a, false), a);
      if (end > tail) keep(i, cutText(text, tail - a, true), tail);
    }
    if (!changed) return;
    const n = this.lines.length;
    this.open = new Map([...open].filter(([i]) => moved.has(i)).map(([i, s]) => [s, this.dropped + moved.get(i)]));
    Object.assign(this, { lines, src, at });
    this.refilter();
    if (anchor >= 0) {
      let i = anchor;
      while (i < n && !moved.has(i)) i++;  // the anchor went: the first line kept after it
      const line = i < n ? moved.get(i) : lines.length;
      const found = this.shown ? this.shown.findIndex((j) => j >= line) : line;
      const pos = found < 0 ? this.shown.length : found;
      const now = this.geometry();
      this.spacer.style.height = `${now.px}px`;  // first, or the old height would bound scrollTop
      this.scrollTo(this.topOf(now, pos) + (g.scaled || now.scaled ? 0 : top - first * LINE_H));
      this.drawn = { first: pos, n: now.n };
    }
    this.render();
  }

  addOptions({ attempt, replica }) {
    const add = (sel, v, text) => {
      if ([...sel.options].some((o) => o.value === String(v))) return;
      sel.append(h("option", { value: String(v) }, text));
    };
    add(this.attemptSel, attempt, `attempt ${attempt}`);
    add(this.replicaSel, replica, `replica ${replica}`);
  }

  passes(i) {
    const s = this.src[i];
    const { attempt, replica } = this.filter;
    return (attempt === "" || Math.floor(s / 65536) === +attempt) && (replica === "" || s % 65536 === +replica);
  }

  // a new line at index i: into the filtered view and the search matches
  take(i) {
    if (this.shown) { if (!this.passes(i)) return; this.shown.push(i); }
    if (this.query && this.lines[i].toLowerCase().includes(this.query)) this.matches.push(this.shownCount() - 1);
  }

  // a line that grew (its chunk continued it): a match it now has
  recheck(i) {
    if (!this.query || !this.lines[i].toLowerCase().includes(this.query)) return;
    const pos = this.shown ? this.shown.lastIndexOf(i) : i;
    if (pos >= 0 && this.matches[this.matches.length - 1] !== pos) this.matches.push(pos);
  }

  dropOldest() {
    this.lines.splice(0, DROP);
    this.src.splice(0, DROP);
    this.at.splice(0, DROP);
    this.dropped += DROP;
    this.refilter();
    this.banner.hidden = false;
    this.banner.replaceChildren(`The first ${this.dropped.toLocaleString()} lines were dropped from this view to keep the browser responsive; `,
      h("a", { href: "#", onclick: (e) => { e.preventDefault(); this.download(); } }, "download the whole log"), ".");
  }

  setFilter() {
    this.filter = { attempt: this.attemptSel.value, replica: this.replicaSel.value };
    this.refilter();
    this.schedule();
  }

  refilter() {
    const all = this.filter.attempt === "" && this.filter.replica === "";
    this.shown = all ? null : [];
    if (!all) for (let i = 0; i < this.lines.length; i++) if (this.passes(i)) this.shown.push(i);
    this.findAll();
  }

  shownCount() { return this.shown ? this.shown.length : this.lines.length; }
  lineAt(pos) { return this.lines[this.shown ? this.shown[pos] : pos]; }

  findAll() {
    this.matches = [];
    if (!this.query) return;
    const n = this.shownCount();
    for (let pos = 0; pos < n; pos++) if (this.lineAt(pos).toLowerCase().includes(this.query)) this.matches.push(pos);
    this.current = Math.min(this.current, this.matches.length - 1);
  }

  // Jump to the next (dir 1) or previous (-1) match of `text`, searching everything loaded
  search(text, dir = 1) {
    const q = text.toLowerCase();
    if (q !== this.query) { this.query = q; this.current = -1; this.findAll(); }
    if (this.matches.length) {
      const n = this.matches.length;
      this.current = this.current < 0 ? (dir > 0 ? 0 : n - 1) : (this.current + dir + n) % n;
      this.setFollow(false);
      this.scrollToLine(this.matches[this.current]);
    }
    this.schedule();
  }

  setFollow(on) { this.follow = on; this.followBox.checked = on; }

  onScroll() {
    const atBottom = this.scroller.scrollTop + this.scroller.clientHeight >= this.scroller.scrollHeight - LINE_H;
    if (atBottom !== this.follow) this.setFollow(atBottom);  // scrolled up: stop following; back down: follow
    this.render(this.scroller.scrollTop !== this.ownTop);  // the view's own move (below) is no one's scroll
  }

  // scroll to `top` for the view's own reasons, not the person's: what was drawn there stays what is kept
  scrollTo(top) {
    this.scroller.scrollTop = top;
    this.ownTop = this.scroller.scrollTop;
  }

  schedule() {
    if (this.dirty) return;
    this.dirty = true;
    requestAnimationFrame(() => { this.dirty = false; this.render(); });
  }

  geometry() {
    const n = this.shownCount();
    const view = Math.min(this.scroller.clientHeight || 400, window.innerHeight || 1000);  // never a whole log
    const total = n * LINE_H;
    return { n, view, total, px: Math.min(total, MAX_PX), scaled: total > MAX_PX };
  }

  scrollToLine(pos) {
    const g = this.geometry();
    const target = Math.max(0, pos * LINE_H - g.view / 2);
    this.scroller.scrollTop = g.scaled ? (target / (g.total - g.view)) * (g.px - g.view) : target;
    this.drawn = { first: this.firstAt(g, this.scroller.scrollTop), n: g.n };  // where lines that come keep it
  }

  toBottom() {
    this.scroller.scrollTop = this.scroller.scrollHeight;
  }

  // the first line on screen at scroll position `top`: by pixels, or by the scroll fraction once the height is capped
  firstAt(g, top) {
    return g.scaled ? Math.floor((top / Math.max(1, g.px - g.view)) * Math.max(0, g.n - g.view / LINE_H))
      : Math.floor(top / LINE_H);
  }

  // the scroll position that puts line `pos` first on screen (firstAt's inverse; half a line in, where scaled, so
  // that rounding to a pixel does not show the line before)
  topOf(g, pos) {
    return g.scaled ? ((pos + 0.5) / Math.max(1, g.n - g.view / LINE_H)) * (g.px - g.view) : pos * LINE_H;
  }

  // `scrolled`: drawn for a scroll (the person's, or a jump), not for lines that came or went
  render(scrolled = false) {
    const g = this.geometry();
    this.spacer.style.height = `${g.px}px`;
    if (this.follow && g.n) this.toBottom();
    // placed by the scroll fraction, one scroll position shows other lines once lines come or go: the line first
    // on screen stays first, or the one the person reads drifts away while the job prints
    else if (g.scaled && !scrolled && this.drawn && this.drawn.n !== g.n) {
      this.scrollTo(this.topOf(g, this.drawn.first));
    }
    const top = this.scroller.scrollTop;
    const first = this.firstAt(g, top);
    this.drawn = { first, n: g.n };
    const count = Math.min(g.n - first, Math.ceil(g.view / LINE_H) + 1);
    this.rows.style.transform = `translateY(${g.scaled ? top : first * LINE_H}px)`;
    while (this.pool.length < count) this.pool.push(h("div.log-line"));
    const multi = this.sources.size > 1;
    const current = this.current >= 0 ? this.matches[this.current] : -1;
    for (let k = 0; k < count; k++) this.fill(this.pool[k], first + k, multi, current);
    this.rows.replaceChildren(...this.pool.slice(0, Math.max(0, count)));
    this.info.textContent = `${(this.lines.length + this.dropped).toLocaleString()} lines${this.ended ? " · ended" : ""}`;
    this.matchInfo.textContent = this.query ? `${this.current + 1} / ${this.matches.length}` : "";
  }

  fill(row, pos, multi, current) {
    const i = this.shown ? this.shown[pos] : pos;
    const text = this.lines[i];
    const s = this.src[i];
    const gutter = h("span.log-no", {}, String(i + 1 + this.dropped));
    const tag = multi ? h("span.log-src", {}, `${Math.floor(s / 65536)}/${s % 65536}`) : null;
    row.className = pos === current ? "log-line current" : "log-line";
    row.dataset.line = String(i + 1 + this.dropped);
    row.replaceChildren(gutter, tag || "", ...this.marked(text));
  }

  // the line's text with every match of the search in <mark> (as text nodes: never HTML)
  marked(text) {
    if (!this.query) return [text];
    const low = text.toLowerCase();
    const out = [];
    let at = 0;
    for (let j = low.indexOf(this.query); j >= 0; j = low.indexOf(this.query, j + this.query.length)) {
      out.push(text.slice(at, j), h("mark", {}, text.slice(j, j + this.query.length)));
      at = j + this.query.length;
    }
    out.push(text.slice(at));
    return out;
  }

  download() {
    const q = new URLSearchParams();
    if (this.filter.attempt) q.set("attempt", this.filter.attempt);
    if (this.filter.replica) q.set("replica", this.filter.replica);
    const suffix = [this.filter.attempt && `attempt${this.filter.attempt}`, this.filter.replica && `replica${this.filter.replica}`].filter(Boolean);
    const qs = q.toString();
    download(`/api/v1/jobs/${encodeURIComponent(this.jobId)}/logs.txt${qs ? `?${qs}` : ""}`, `${[this.jobId, ...suffix].join("-")}.log`)
      .catch((e) => toast(e));
  }
}
