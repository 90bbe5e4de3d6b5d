/* Thalamus render.js: Markdown + math + code rendering for chat messages (sets window.ThalamusRender).
 * Markup: <div data-markdown><textarea hidden class="md-src">RAW TEXT</textarea><div class="md-out"></div></div>
 *   The raw Markdown is the textarea's text (Django auto-escapes it); sanitized HTML goes into the .md-out child
 *   (created if missing; anything in it, e.g. a plain-text fallback, is replaced). enhance(root) renders every such host
 *   on DOMContentLoaded and after htmx swaps / ws messages; unchanged text costs nothing, so call it as often as you like.
 *   Load after marked.umd.js, purify.min.js, katex.min.js, highlight.min.js (same order, e.g. all with `defer`). */
(function () {
  'use strict';

  var PH_OPEN = '\uE000';
  var PH_CLOSE = '\uE001';
  var PH_RE = /\uE000(\d+)\uE001/g;
  var KS_ATTR = 'data-thalamus-ks'; // KaTeX inline style, applied through CSSOM (CSP friendly)
  var KS_RE = / data-thalamus-ks="/g;
  var CACHE_MAX = 4000; // entries per cache: more than the blocks of any one long reply, or it thrashes

  // ---------------------------------------------------------------- helpers
  function escapeHtml(s) {
    return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
      .replace(/"/g, '&quot;').replace(/'/g, '&#39;');
  }

  function cacheGet(map, key, make) {
    if (map.has(key)) return map.get(key);
    var v = make();
    if (map.size >= CACHE_MAX) map.clear();
    map.set(key, v);
    return v;
  }

  function isWs(c) { return c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f'; }

  // Only same-origin root-relative images ("/media/x.png") may load; never "//host", "/\host", http:, data:...
  function isLocalSrc(src) {
    if (typeof src !== 'string') return false;
    var s = src.replace(/[\u0000-\u0020\u007f]/g, '');
    if (!/^\/(?![\/\\])/.test(s)) return false;
    try { return new URL(src, window.location.href).origin === window.location.origin; } catch (e) { return false; }
  }

  function shorten(s, max) { return s.length > max ? s.slice(0, max - 1) + '\u2026' : s; }

  // ------------------------------------------------- math protection (pre-Markdown)
  // Splits text into fenced-code and prose segments, replaces math in prose with placeholders.
  // Unclosed fences / $$ / \[ at the very end (streaming) are closed temporarily.
  function protect(text) {
    var maths = [];
    var lines = text.split('\n');
    var segs = [];
    var buf = [];
    var fence = null;
    var FENCE_OPEN = /^([ \t]*(?:>[ \t]?)*[ \t]*)(`{3,}|~{3,})(.*)$/;
    var FENCE_CLOSE = /^[ \t]*(?:>[ \t]?)*[ \t]*(`{3,}|~{3,})[ \t]*$/;
    function flush(code) {
      if (buf.length) segs.push({ code: code, text: buf.join('\n') });
      buf = [];
    }
    for (var li = 0; li < lines.length; li++) {
      var line = lines[li];
      if (!fence) {
        var m = FENCE_OPEN.exec(line);
        if (m && !(m[2].charAt(0) === '`' && m[3].indexOf('`') !== -1)) {
          flush(false);
          fence = { ch: m[2].charAt(0), len: m[2].length, prefix: m[1] };
        }
        buf.push(line);
      } else {
        buf.push(line);
        var c = FENCE_CLOSE.exec(line);
        if (c && c[1].charAt(0) === fence.ch && c[1].length >= fence.len) {
          flush(true);
          fence = null;
        }
      }
    }
    if (fence) {
      buf.push(fence.prefix + new Array(fence.len + 1).join(fence.ch));
      flush(true);
    } else {
      flush(false);
    }

    function ph(tex, display, partial, raw) {
      maths.push({ tex: tex, display: display, partial: partial, raw: raw });
      return PH_OPEN + (maths.length - 1) + PH_CLOSE;
    }

    // position of a run of exactly k backticks at/after `from`, not crossing a blank line
    function backtickClose(s, from, k) {
      var limit = s.indexOf('\n\n', from);
      if (limit === -1) limit = s.length;
      var j = from;
      while (true) {
        j = s.indexOf('`', j);
        if (j === -1 || j >= limit) return -1;
        var e = j;
        while (s.charAt(e) === '`') e++;
        if (e - j === k) return j;
        j = e;
      }
    }

    // Pandoc rules: "$" + non-space ... non-space + "$" not followed by a digit, within a paragraph
    function inlineDollarEnd(s, i) {
      var first = s.charAt(i + 1);
      if (!first || isWs(first)) return -1;
      for (var j = i + 1; j < s.length; j++) {
        var ch = s.charAt(j);
        if (ch === '\\') { j++; continue; }
        if (ch === '\n' && /^\n[ \t]*\n/.test(s.slice(j, j + 40))) return -1;
        if (ch === '$') {
          if (isWs(s.charAt(j - 1)) || /[0-9]/.test(s.charAt(j + 1))) return -1;
          return j;
        }
      }
      return -1;
    }

    function scan(s, isLast) {
      var out = '';
      var i = 0;
      var n = s.length;
      var SPECIAL = /[\\`$]/g;
      while (i < n) {
        SPECIAL.lastIndex = i;
        var sm = SPECIAL.exec(s);
        if (!sm) { out += s.slice(i); break; }
        out += s.slice(i, sm.index);
        i = sm.index;
        var ch = s.charAt(i);
        var j;
        if (ch === '\\') {
          var nx = s.charAt(i + 1);
          if (nx === '(' || nx === '[') {
            var display = nx === '[';
            j = s.indexOf(display ? '\\]' : '\\)', i + 2);
            if (j !== -1 && (display || !/\n[ \t]*\n/.test(s.slice(i + 2, j)))) {
              out += ph(s.slice(i + 2, j), display, false, s.slice(i, j + 2));
              i = j + 2;
              continue;
            }
            if (j === -1 && display && isLast && s.slice(i + 2).trim()) {
              out += ph(s.slice(i + 2), true, true, s.slice(i));
              i = n;
              continue;
            }
          }
          out += s.substr(i, 2);
          i += 2;
          continue;
        }
        if (ch === '`') {
          var e = i;
          while (s.charAt(e) === '`') e++;
          var k = e - i;
          j = backtickClose(s, e, k);
          if (j !== -1) { out += s.slice(i, j + k); i = j + k; } else { out += s.slice(i, e); i = e; }
          continue;
        }
        // ch === '$'
        if (s.charAt(i + 1) === '$') {
          j = s.indexOf('$$', i + 2);
          if (j !== -1 && s.slice(i + 2, j).trim()) {
            out += ph(s.slice(i + 2, j), true, false, s.slice(i, j + 2));
            i = j + 2;
            continue;
          }
          if (j === -1 && isLast && s.slice(i + 2).trim()) {
            out += ph(s.slice(i + 2), true, true, s.slice(i));
            i = n;
            continue;
          }
          out += '$$';
          i += 2;
          continue;
        }
        j = inlineDollarEnd(s, i);
        if (j !== -1) {
          out += ph(s.slice(i + 1, j), false, false, s.slice(i, j + 1));
          i = j + 1;
          continue;
        }
        out += '$';
        i += 1;
      }
      return out;
    }

    var parts = [];
    for (var si = 0; si < segs.length; si++) {
      parts.push(segs[si].code ? segs[si].text : scan(segs[si].text, si === segs.length - 1));
    }
    return { src: parts.join('\n'), maths: maths };
  }

  // ------------------------------------------------------------ KaTeX / hljs
  var katexCache = new Map();
  function mathHtml(m) {
    var key = (m.display ? 'D' : 'I') + (m.partial ? 'P' : 'C') + m.tex;
    return cacheGet(katexCache, key, function () {
      var block = m.display ? ' math-block-src' : '';
      if (!window.katex) return '<span class="math-src' + block + '">' + escapeHtml(m.raw) + '</span>';
      var html;
      try {
        html = window.katex.renderToString(m.tex, {
          displayMode: m.display, throwOnError: m.partial, output: 'htmlAndMathml',
          trust: false, strict: 'ignore', maxSize: 20, maxExpand: 500
        });
      } catch (err) {
        // an incomplete formula while streaming: show its source until it is complete
        return '<span class="math-pending' + block + '">' + escapeHtml(m.tex) + '</span>';
      }
      // KaTeX escapes text content, so ` style="` only occurs as an attribute here.
      return html.replace(/ style="/g, ' ' + KS_ATTR + '="');
    });
  }

  var hlCache = new Map();
  function highlight(code, lang) {
    var hljs = window.hljs;
    return cacheGet(hlCache, (lang || '') + '\u0000' + code, function () {
      try {
        if (lang && hljs.getLanguage(lang)) {
          return { html: hljs.highlight(code, { language: lang, ignoreIllegals: true }).value, lang: lang };
        }
        if (code.length <= 20000) {
          var r = hljs.highlightAuto(code);
          return { html: r.value, lang: r.language || '' };
        }
      } catch (e) { /* fall through to plain text */ }
      return { html: escapeHtml(code), lang: '' };
    });
  }

  // ------------------------------------------------------------- sanitizing
  var URI_RE = /^(?:(?:https?|mailto):|[^a-z]|[a-z+.\-]+(?:[^a-z+.\-:]|$))/i;
  var HTML_TAGS = ['a', 'abbr', 'b', 'blockquote', 'br', 'caption', 'code', 'dd', 'del', 'details', 'div', 'dl',
    'dt', 'em', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr', 'i', 'img', 'ins', 'kbd', 'li', 'mark', 'ol', 'p', 'pre',
    'q', 's', 'samp', 'small', 'span', 'strong', 'sub', 'summary', 'sup', 'table', 'tbody', 'td', 'tfoot', 'th',
    'thead', 'tr', 'u', 'ul', 'var'];
  var HTML_ATTRS = ['href', 'title', 'alt', 'src', 'colspan', 'rowspan', 'align', 'start', 'open', 'class'];
  var GEN_TAGS = ['button', 'svg', 'path', 'line', 'math', 'semantics', 'annotation', 'menclose', 'mfrac', 'mi',
    'mn', 'mo', 'mover', 'mpadded', 'mphantom', 'mroot', 'mrow', 'mspace', 'msqrt', 'mstyle', 'msub', 'msubsup',
    'msup', 'mtable', 'mtd', 'mtext', 'mtr', 'munder', 'munderover', 'mlabeledtr', 'ms'];
  var GEN_ATTRS = ['type', 'aria-label', 'aria-hidden', KS_ATTR, 'accent', 'accentunder', 'columnalign',
    'columnspacing', 'columnlines', 'rowspacing', 'rowlines', 'rowalign', 'depth', 'display', 'displaystyle',
    'encoding', 'fence', 'separator', 'stretchy', 'symmetric', 'largeop', 'movablelimits', 'height', 'width',
    'linethickness', 'lspace', 'rspace', 'mathbackground', 'mathcolor', 'mathsize', 'mathvariant', 'maxsize',
    'minsize', 'notation', 'scriptlevel', 'voffset', 'frame', 'side', 'xmlns', 'viewbox', 'preserveaspectratio',
    'd', 'stroke-width', 'x1', 'y1', 'x2', 'y2'];
  var FORBID = ['script', 'iframe', 'frame', 'frameset', 'object', 'embed', 'applet', 'form', 'input', 'textarea',
    'select', 'option', 'style', 'link', 'meta', 'base', 'template', 'noscript', 'video', 'audio', 'source',
    'picture', 'track', 'canvas', 'portal', 'dialog'];
  var USER_CLASS_RE = /^(?:language-[\w.+#-]+|blocked-image|task-box|task-done)$/;
  var STYLE_PROPS = {
    'height': 1, 'width': 1, 'min-width': 1, 'vertical-align': 1, 'top': 1, 'bottom': 1, 'left': 1, 'right': 1,
    'margin-left': 1, 'margin-right': 1, 'padding-left': 1, 'position': 1, 'border': 1, 'border-width': 1,
    'border-style': 1, 'border-color': 1, 'border-top-width': 1, 'border-bottom-width': 1,
    'border-right-width': 1, 'color': 1, 'background-color': 1
  };

  function cleanStyle(v) {
    var out = [];
    String(v).split(';').forEach(function (decl) {
      var k = decl.indexOf(':');
      if (k < 0) return;
      var prop = decl.slice(0, k).trim().toLowerCase();
      var val = decl.slice(k + 1).trim();
      if (!STYLE_PROPS[prop] || !/^[-+#a-z0-9. %]+$/i.test(val)) return;
      if (prop === 'position' && val !== 'relative') return;
      out.push(prop + ':' + val);
    });
    return out.join(';');
  }

  function blockedImage(img) {
    var doc = img.ownerDocument;
    var span = doc.createElement('span');
    span.className = 'blocked-image';
    span.setAttribute('title', 'External image blocked');
    var alt = (img.getAttribute('alt') || '').trim();
    var src = (img.getAttribute('src') || '').trim();
    span.textContent = '\uD83D\uDDBC image' + (alt ? ': ' + shorten(alt, 120) : '') +
      (src ? ' (' + shorten(src, 100) + ')' : '');
    return span;
  }

  function taskBox(input) {
    var span = input.ownerDocument.createElement('span');
    var done = input.hasAttribute('checked');
    span.className = done ? 'task-box task-done' : 'task-box';
    span.textContent = done ? '\u2611' : '\u2610';
    return span;
  }

  // Runs while DOMPurify walks its inert (never rendered) document: nothing here can fetch anything.
  function elementHook(node, data) {
    var tag = data.tagName;
    var parent = node.parentNode;
    if (!parent) return;
    if (tag === 'img' && !isLocalSrc(node.getAttribute('src'))) {
      parent.replaceChild(blockedImage(node), node);
    } else if (tag === 'input' && (node.getAttribute('type') || '').toLowerCase() === 'checkbox') {
      parent.replaceChild(taskBox(node), node);
    }
  }

  function dropHtmx(data) {
    if (/^(?:data-)?(?:hx|ws)-/i.test(data.attrName)) data.keepAttr = false;
  }

  function linkHook(node) {
    if (node.nodeName === 'A' && node.hasAttribute('href')) {
      if (/^(?:https?:)?\/\//i.test(node.getAttribute('href').trim())) node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer nofollow');
    } else if (node.nodeName === 'IMG') {
      node.setAttribute('loading', 'lazy');
      node.setAttribute('referrerpolicy', 'no-referrer');
    }
  }

  var purifyUser = null; // pass 1: whatever came out of Markdown (includes raw HTML from the model)
  var purifyGen = null;  // pass 2: the same plus KaTeX / highlight.js markup generated by us
  function purifiers() {
    if (purifyUser || !window.DOMPurify) return !!purifyUser;
    purifyUser = window.DOMPurify(window);
    purifyGen = window.DOMPurify(window);
    purifyUser.addHook('uponSanitizeElement', elementHook);
    purifyGen.addHook('uponSanitizeElement', elementHook);
    purifyUser.addHook('uponSanitizeAttribute', function (node, data) {
      dropHtmx(data);
      if (data.keepAttr && data.attrName === 'class') {
        var v = data.attrValue.split(/\s+/).filter(function (c) { return USER_CLASS_RE.test(c); }).join(' ');
        if (v) data.attrValue = v; else data.keepAttr = false;
      }
    });
    purifyGen.addHook('uponSanitizeAttribute', function (node, data) {
      dropHtmx(data);
      if (data.keepAttr && data.attrName === KS_ATTR) {
        var v = cleanStyle(data.attrValue);
        if (v) data.attrValue = v; else data.keepAttr = false;
      }
    });
    purifyUser.addHook('afterSanitizeAttributes', linkHook);
    purifyGen.addHook('afterSanitizeAttributes', linkHook);
    return true;
  }

  var BASE_CFG = {
    ALLOW_DATA_ATTR: false, ALLOW_ARIA_ATTR: false, ALLOW_UNKNOWN_PROTOCOLS: false, ALLOW_SELF_CLOSE_IN_ATTR: false,
    ALLOWED_URI_REGEXP: URI_RE, FORBID_TAGS: FORBID, FORBID_ATTR: ['style', 'id', 'name', 'srcset', 'formaction'],
    KEEP_CONTENT: true, SANITIZE_DOM: true, WHOLE_DOCUMENT: false
  };
  function cfg(extra) {
    var c = {};
    Object.keys(BASE_CFG).forEach(function (k) { c[k] = BASE_CFG[k]; });
    Object.keys(extra).forEach(function (k) { c[k] = extra[k]; });
    return c;
  }
  var USER_CFG = cfg({ ALLOWED_TAGS: HTML_TAGS, ALLOWED_ATTR: HTML_ATTRS });
  var GEN_CFG = cfg({
    ALLOWED_TAGS: HTML_TAGS.concat(GEN_TAGS), ALLOWED_ATTR: HTML_ATTRS.concat(GEN_ATTRS),
    ADD_URI_SAFE_ATTR: [KS_ATTR, 'encoding', 'aria-label']
  });

  // --------------------------------------------------------------- pipeline
  // Raw HTML from the model is shown as text, never parsed: an unclosed <details>, <!-- or
  // <script> would otherwise hide every word after it. Markdown has no HTML blocks here, and an
  // inline tag is plain text (escaped like any text) except <br>, which cannot hide anything.
  var BR_RE = /^<br\s*\/?>/i;
  var NO_RAW_HTML = {
    tokenizer: {
      html: function () { return undefined; },
      tag: function (src) {
        var m = BR_RE.exec(src);
        return m ? { type: 'html', raw: m[0], text: '<br>', block: false, inLink: false, inRawBlock: false }
          : undefined;
      }
    }
  };

  var md = null;
  function marker() {
    if (!md && window.marked && window.marked.Marked) {
      md = new window.marked.Marked({ gfm: true, breaks: false }, NO_RAW_HTML);
    }
    return md;
  }
  function markdown(src) {
    return marker() ? md.parse(src, { async: false }) : '<p>' + escapeHtml(src) + '</p>';
  }

  function closestTag(node, names) {
    for (var n = node.parentNode; n && n.nodeType === 1; n = n.parentNode) {
      if (names.indexOf(n.nodeName) !== -1) return true;
    }
    return false;
  }

  // One inert document (no browsing context: never runs scripts, never fetches) for all DOM work.
  var inertDoc = null;
  function inert() {
    return inertDoc || (inertDoc = document.implementation.createHTMLDocument(''));
  }

  var mathFragCache = new Map();
  function mathFragment(doc, m) {
    var key = (m.display ? 'D' : 'I') + (m.partial ? 'P' : 'C') + m.tex;
    return cacheGet(mathFragCache, key, function () {
      var d = doc.createElement('div');
      d.innerHTML = mathHtml(m);
      var frag = doc.createDocumentFragment();
      while (d.firstChild) frag.appendChild(d.firstChild);
      return frag;
    }).cloneNode(true);
  }

  function restoreAttrs(box, maths) {
    var els = box.querySelectorAll('*');
    for (var i = 0; i < els.length; i++) {
      for (var a = 0; a < els[i].attributes.length; a++) {
        var at = els[i].attributes[a];
        if (at.value.indexOf(PH_OPEN) !== -1) {
          at.value = at.value.replace(PH_RE, function (all, idx) { return maths[+idx] ? maths[+idx].raw : ''; });
        }
      }
    }
  }

  // Post-process pass-1 output in the inert document: math, code highlighting, copy buttons.
  function decorate(box, maths) {
    var doc = box.ownerDocument;
    var i;
    if (maths.length) {
      restoreAttrs(box, maths);
      var walker = doc.createTreeWalker(box, NodeFilter.SHOW_TEXT);
      var texts = [];
      while (walker.nextNode()) if (walker.currentNode.nodeValue.indexOf(PH_OPEN) !== -1) texts.push(walker.currentNode);
      texts.forEach(function (tn) {
        var inCode = closestTag(tn, ['CODE', 'PRE']);
        var frag = doc.createDocumentFragment();
        var v = tn.nodeValue;
        var last = 0;
        v.replace(PH_RE, function (all, idx, off) {
          var m = maths[+idx];
          if (off > last) frag.appendChild(doc.createTextNode(v.slice(last, off)));
          if (!m) frag.appendChild(doc.createTextNode(all));
          else if (inCode) frag.appendChild(doc.createTextNode(m.raw));
          else frag.appendChild(mathFragment(doc, m));
          last = off + all.length;
          return all;
        });
        if (last < v.length) frag.appendChild(doc.createTextNode(v.slice(last)));
        tn.parentNode.replaceChild(frag, tn);
      });
    }

    var pres = box.querySelectorAll('pre');
    for (i = 0; i < pres.length; i++) {
      var pre = pres[i];
      var code = pre.querySelector('code') || pre;
      var lm = /(?:^|\s)language-([\w.+#-]+)/.exec(code.getAttribute('class') || '');
      var lang = lm ? lm[1].toLowerCase() : '';
      var text = code.textContent;
      if (lang === 'math' && window.katex) {
        var mb = doc.createElement('div');
        mb.className = 'math-block';
        mb.appendChild(mathFragment(doc, { tex: text, display: true, partial: false, raw: text }));
        pre.parentNode.replaceChild(mb, pre);
        continue;
      }
      if (window.hljs && code !== pre) {
        var res = highlight(text.replace(/\n$/, ''), lang);
        code.innerHTML = res.html;
        code.setAttribute('class', 'hljs' + (res.lang ? ' language-' + res.lang : ''));
      }
      var btn = doc.createElement('button');
      btn.setAttribute('type', 'button');
      btn.className = 'copy-btn';
      btn.setAttribute('aria-label', 'Copy code');
      btn.textContent = 'Copy';
      pre.appendChild(btn);
    }
  }

  // Pass 2 runs over the whole result, one top-level block at a time (a block parses the same alone
  // as in the body), cached by the block's exact HTML: while streaming only the last block is new.
  var genCache = new Map();
  function sanitizeBlocks(box) {
    var out = '';
    for (var n = box.firstChild; n; n = n.nextSibling) {
      if (n.nodeType === 1) {
        var html = n.outerHTML;
        out += cacheGet(genCache, html, function () { return purifyGen.sanitize(html, GEN_CFG); });
      } else if (n.nodeType === 3) {
        out += escapeHtml(n.nodeValue);
      }
    }
    return out;
  }

  // Markdown HTML -> pass 1 -> math/code decoration -> pass 2.
  function renderChunk(html, maths) {
    var safe = purifyUser.sanitize(html, USER_CFG); // pass 1: everything from Markdown / raw HTML
    var box = inert().createElement('div');
    box.innerHTML = safe;
    decorate(box, maths);
    return sanitizeBlocks(box); // pass 2: the whole result again, now with KaTeX / hljs markup
  }

  // Top-level Markdown blocks are rendered and cached one by one, so re-rendering a growing
  // (streaming) message only does real work for its last block (no raw HTML can span blocks).
  var blockCache = new Map();
  function renderBlocks(src, maths) {
    var m = marker();
    var tokens = null;
    if (m) {
      try { tokens = m.lexer(src); } catch (e) { tokens = null; }
    }
    if (!tokens) return [renderChunk(markdown(src), maths)];
    var links = tokens.links || {};
    var linksKey = Object.keys(links).length ? JSON.stringify(links) : '';
    var groups = [];
    tokens.forEach(function (t) {
      if (t.type === 'space' || t.type === 'def') return;
      var prev = groups[groups.length - 1];
      if (t.type === 'text' && prev && prev[0].type === 'text') prev.push(t); else groups.push([t]);
    });
    return groups.map(function (g) {
      var raw = g.map(function (t) { return t.raw; }).join('');
      var key = raw + '\u0001' + linksKey;
      raw.replace(PH_RE, function (all, idx) {
        var mm = maths[+idx];
        key += '\u0001' + (mm ? (mm.display ? 'D' : 'I') + (mm.partial ? 'P' : 'C') + mm.tex : '');
        return all;
      });
      return cacheGet(blockCache, key, function () {
        var list = g.slice();
        list.links = links;
        return renderChunk(m.parser(list), maths) + '\n';
      });
    });
  }

  // Sanitized HTML, one string per top-level block; KaTeX styles live in data-thalamus-ks.
  function renderParts(text) {
    text = String(text == null ? '' : text).replace(/\r\n?/g, '\n').replace(/[\uE000\uE001]/g, '');
    if (!text.trim()) return [];
    if (!purifiers()) return ['<p class="md-plain">' + escapeHtml(text) + '</p>'];
    var p = protect(text);
    return renderBlocks(p.src, p.maths);
  }

  // Public: a sanitized HTML string (KaTeX layout in ordinary style attributes).
  function render(text) {
    return renderParts(text).join('').replace(KS_RE, ' style="');
  }

  function applyStyles(root) {
    var nodes = root.querySelectorAll('[' + KS_ATTR + ']');
    for (var i = 0; i < nodes.length; i++) {
      nodes[i].style.cssText = nodes[i].getAttribute(KS_ATTR); // CSSOM: allowed under a strict CSP
      nodes[i].removeAttribute(KS_ATTR);
    }
  }

  // Public: render into a live element. Called again with the same text it does nothing; with
  // grown text (streaming) it keeps the DOM of unchanged leading blocks and replaces the rest.
  var STATE = new WeakMap();
  function renderInto(el, text) {
    if (!el) return false;
    // htmx never processes anything inside rendered output (the sanitizer drops hx-* too).
    if (!el.hasAttribute('hx-disable')) el.setAttribute('hx-disable', '');
    text = String(text == null ? '' : text);
    var st = STATE.get(el);
    var ours = !!st && st.first === el.firstChild && st.last === el.lastChild;
    if (ours && st.text === text) return false;
    var parts = renderParts(text);
    var k = 0;
    var nodes = [];
    var j;
    if (ours) {
      while (k < parts.length && k < st.parts.length && parts[k] === st.parts[k]) k++;
      for (j = k; j < st.nodes.length; j++) {
        st.nodes[j].forEach(function (n) { if (n.parentNode === el) el.removeChild(n); });
      }
      nodes = st.nodes.slice(0, k);
    } else {
      el.textContent = '';
    }
    for (j = k; j < parts.length; j++) {
      var tpl = document.createElement('template'); // inert until inserted
      tpl.innerHTML = parts[j];
      applyStyles(tpl.content);
      nodes.push(Array.prototype.slice.call(tpl.content.childNodes));
      el.appendChild(tpl.content);
    }
    STATE.set(el, { text: text, parts: parts, nodes: nodes, first: el.firstChild, last: el.lastChild });
    return true;
  }

  // ---------------------------------------------------------------- enhance
  function renderHost(host) {
    var src = null;
    var out = null;
    for (var c = host.firstElementChild; c; c = c.nextElementSibling) {
      if (!src && c.nodeName === 'TEXTAREA' && c.classList.contains('md-src')) src = c;
      else if (!out && c.classList.contains('md-out')) out = c;
    }
    var text = src ? src.value : host.getAttribute('data-source');
    if (text == null) return;
    if (!out) {
      out = document.createElement('div');
      out.className = 'md-out';
      host.appendChild(out);
    }
    renderInto(out, text);
  }

  function enhance(root) {
    root = root || document.body;
    if (!root || !root.querySelectorAll) return;
    var hosts = [];
    if (root.nodeType === 1) {
      var h = root.closest('[data-markdown]');
      if (h) hosts.push(h);
    }
    var found = root.querySelectorAll('[data-markdown]');
    for (var i = 0; i < found.length; i++) if (hosts.indexOf(found[i]) === -1) hosts.push(found[i]);
    hosts.forEach(function (host) {
      try { renderHost(host); } catch (e) { if (window.console) console.error('ThalamusRender', e); }
    });
  }

  // ------------------------------------------------------------ copy button
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) {
      var ta = document.createElement('textarea');
      ta.value = text;
      ta.setAttribute('readonly', '');
      ta.style.position = 'fixed';
      ta.style.top = '-1000px';
      ta.style.opacity = '0';
      document.body.appendChild(ta);
      ta.select();
      var ok = false;
      try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
      document.body.removeChild(ta);
      if (ok) resolve(); else reject(new Error('copy failed'));
    });
  }

  document.addEventListener('click', function (e) {
    var btn = e.target && e.target.closest ? e.target.closest('button.copy-btn') : null;
    var pre = btn && btn.closest('pre');
    if (!pre) return;
    var code = pre.querySelector('code');
    var text = code ? code.textContent : pre.textContent.replace(/Copy(?:ed)?$/, '');
    function flash(label) {
      btn.textContent = label;
      btn.classList.toggle('copied', label === 'Copied');
      clearTimeout(btn._thalamusTimer);
      btn._thalamusTimer = setTimeout(function () { btn.textContent = 'Copy'; btn.classList.remove('copied'); }, 1500);
    }
    copyText(text).then(function () { flash('Copied'); }, function () { flash('Copy failed'); });
  });

  // ------------------------------------------------------------ htmx wiring
  function onSwap(e) {
    var t = (e.detail && e.detail.target) || e.target;
    if (!t || !t.isConnected) t = e.target && e.target.isConnected ? e.target : document.body;
    enhance(t);
  }
  ['htmx:afterSwap', 'htmx:oobAfterSwap', 'htmx:wsAfterMessage', 'htmx:load'].forEach(function (name) {
    document.addEventListener(name, onSwap);
  });
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', function () { enhance(document.body); });
  } else {
    enhance(document.body);
  }

  window.ThalamusRender = {
    render: render,
    renderInto: renderInto,
    enhance: enhance,
    _protect: protect // exposed for tests
  };
})();
