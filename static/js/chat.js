/* Chat page behaviour that needs a script: Enter to send, keep the newest message in view,
 * focus the composer when it comes back, mark the open conversation in the sidebar. */
(function () {
  'use strict';

  function app() { return document.querySelector('.app'); }

  function markActive() {
    var root = app();
    var id = root && root.getAttribute('data-conversation');
    document.querySelectorAll('.conv-item').forEach(function (li) {
      li.classList.toggle('active', !!id && li.id === 'conv-' + id);
    });
  }

  function nearBottom(list) {
    return list.scrollHeight - list.scrollTop - list.clientHeight < 120;
  }

  function scrollToEnd(force) {
    var list = document.getElementById('messages');
    if (list && (force || nearBottom(list))) list.scrollTop = list.scrollHeight;
  }

  document.addEventListener('keydown', function (e) {
    var box = e.target;
    if (e.key !== 'Enter' || e.shiftKey || e.isComposing) return;
    if (!box.matches || !box.matches('#composer textarea')) return;
    e.preventDefault();
    if (box.value.trim() && !box.disabled) box.form.requestSubmit();
  });

  var pinned = true;
  document.addEventListener('htmx:wsBeforeMessage', function () {
    var list = document.getElementById('messages');
    pinned = !list || nearBottom(list);
  });
  document.addEventListener('htmx:wsAfterMessage', function () {
    if (pinned) scrollToEnd(true);
    markActive();
    var box = document.querySelector('#composer textarea');
    if (box && !box.disabled && document.activeElement === document.body) box.focus();
  });
  document.addEventListener('htmx:afterSwap', markActive);

  document.addEventListener('DOMContentLoaded', function () {
    markActive();
    scrollToEnd(true);
    var box = document.querySelector('#composer textarea');
    if (box && !box.disabled) box.focus();
  });
})();
