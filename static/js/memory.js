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

/* The notice after Wrong, Forget or Confirm: it lasts data-seconds (with its Undo, if any), then
   it goes as if dismissed (a pending Forget then posts its "forget now", whose receipt takes
   the receipt's place). */
(function () {
  'use strict';
  var timer = null;

  function hide(notice) {
    notice.hidden = true;
    notice.removeAttribute('data-seconds');
  }

  function start() {
    var notice = document.getElementById('memory-undo');
    if (!notice || notice.hidden || notice.dataset.started) return;
    var seconds = parseFloat(notice.getAttribute('data-seconds'));
    if (!seconds) return;
    notice.dataset.started = '1';
    clearTimeout(timer);
    timer = setTimeout(function () {
      var dismiss = notice.querySelector('.undo-dismiss');
      if (dismiss && notice.isConnected && !notice.hidden) dismiss.click();
    }, seconds * 1000);
  }

  document.addEventListener('click', function (e) {
    var dismiss = e.target.closest && e.target.closest('#memory-undo .undo-dismiss');
    if (!dismiss) return;
    clearTimeout(timer);
    // A Forget's dismiss posts (htmx); the notice goes either way.
    setTimeout(function () { hide(document.getElementById('memory-undo')); }, 0);
  });

  document.addEventListener('htmx:oobAfterSwap', start);
  document.addEventListener('htmx:afterSettle', start);
  document.addEventListener('DOMContentLoaded', start);
})();

/* What Forget did (memory/_receipt.html) goes by itself after a while, or at its ×: it never
   stays over the chat or the list. */
(function () {
  'use strict';
  var SECONDS = 12;
  var timer = null;

  function close() {
    var receipt = document.getElementById('forget-receipt');
    if (receipt) receipt.replaceChildren();
  }

  function start() {
    var receipt = document.getElementById('forget-receipt');
    if (!receipt || !receipt.querySelector('.receipt-close') || receipt.dataset.started) return;
    receipt.dataset.started = '1';
    clearTimeout(timer);
    timer = setTimeout(close, SECONDS * 1000);
  }

  document.addEventListener('click', function (e) {
    if (!e.target.closest || !e.target.closest('#forget-receipt .receipt-close')) return;
    clearTimeout(timer);
    close();
  });
  document.addEventListener('htmx:oobAfterSwap', start);
  document.addEventListener('htmx:afterSettle', start);
  document.addEventListener('DOMContentLoaded', start);
})();

/* The filters are folded on a phone (the page is drawn that way) and open on a wider screen. */
(function () {
  'use strict';

  var WIDE = '(min-width: 601px)';

  function unfoldWhenWide() {
    var fold = document.getElementById('memory-filters-fold');
    if (fold && window.matchMedia(WIDE).matches) fold.open = true;
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', unfoldWhenWide);
  } else {
    unfoldWhenWide();
  }
})();
