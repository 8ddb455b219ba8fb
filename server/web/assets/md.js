// A small Markdown renderer for model output. It builds DOM nodes and puts
// every piece of text in a Text node, so nothing the model writes is ever
// parsed as HTML: "<script>" shows as those characters. Covered: fenced code
// (an unclosed fence while streaming renders as code so far), headings,
// lists, block quotes, paragraphs, inline code, bold, italics and http(s)
// links.

const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*\n]+)\*\*|__([^_\n]+)__|\*([^*\s\n][^*\n]*)\*|\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g;

function el(tag, cls) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  return e;
}

// inline appends text with inline marks to parent.
function inline(parent, text) {
  let last = 0;
  // matchAll runs on a copy of the pattern: the recursion below for bold and
  // italics must not move this loop's position.
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) parent.append(text.slice(last, m.index));
    if (m[2] !== undefined) {
      const c = el('code');
      c.textContent = m[2];
      parent.append(c);
    } else if (m[3] !== undefined || m[4] !== undefined) {
      const b = el('strong');
      inline(b, m[3] ?? m[4]);
      parent.append(b);
    } else if (m[5] !== undefined) {
      const i = el('em');
      inline(i, m[5]);
      parent.append(i);
    } else {
      const a = el('a');
      a.href = m[7]; // the pattern admits only http(s) URLs
      a.rel = 'noopener noreferrer nofollow';
      a.target = '_blank';
      a.textContent = m[6];
      parent.append(a);
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) parent.append(text.slice(last));
}

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
    const fence = /^\s*(```+|~~~+)\s*([\w+#.-]*)/.exec(line);
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
