// A small Markdown renderer for model output. It builds DOM nodes and puts
// every piece of text in a Text node, so nothing the model writes is ever
// parsed as HTML: "<script>" shows as those characters. Covered: fenced code
// (an unclosed fence while streaming renders as code so far), headings,
// lists, block quotes, paragraphs, inline code, bold, italics and http(s)
// links.
//
// Every scan is linear in its input, whatever the model writes (a line of
// 100k backticks, or of 100k "["): the inline marks are found in one pass
// that never looks at a character twice at the same depth, and marks nest at
// most three deep. Live re-renders only the part of a growing reply that can
// still change. parseInline and advance touch no DOM (tests/web/md.test.mjs
// runs them under node).

// FENCE opens a code block: three or more backticks or tildes, then an
// optional language.
const FENCE = /^\s*(```+|~~~+)\s*([\w+#.-]*)/;

// The characters an inline mark can start with.
const SPECIAL = /[`*_[]/g;

// finder returns f(p): the first index ≥ p of a character re matches, or
// text.length. re must be global. Queries with p growing (as one scan makes
// them) cost O(len(text)) in all: an answer stays valid for every p up to it.
function finder(text, re) {
  let from = 0, at = -1;
  return (p) => {
    if (p < from || p > at) {
      re.lastIndex = p;
      const m = re.exec(text);
      from = p;
      at = m ? m.index : text.length;
    }
    return at;
  };
}

// closers returns f(n, p): the start of the first run of exactly n backticks
// at or after p, or -1. Runs are maximal (a run is neither preceded nor
// followed by a backtick), so a run never closes a code span of another
// length. One pass over text; p must not decrease between calls.
function closers(text) {
  const byLen = new Map(); // run length → [starts in order, next index to look at]
  for (let i = text.indexOf('`'); i >= 0; ) {
    let j = i;
    while (text.charCodeAt(j) === 96) j++;
    const e = byLen.get(j - i) || byLen.set(j - i, [[], 0]).get(j - i);
    e[0].push(i);
    i = text.indexOf('`', j);
  }
  return (n, p) => {
    const e = byLen.get(n);
    if (!e) return -1;
    const [starts] = e;
    while (e[1] < starts.length && starts[e[1]] < p) e[1]++;
    return e[1] < starts.length ? starts[e[1]] : -1;
  };
}

// codeText is a code span's content as CommonMark shows it: one space is
// stripped from each end when both ends have one and it is not all spaces.
function codeText(s) {
  return s.length > 2 && s[0] === ' ' && s[s.length - 1] === ' ' && s.trim() !== '' ? s.slice(1, -1) : s;
}

const isSpace = (c) => c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v';

// parseInline splits one line into strings and marks, left to right, the
// first mark that starts at a position winning:
//   `code`   a run of n backticks to the next run of exactly n (else the run
//            is text)
//   **bold** / __bold__   to the next "**" / "__" with no "*" / "_" between
//   *italic* a non-space, non-"*" first character, to the next "*"
//   [text](http(s)://url)
// A mark is {code: string}, {strong: [...]}, {em: [...]} or {link, href}.
export function parseInline(text) {
  const out = [];
  let runs = null;
  const next = { '*': finder(text, /\*/g), _: finder(text, /_/g), ']': finder(text, /]/g), url: finder(text, /[\s)]/g) };
  let last = 0; // text before this index is in out
  for (let i = 0; ;) {
    SPECIAL.lastIndex = i;
    const m = SPECIAL.exec(text);
    if (!m) break;
    i = m.index;
    const c = text[i];
    let mark = null, end = i + 1;
    if (c === '`') {
      let n = 1;
      while (text.charCodeAt(i + n) === 96) n++;
      runs ||= closers(text);
      const j = runs(n, i + n);
      if (j >= 0) {
        mark = { code: codeText(text.slice(i + n, j)) };
        end = j + n;
      } else end = i + n; // no closer: the whole run is text
    } else if (c === '[') {
      const k = next[']'](i + 1);
      const u = k + 2;
      if (k > i + 1 && k < text.length && text[k + 1] === '(') {
        const scheme = text.startsWith('https://', u) ? 8 : text.startsWith('http://', u) ? 7 : 0;
        const e = scheme ? next.url(u + scheme) : -1;
        if (e > u + scheme && text[e] === ')') {
          mark = { link: text.slice(i + 1, k), href: text.slice(u, e) };
          end = e + 1;
        }
      }
    } else {
      if (text[i + 1] === c) {
        const k = next[c](i + 2);
        if (k > i + 2 && text[k + 1] === c) {
          mark = { strong: parseInline(text.slice(i + 2, k)) };
          end = k + 2;
        }
      }
      if (!mark && c === '*' && i + 1 < text.length && text[i + 1] !== '*' && !isSpace(text[i + 1])) {
        const k = next['*'](i + 1);
        if (k < text.length) {
          mark = { em: parseInline(text.slice(i + 1, k)) };
          end = k + 1;
        }
      }
    }
    if (mark) {
      if (i > last) out.push(text.slice(last, i));
      out.push(mark);
      last = end;
    }
    i = end;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

// advance moves st ({pos, fence, cut}, from {pos: 0, fence: null, cut: 0})
// over the complete lines of text from st.pos, and sets st.cut after each
// blank line outside a code fence. Rendering text up to st.cut and the rest
// separately gives the nodes that rendering it whole does: render's state
// (paragraph, list, open fence) is empty after such a line. A lone "\r"
// (which render reads as a line break) inside a line stops the cuts: it
// never comes from a model in practice, and no cut is always safe.
export function advance(st, text) {
  for (let nl; !st.stop && (nl = text.indexOf('\n', st.pos)) >= 0; ) {
    const line = text.slice(st.pos, nl);
    const cr = line.indexOf('\r');
    if (cr >= 0 && cr < line.length - 1) {
      st.stop = true;
      break;
    }
    st.pos = nl + 1;
    if (st.fence) {
      if (line.trimStart().startsWith(st.fence)) st.fence = null;
      continue;
    }
    const f = FENCE.exec(line);
    if (f) st.fence = f[1];
    else if (line.trim() === '') st.cut = st.pos;
  }
  return st;
}

function el(tag, cls) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  return e;
}

