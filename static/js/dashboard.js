/* The live dashboard: the memory graph (vis-network) and the stream filter.
 * Nothing here fetches on a timer: the graph changes only when the server pushes a delta over
 * the page's websocket (#graph-delta, swapped in by the htmx websocket extension). The only
 * HTTP request is the node detail, when someone clicks a node. */
(function () {
  'use strict';

  var STREAM_MAX = 300;
  var FADE_MS = 1200;
  var COLORS = {
    volatile: { background: '#f2b84b', border: '#b7791f' },
    promoted: { background: '#3fb27f', border: '#1d7a46' }
  };
  var EDGE_COLORS = { similar: '#9aa2ae', supports: '#3fb27f', contradicts: '#e5534b' };

  var nodes, edges, network, fading = {};

  function nodeView(node) {
    var confidence = Math.max(0, node.confidence);
    return {
      id: node.id,
      label: node.label,
      state: node.state,
      color: COLORS[node.state] || COLORS.volatile,
      opacity: node.opacity,
      size: Math.min(30, 8 + 2 * confidence),
      font: { size: 11, color: getComputedStyle(document.body).color }
    };
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
  var limit = 0;

  function showStatus() {
    var status = document.getElementById('graph-status');
    if (!status) return;
    var count = nodes.length - Object.keys(fading).length;
    status.dataset.nodes = String(count);
    status.dataset.edges = String(edges.length);
    status.textContent = count + ' memories, ' + edges.length + ' links' +
      (truncated ? ' (the newest ' + limit + ')' : '');
    var expand = document.getElementById('graph-expand');
    if (expand) expand.hidden = !truncated;
  }

  function applyDelta() {
    var holder = document.getElementById('graph-delta');
    var raw = holder && holder.getAttribute('data-delta');
    if (!raw || !nodes) return;
    holder.removeAttribute('data-delta');
    var delta = JSON.parse(raw);
    delta.removed_edges.forEach(function (id) { edges.remove(id); });
    delta.removed_nodes.forEach(fadeOut);
    delta.nodes.forEach(function (node) {
      if (fading[node.id]) { window.clearInterval(fading[node.id]); delete fading[node.id]; }
    });
    nodes.update(delta.nodes.map(nodeView));
    edges.update(delta.edges.map(edgeView));
    truncated = delta.truncated;
    limit = delta.limit;
    showStatus();
  }

  /* Volatile (short-term) memories pulse: a ring drawn around them on the canvas. */
  function drawPulses(ctx) {
    var phase = (performance.now() % 1600) / 1600;
    var ids = nodes.getIds({ filter: function (n) { return n.state === 'volatile' && !fading[n.id]; } });
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
      interaction: { hover: true, hideEdgesOnDrag: true, tooltipDelay: 300 },
      physics: {
        solver: 'forceAtlas2Based',
        forceAtlas2Based: { gravitationalConstant: -40, springLength: 60, avoidOverlap: 0.2 },
        stabilization: { iterations: 120, updateInterval: 40 },
        maxVelocity: 40,
        minVelocity: 1
      }
    });
    network.on('afterDrawing', drawPulses);
    network.on('click', function (params) {
      if (!params.nodes.length) return;
      var root = document.querySelector('[data-node-url]');
      var url = root.getAttribute('data-node-url').replace(/\/0\/$/, '/' + params.nodes[0] + '/');
      htmx.ajax('GET', url, { target: '#node-detail', swap: 'innerHTML' });
    });
    window.setInterval(function () {
      if (!document.hidden && network) network.redraw();
    }, 80);
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
