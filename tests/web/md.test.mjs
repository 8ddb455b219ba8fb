// Unit tests of the page's Markdown scanner (server/web/assets/md.js) that
// need no browser: the inline marks, agreement with the regex the scanner
// replaced wherever that regex was right, linear time on hostile lines, and
// where a streamed reply may be cut into blocks rendered once. Run with
// `node --test tests/web/` (make web-unit, part of make test). The DOM side
// (render, Live) is covered by browser.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

// md.js is a browser module outside any package.json that says "module":
// load its text as one.
const src = readFileSync(new URL('../../server/web/assets/md.js', import.meta.url), 'utf8');
const { parseInline, advance } = await import('data:text/javascript,' + encodeURIComponent(src));

test('inline marks', () => {
  const cases = [
    ['plain text', ['plain text']],
    ['a `code` b', ['a ', { code: 'code' }, ' b']],
    ['``a`b``', [{ code: 'a`b' }]],
    ['`` `x` ``', [{ code: '`x`' }]], // one space stripped from each end
    ['` `', [{ code: ' ' }]], // all spaces: kept
    ['```a``', ['```a``']], // no run of three closes it
    ['`a``b`', [{ code: 'a``b' }]],
    ['x ``` y', ['x ``` y']],
    ['**bold** and __also__', [{ strong: ['bold'] }, ' and ', { strong: ['also'] }]],
    ['**a `c` b**', [{ strong: ['a ', { code: 'c' }, ' b'] }]],
    ['__a **b** c__', [{ strong: ['a ', { strong: ['b'] }, ' c'] }]],
    ['*it* * not*', [{ em: ['it'] }, ' * not*']],
    ['**open', ['**open']],
    ['[t](https://e.org/x?y=1) [u](http://a)', [{ link: 't', href: 'https://e.org/x?y=1' }, ' ', { link: 'u', href: 'http://a' }]],
    ['[t](javascript:alert(1))', ['[t](javascript:alert(1))']],
    ['[t](https://)', ['[t](https://)']],
    ['[t](https://a b)', ['[t](https://a b)']],
    ['`**not bold**`', [{ code: '**not bold**' }]],
  ];
  for (const [text, want] of cases) assert.deepEqual(parseInline(text), want, JSON.stringify(text));
});

// The regex md.js used before, less its code spans (whose backtracking made
// it cubic and let a run of n backticks close on n-1): an oracle for bold,
// italics and links, which the scanner keeps exactly.
const OLD = /\*\*([^*\n]+)\*\*|__([^_\n]+)__|\*([^*\s\n][^*\n]*)\*|\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g;
function oldInline(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(OLD)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1] !== undefined || m[2] !== undefined) out.push({ strong: oldInline(m[1] ?? m[2]) });
    else if (m[3] !== undefined) out.push({ em: oldInline(m[3]) });
    else out.push({ link: m[4], href: m[5] });
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

test('bold, italics and links as the old regex had them', () => {
  let seed = 12345;
  const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const atoms = ['*', '*', '_', '_', '[', ']', '(', ')', 'a', 'b', ' ', 'http://', 'https://', 'x.y', '\t'];
  for (let i = 0; i < 20000; i++) {
    let s = '';
    for (let n = rand(24); n > 0; n--) s += atoms[rand(atoms.length)];
    assert.deepEqual(parseInline(s), oldInline(s), JSON.stringify(s));
  }
});

// Lines a model can write that made the old regex (or a naive scanner) take
// quadratic or cubic time: 2,400 backticks took about a second before.
test('linear time on hostile lines', () => {
  const n = 100000;
  const lines = {
    backticks: '`'.repeat(n),
    'backtick pairs': '`a'.repeat(n / 2),
    'runs of every length': Array.from({ length: 440 }, (_, i) => '`'.repeat(i + 1)).join('a'),
    brackets: '['.repeat(n),
    'link openers': '[a](http://'.repeat(n / 11),
    'brackets then a long url': '['.repeat(n / 2) + 'a](https://' + 'x'.repeat(n / 2),
    stars: '*'.repeat(n),
    'star pairs': '**a'.repeat(n / 3),
    underscores: '_a'.repeat(n / 2),
    'italic openers': '*a '.repeat(n / 3),
  };
  for (const [name, text] of Object.entries(lines)) {
    const t0 = performance.now();
    const out = parseInline(text);
    const ms = performance.now() - t0;
    assert.ok(ms < 1000, `${name} (${text.length} chars): ${ms.toFixed(0)} ms`);
    assert.ok(out.length > 0);
  }
  assert.deepEqual(parseInline(lines.backticks), [lines.backticks]);
});

const cuts = (text) => {
  const st = advance({ pos: 0, fence: null, cut: 0 }, text);
  return st.cut;
};

test('stream cuts: after a blank line outside a code fence', () => {
  assert.equal(cuts('para\n\nnext'), 6);
  assert.equal(cuts('para\n  \nnext\n\nmore'), 14);
  assert.equal(cuts('- a\n- b\n'), 0);
  assert.equal(cuts('```\ncode\n\nstill code\n'), 0); // inside an open fence
  assert.equal(cuts('```js\ncode\n\n```\n\nafter'), 17);
  assert.equal(cuts('~~~~\n```\n\n~~~~\n'), 0); // closed, but no blank line since
  assert.equal(cuts('a\r\n\r\nb'), 5);
  assert.equal(cuts('a\rb\n\nc'), 0); // a lone CR: no cuts
  assert.equal(cuts('no newline at all'), 0);
});

test('stream cuts: fed piece by piece as when fed whole', () => {
  const text = '# Title\n\nSome *text*.\n\n```py\nx = 1\n\ny = 2\n```\n\n- a\n- b\n\n> q\n\nend';
  for (const step of [1, 2, 3, 7]) {
    const st = { pos: 0, fence: null, cut: 0 };
    const seen = [];
    for (let i = step; i < text.length + step; i += step) {
      advance(st, text.slice(0, i));
      seen.push(st.cut);
    }
    assert.equal(st.cut, cuts(text), `step ${step}`);
    assert.ok(seen.every((c, i) => i === 0 || c >= seen[i - 1]), 'cuts only move forward');
  }
});
