/* Page preferences kept per user (apps/accounts): the header's theme switch applies the theme at
 * once and saves it; on a page whose user never chose a time zone, the browser's is sent once. */
(function () {
  'use strict';

  function csrf(form) { return form.querySelector('input[name="csrfmiddlewaretoken"]').value; }

  function applyTheme(theme) {
    document.documentElement.setAttribute('data-theme', theme);
    document.querySelectorAll('link[data-scheme]').forEach(function (link) {
      var scheme = link.getAttribute('data-scheme');
      link.media = theme === 'system' ? '(prefers-color-scheme: ' + scheme + ')'
        : (theme === scheme ? 'all' : 'not all');
    });
  }

  document.addEventListener('change', function (e) {
    if (!e.target.matches('#theme-choice')) return;
    var form = e.target.form;
    applyTheme(e.target.value);
    fetch(form.action, {
      method: 'POST', body: new FormData(form), credentials: 'same-origin',
      headers: { 'X-Requested-With': 'fetch', 'X-CSRFToken': csrf(form) }
    });
  });

  document.addEventListener('DOMContentLoaded', function () {
    var url = document.body.getAttribute('data-time-zone-url');
    var zone = window.Intl && Intl.DateTimeFormat().resolvedOptions().timeZone;
    var form = document.getElementById('theme-switch');
    if (!url || !zone || !form) return;
    var body = new FormData();
    body.append('time_zone', zone);
    fetch(url, {
      method: 'POST', body: body, credentials: 'same-origin', headers: { 'X-CSRFToken': csrf(form) }
    }).then(function (response) {
      if (response.ok) document.body.removeAttribute('data-time-zone-url');
    });
  });
})();

/* The "Details" toggle (templates/_details_toggle.html): timings, routes and raw fields
 * (.details-only) are hidden until it is pressed; the choice is kept in this browser. */
(function () {
  'use strict';
  var KEY = 'thalamus-details';

  function stored() {
    try { return window.localStorage.getItem(KEY) === 'on'; } catch (e) { return false; }
  }

  function show(on) {
    if (on) document.documentElement.setAttribute('data-details', 'on');
    else document.documentElement.removeAttribute('data-details');
    document.querySelectorAll('[data-details-toggle]').forEach(function (button) {
      button.setAttribute('aria-pressed', on ? 'true' : 'false');
    });
  }

  show(stored());
  document.addEventListener('DOMContentLoaded', function () { show(stored()); });
  document.addEventListener('click', function (e) {
    if (!e.target.closest || !e.target.closest('[data-details-toggle]')) return;
    var on = document.documentElement.getAttribute('data-details') !== 'on';
    try { window.localStorage.setItem(KEY, on ? 'on' : 'off'); } catch (err) { /* private mode */ }
    show(on);
  });
})();

/* Notices (templates/base.html's messages, the chat's #chat-notice): each closes at its ×, and
 * one with data-seconds goes by itself; the chat's stays on the page, empty, for the next. */
(function () {
  'use strict';

  function close(notice) {
    if (!notice || !notice.isConnected) return;
    if (notice.id) { notice.replaceChildren(); return; }
    var list = notice.parentElement;
    notice.remove();
    if (list && !list.children.length) list.remove();
  }

  function timeNotices() {
    document.querySelectorAll('[data-seconds]:not([data-timed])').forEach(function (notice) {
      if (!notice.querySelector('[data-close-notice]')) return;
      notice.setAttribute('data-timed', '');
      window.setTimeout(function () { close(notice); }, Number(notice.getAttribute('data-seconds')) * 1000);
    });
  }

  document.addEventListener('click', function (e) {
    var button = e.target.closest && e.target.closest('[data-close-notice]');
    if (button) close(button.closest('li, .chat-notice'));
  });
  document.addEventListener('DOMContentLoaded', timeNotices);
  document.addEventListener('htmx:oobAfterSwap', timeNotices);
  document.addEventListener('htmx:wsAfterMessage', timeNotices);
})();
