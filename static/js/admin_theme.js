/* The admin follows the theme the user chose on the site (apps/accounts UserSettings.theme):
 * Django's admin/js/theme.js, loaded next, reads it from localStorage. A click on the admin's
 * own theme switch is saved as the user's theme, so the site and the admin stay alike. */
(function () {
  'use strict';

  var script = document.currentScript;
  var toAdmin = { system: 'auto', light: 'light', dark: 'dark' };
  var toSite = { auto: 'system', light: 'light', dark: 'dark' };
  localStorage.setItem('theme', toAdmin[script.getAttribute('data-theme')] || 'auto');

  var saveUrl = script.getAttribute('data-save-url');
  if (!saveUrl) return;

  function save() {
    var token = document.querySelector('input[name="csrfmiddlewaretoken"]');
    var theme = toSite[localStorage.getItem('theme')];
    if (!token || !theme) return;
    var body = new FormData();
    body.append('theme', theme);
    fetch(saveUrl, {
      method: 'POST', body: body, credentials: 'same-origin',
      headers: { 'X-Requested-With': 'fetch', 'X-CSRFToken': token.value }
    });
  }

  window.addEventListener('load', function () {
    document.querySelectorAll('.theme-toggle').forEach(function (button) {
      // After theme.js's own handler has stored the next theme.
      button.addEventListener('click', function () { setTimeout(save, 0); });
    });
  });
})();
