// Offline check of a page DVC wrote with .dvc/vega/page.html (no browser, no network):
//   dvc plots show && node .dvc/vega/render_check.js dvc_plots/index.html
// It evaluates the page's inlined libraries, compiles each plot's Vega-Lite spec and renders it
// to SVG (vega-embed does these two steps in the browser), printing the marks drawn per plot.
const fs = require('fs'), vm = require('vm');
const html = fs.readFileSync(process.argv[2], 'utf8');
const scripts = [...html.matchAll(/<script>\/\* ([\w-]+) [\d.]+ \*\/\n([\s\S]*?)\n    <\/script>/g)];
const ctx = {console, setTimeout, clearTimeout, setInterval, clearInterval, queueMicrotask, Promise, URL, TextEncoder, TextDecoder, structuredClone};
ctx.globalThis = ctx; ctx.self = ctx; vm.createContext(ctx);
for (const [, name, code] of scripts) { vm.runInContext(code, ctx); console.log('loaded', name); }
const specs = [...html.matchAll(/var spec = (\{[\s\S]*?\});\n/g)].map(m => JSON.parse(m[1]));
(async () => {
  if (scripts.length !== 3) throw new Error('expected vega, vega-lite and vega-embed inlined');
  if (!specs.length) throw new Error('no plots in the page');
  for (const spec of specs) {
    const vg = ctx.vegaLite.compile(spec).spec;
    const view = new ctx.vega.View(ctx.vega.parse(vg), {renderer: 'none'});
    const svg = await view.toSVG();
    const marks = (svg.match(/<path|<rect|<line|<circle|<text/g) || []).length;
    if (!marks) throw new Error('a plot drew nothing');
    console.log('plot', (spec.title && (spec.title.text || spec.title)) || '', 'svg bytes', svg.length, 'marks', marks, 'rows', spec.data.values.length);
  }
})().catch(e => { console.error('FAIL', e); process.exit(1); });
