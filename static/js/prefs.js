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
