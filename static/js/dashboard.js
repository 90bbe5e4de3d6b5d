/* The live dashboard: the memory graph (vis-network) and the stream filter.
 * Nothing here fetches on a timer: the graph changes only when the server pushes a delta over
 * the page's websocket (#graph-delta, swapped in by the htmx websocket extension). The only
 * HTTP request is the node detail, when someone chooses a node (in the graph or its list).
 * Labels are drawn for the chosen and the hovered node only: a label per node overlapped.
 * The list beside the canvas names every node, reachable by keyboard. */
(function () {
  'use strict';

  var STREAM_MAX = 300;
  var FADE_MS = 1200;
  var PULSE_MAX = 150;  // rings are drawn every frame: only the newest short-term memories pulse
  var COLORS = {
    volatile: { background: '#f2b84b', border: '#b7791f' },
    promoted: { background: '#3fb27f', border: '#1d7a46' }
  };
  var EDGE_COLORS = { similar: '#9aa2ae', supports: '#3fb27f', contradicts: '#e5534b' };

  var nodes, edges, network, fading = {}, pulsing = [];
  var chosen = null, hovered = null;
  var STATE_WORDS = { volatile: 'short-term', promoted: 'long-term', quarantined: 'awaiting approval' };

  function nodeView(node) {
    var confidence = Math.max(0, node.confidence);
    return {
      id: node.id,
      text: node.label,
      state: node.state,
      color: COLORS[node.state] || COLORS.volatile,
      opacity: node.opacity,
      size: Math.min(30, 8 + 2 * confidence)
    };
  }

  /* The chosen and the hovered node's words, under the node, on the page's own background. */
  function drawLabels(ctx) {
    var style = getComputedStyle(document.body);
    [chosen, hovered].forEach(function (id, index) {
      if (id === null || (index === 1 && id === chosen)) return;
      var node = nodes.get(id);
      var p = node && network.getPositions([id])[id];
      if (!p || !node.text) return;
      var scale = network.getScale();
      var text = node.text.length > 60 ? node.text.slice(0, 59) + '…' : node.text;
      ctx.save();
      ctx.font = (13 / scale) + 'px ' + style.fontFamily;
      var width = ctx.measureText(text).width;
      var pad = 4 / scale;
      var y = p.y + node.size + 6 / scale;
      ctx.fillStyle = style.backgroundColor;
      ctx.globalAlpha = 0.9;
      ctx.fillRect(p.x - width / 2 - pad, y - pad, width + 2 * pad, 13 / scale + 2 * pad);
      ctx.globalAlpha = 1;
      ctx.fillStyle = style.color;
      ctx.textAlign = 'center';
      ctx.textBaseline = 'top';
      ctx.fillText(text, p.x, y);
      ctx.restore();
    });
  }

  function choose(id, fromList) {
    chosen = id;
    var root = document.querySelector('[data-node-url]');
    var url = root.getAttribute('data-node-url').replace(/\/0\/$/, '/' + id + '/');
    htmx.ajax('GET', url, { target: '#node-detail', swap: 'innerHTML' });
    network.selectNodes([id]);
    if (fromList) network.focus(id, { animation: { duration: 300 } });
    network.redraw();
    document.querySelectorAll('#graph-list button[aria-current]').forEach(function (b) {
      b.removeAttribute('aria-current');
    });
    var button = document.querySelector('#graph-list button[data-node="' + id + '"]');
    if (button) button.setAttribute('aria-current', 'true');
  }

  /* Every node the graph shows, newest first, as buttons a keyboard reaches. */
  function renderList() {
    var list = document.getElementById('graph-list');
    if (!list) return;
    var shown = nodes.get({ filter: function (n) { return !fading[n.id]; } })
      .sort(function (a, b) { return b.id - a.id; });
    var fragment = document.createDocumentFragment();
    shown.forEach(function (node) {
      var item = document.createElement('li');
      var button = document.createElement('button');
      button.type = 'button';
      button.className = 'graph-item';
      button.dataset.node = String(node.id);
      if (node.id === chosen) button.setAttribute('aria-current', 'true');
      var dot = document.createElement('i');
      dot.className = 'dot ' + node.state;
      dot.setAttribute('aria-hidden', 'true');
      var words = document.createElement('span');
      words.className = 'graph-item-text';
      words.textContent = node.text || ('#' + node.id);
      var state = document.createElement('span');
      state.className = 'sr-only';
      state.textContent = ' (' + (STATE_WORDS[node.state] || node.state) + ')';
      button.append(dot, words, state);
      item.append(button);
      fragment.append(item);
    });
    list.replaceChildren(fragment);
  }

  function edgeView(edge) {
    return {
      id: edge.id,
      from: edge.from,
      to: edge.to,
      kind: edge.kind,
      color: { color: EDGE_COLORS[edge.kind] || EDGE_COLORS.similar, opacity: 0.7 },
      dashes: edge.kind === 'contradicts',
      width: 1 + 2 * Math.max(0, Math.min(1, edge.score))
    };
  }

  function fadeOut(id) {
    if (fading[id] || !nodes.get(id)) return;
    var started = performance.now();
    fading[id] = window.setInterval(function () {
      var left = 1 - (performance.now() - started) / FADE_MS;
      if (left <= 0 || !nodes.get(id)) {
        window.clearInterval(fading[id]);
        delete fading[id];
        nodes.remove(id);
        showStatus();
        return;
      }
      nodes.update({ id: id, opacity: Math.max(0.05, left * 0.8), size: 6 });
    }, 60);
  }

  var truncated = false;
  var fitted = false;
  var limit = 0;

  function showStatus() {
    var status = document.getElementById('graph-status');
    if (!status) return;
    var count = nodes.length - Object.keys(fading).length;
    status.dataset.nodes = String(count);
    status.dataset.edges = String(edges.length);
    status.textContent = count + (count === 1 ? ' memory, ' : ' memories, ') +
      edges.length + (edges.length === 1 ? ' link' : ' links') +
      (truncated ? ' (the newest ' + limit + ')' : '');
    var expand = document.getElementById('graph-expand');
    if (expand) expand.hidden = !truncated;
    renderList();
  }

  function applyDelta() {
    var holder = document.getElementById('graph-delta');
    var raw = holder && holder.getAttribute('data-delta');
    if (!raw || !nodes) return;
    holder.removeAttribute('data-delta');
    var delta = JSON.parse(raw);
    var status = document.getElementById('graph-status');
    if (delta.nodes.length || delta.edges.length || delta.removed_nodes.length) {
      status.dataset.settled = 'false';  // until physics reports 'stabilized'
    }
    delta.removed_edges.forEach(function (id) { edges.remove(id); });
    delta.removed_nodes.forEach(fadeOut);
    delta.nodes.forEach(function (node) {
      if (fading[node.id]) { window.clearInterval(fading[node.id]); delete fading[node.id]; }
    });
    nodes.update(delta.nodes.map(nodeView));
    edges.update(delta.edges.map(edgeView));
    pulsing = nodes.getIds({ filter: function (n) { return n.state === 'volatile'; } })
      .sort(function (a, b) { return b - a; }).slice(0, PULSE_MAX);
    truncated = delta.truncated;
    limit = delta.limit;
    showStatus();
    if (!fitted && nodes.length) {
      // Without a blocking stabilisation nothing fits the first view: do it once, when the
      // layout has settled (or been stopped).
      fitted = true;
      network.fit();
      network.once('stabilized', function () { network.fit(); });
    }
  }

  /* Volatile (short-term) memories pulse: a ring drawn around them on the canvas. */
  function drawPulses(ctx) {
    var phase = (performance.now() % 1600) / 1600;
    var ids = pulsing.filter(function (id) { return !fading[id]; });
    if (!ids.length) return;
    var positions = network.getPositions(ids);
    ctx.save();
    ctx.lineWidth = 2;
    ctx.strokeStyle = 'rgba(242, 184, 75,' + (0.7 * (1 - phase)).toFixed(2) + ')';
    ids.forEach(function (id) {
      var p = positions[id];
      var node = nodes.get(id);
      if (!p || !node) return;
      ctx.beginPath();
      ctx.arc(p.x, p.y, node.size + 3 + 10 * phase, 0, 2 * Math.PI);
      ctx.stroke();
    });
    ctx.restore();
  }

  function startGraph() {
    var container = document.getElementById('graph');
    if (!container || !window.vis) return;
    nodes = new vis.DataSet([]);
    edges = new vis.DataSet([]);
    network = new vis.Network(container, { nodes: nodes, edges: edges }, {
      autoResize: true,
      layout: { improvedLayout: false },
      nodes: { shape: 'dot', borderWidth: 1 },
      edges: { smooth: false, selectionWidth: 2 },
      interaction: { hover: true, hideEdgesOnDrag: true, hideEdgesOnZoom: true },
      physics: {
        solver: 'barnesHut',
        barnesHut: { gravitationalConstant: -2500, springLength: 70, damping: 0.3, theta: 0.9 },
        // No blocking stabilisation: the layout settles on screen, frame by frame, so the
        // page stays usable while thousands of nodes find their places.
        stabilization: { enabled: false },
        maxVelocity: 40,
        minVelocity: 1
      }
    });
    network.on('afterDrawing', drawPulses);
    network.on('afterDrawing', drawLabels);
    network.on('click', function (params) {
      if (params.nodes.length) choose(params.nodes[0], false);
    });
    network.on('hoverNode', function (params) { hovered = params.node; network.redraw(); });
    network.on('blurNode', function () { hovered = null; network.redraw(); });
    document.getElementById('graph-list').addEventListener('click', function (e) {
      var button = e.target.closest('button[data-node]');
      if (button) choose(Number(button.dataset.node), true);
    });
    var settling = true;
    var status = document.getElementById('graph-status');
    network.on('startStabilizing', function () {
      settling = true;
      status.dataset.settled = 'false';
      // A big graph's physics costs the page most of each frame; its shape is clear after
      // a few seconds, so stop there rather than let it jiggle towards perfect.
      window.clearTimeout(network.settleTimer);
      network.settleTimer = window.setTimeout(function () {
        if (nodes.length > 500) network.stopSimulation();
      }, 3000);
    });
    network.on('stabilized', function () {
      settling = false;
      status.dataset.settled = 'true';
    });
    // The pulse needs redraws; a big graph's redraw is costly, so the next one waits eight
    // times as long as the last took: the animation never takes more than ~1/9 of the page.
    (function pulse() {
      var wait = 100;
      if (!document.hidden && !settling && pulsing.length) {
        var started = performance.now();
        network.redraw();
        wait = Math.max(100, 8 * (performance.now() - started));
      }
      window.setTimeout(pulse, wait);
    })();
    applyDelta();
  }

  function filterStream() {
    var select = document.getElementById('stream-filter');
    var wanted = select ? select.value : '';
    var items = document.querySelectorAll('#mind-stream > li');
    items.forEach(function (li, index) {
      if (index >= STREAM_MAX) { li.remove(); return; }
      li.hidden = !!wanted && li.getAttribute('data-kind') !== wanted;
    });
    var empty = document.getElementById('stream-empty');
    if (empty && items.length) empty.remove();
  }

  document.addEventListener('change', function (e) {
    if (e.target.id === 'stream-filter') filterStream();
    if (e.target.id === 'dash-who') e.target.form.requestSubmit();
  });
  document.addEventListener('htmx:wsAfterMessage', function () {
    applyDelta();
    filterStream();
  });
  document.addEventListener('htmx:wsOpen', function () {
    var dot = document.getElementById('live-status');
    if (dot) dot.classList.add('on');
  });
  document.addEventListener('htmx:wsClose', function () {
    var dot = document.getElementById('live-status');
    if (dot) dot.classList.remove('on');
  });
  document.addEventListener('DOMContentLoaded', function () {
    startGraph();
    filterStream();
  });
})();
