/* Memory browser: select all, and the "Forget selected" button only when something is picked. */
(function () {
  'use strict';

  function boxes() {
    return document.querySelectorAll('input[type=checkbox][form="bulk-forget"]');
  }

  function refresh() {
    var button = document.getElementById('forget-selected');
    if (!button) return;
    var picked = Array.prototype.filter.call(boxes(), function (box) { return box.checked; });
    button.disabled = picked.length === 0;
    button.textContent = picked.length ? 'Forget ' + picked.length + ' selected' : 'Forget selected';
  }

  document.addEventListener('change', function (e) {
    if (e.target.id === 'select-all') {
      boxes().forEach(function (box) { box.checked = e.target.checked; });
    }
    refresh();
  });

  document.addEventListener('submit', function (e) {
    if (e.target.id !== 'bulk-forget') return;
    var count = Array.prototype.filter.call(boxes(), function (box) { return box.checked; }).length;
    if (!window.confirm('Forget ' + count + ' memor' + (count === 1 ? 'y' : 'ies') + '? This cannot be undone.')) {
      e.preventDefault();
    }
  });

  document.addEventListener('htmx:afterSwap', refresh);
  document.addEventListener('DOMContentLoaded', refresh);
})();