// build appends parseInline's result to parent.
function build(parent, parts) {
  for (const p of parts) {
    if (typeof p === 'string') parent.append(p);
    else if (p.code !== undefined) {
      const c = el('code');
      c.textContent = p.code;
      parent.append(c);
    } else if (p.strong) {
      const b = el('strong');
      build(b, p.strong);
      parent.append(b);
    } else if (p.em) {
      const i = el('em');
      build(i, p.em);
      parent.append(i);
    } else {
      const a = el('a');
      a.href = p.href; // parseInline admits only http(s) URLs
      a.rel = 'noopener noreferrer nofollow';
      a.target = '_blank';
      a.textContent = p.link;
      parent.append(a);
    }
  }
}

// inline appends text with inline marks to parent.
function inline(parent, text) { build(parent, parseInline(text)); }

function lines(parent, ls) {
  ls.forEach((l, i) => {
    if (i > 0) parent.append(el('br'));
    inline(parent, l);
  });
}

// render returns a fragment for text.
export function render(text) {
  const out = document.createDocumentFragment();
  const src = text.replace(/\r\n?/g, '\n').split('\n');
  let para = [];
  let list = null; // {node, ordered}
  const flush = () => {
    if (para.length) {
      const p = el('p');
      lines(p, para);
      out.append(p);
      para = [];
    }
    list = null;
  };
  for (let i = 0; i < src.length; i++) {
    const line = src[i];
    const fence = FENCE.exec(line);
    if (fence) {
      flush();
      const code = [];
      for (i++; i < src.length && !src[i].trimStart().startsWith(fence[1]); i++) code.push(src[i]);
      const pre = el('pre');
      const c = el('code');
      if (fence[2]) {
        pre.dataset.lang = fence[2];
        c.className = 'lang-' + fence[2].replace(/[^\w-]/g, '');
      }
      c.textContent = code.join('\n');
      pre.append(c);
      out.append(pre);
      continue;
    }
    if (line.trim() === '') {
      flush();
      continue;
    }
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) {
      flush();
      const e = el('h' + Math.min(6, h[1].length + 2)); // the reply's headings sit under the page's
      inline(e, h[2]);
      out.append(e);
      continue;
    }
    const li = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(line);
    if (li) {
      const ordered = li[2] !== undefined;
      if (para.length) flush();
      if (!list || list.ordered !== ordered) {
        list = { node: el(ordered ? 'ol' : 'ul'), ordered };
        if (ordered && li[2] !== '1') list.node.start = Number(li[2]);
        out.append(list.node);
      }
      const item = el('li');
      inline(item, li[3]);
      list.node.append(item);
      continue;
    }
    const q = /^>\s?(.*)$/.exec(line);
    if (q) {
      flush();
      const bq = el('blockquote');
      inline(bq, q[1]);
      out.append(bq);
      continue;
    }
    if (list) list = null;
    para.push(line);
  }
  flush();
  return out;
}

// Live renders a text that only grows (a reply as it streams) into el, the
// same nodes render gives: the blocks before the last blank line outside a
// code fence can no longer change, so each is rendered once; an update
// renders only the rest again. A text that does not extend the last one
// starts over.
export class Live {
  constructor(el) {
    this.el = el;
    this.text = null;
  }

  update(text) {
    if (this.text === null || !text.startsWith(this.text)) {
      this.el.replaceChildren();
      this.st = { pos: 0, fence: null, cut: 0 };
      this.fixed = 0; // text before this index is in fixed nodes
      this.tail = [];
    }
    this.text = text;
    advance(this.st, text);
    for (const n of this.tail) n.remove();
    if (this.st.cut > this.fixed) {
      this.el.append(render(text.slice(this.fixed, this.st.cut)));
      this.fixed = this.st.cut;
    }
    const rest = render(text.slice(this.fixed));
    this.tail = [...rest.childNodes];
    this.el.append(rest);
  }
}
