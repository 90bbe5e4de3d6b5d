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

  /* The room the chat model's window leaves a message (templates/chat/_room.html), counted
   * as the server counts it: characters over the model's characters per token. Past it, Send
   * is disabled and the box is invalid, so Enter does not send either; the server refuses such
   * a message too. */
  function tokensText(n) { return Number(n).toLocaleString('en-US'); }

  function checkRoom() {
    var room = document.getElementById('composer-room');
    var box = document.querySelector('#composer textarea');
    if (!room || !box) return;
    var tokens = Number(room.getAttribute('data-tokens'));
    var ratio = Number(room.getAttribute('data-chars-per-token')) || 3.2;
    var text = box.value.replace(/\r\n/g, '\n').trim();
    var length = Array.from(text).length;
    var over = Math.ceil(length / ratio) > tokens;
    // Said in characters, which the writer counts in; the limit itself is the model's tokens.
    var total = Math.floor(tokens * ratio);
    var refusal = over ? 'Your message is about ' + tokensText(length - total) +
      ' characters too long for this model.' : '';
    if (over) room.textContent = refusal + ' Shorten it to send it.';
    else if (length) room.textContent = 'About ' + tokensText(Math.max(total - length, 0)) + ' of ' + tokensText(total) + ' characters left.';
    else room.textContent = 'Room for about ' + tokensText(total) + ' characters.';
    room.classList.toggle('over', over);
    box.setCustomValidity(refusal);
    var send = box.form.querySelector('button[type="submit"]');
    if (send) send.disabled = over;
  }
  document.addEventListener('input', function (e) {
    if (e.target.matches && e.target.matches('#composer textarea')) checkRoom();
  });

  /* Sending brings the new exchange into view wherever the list was scrolled (`sentAt`: how
   * many messages there were when it was sent); after that the list follows the answer only
   * while it is read at the bottom, and "Jump to latest" offers the way down otherwise. */
  var pinned = true;
  var sentAt = -1;
  function messageCount() { return document.querySelectorAll('#messages > .msg').length; }
  document.addEventListener('submit', function (e) {
    if (e.target.matches('#composer, .revise-form, .regenerate-form')) sentAt = messageCount();
  });
  document.addEventListener('htmx:wsBeforeMessage', function () {
    var list = document.getElementById('messages');
    pinned = !list || nearBottom(list);
  });
  document.addEventListener('htmx:wsAfterMessage', function () {
    if (sentAt >= 0 && messageCount() !== sentAt) {
      sentAt = -1;
      scrollToEnd(true);
    } else if (pinned) {
      scrollToEnd(true);
    }
    showJump();
    localTimes();
    markActive();
    checkRoom();
    var box = document.querySelector('#composer textarea');
    if (box && !box.disabled && document.activeElement === document.body) box.focus();
  });
  document.addEventListener('htmx:afterSwap', markActive);
  /* A title pushed from elsewhere (the worker's, another page's rename) names the tab too. */
  document.addEventListener('htmx:oobAfterSwap', function (e) {
    var title = e.target && e.target.id === 'chat-title' && e.target.getAttribute('data-tab-title');
    if (title) document.title = title;
  });

  /* A pushed answer's "What I used" panel is read from the server when it is first opened
   * (templates/chat/_trace.html): not when it closes, and not again once drawn. One that could
   * not be read says so, and is asked for again at its next opening. */
  function lazyPanel(e) {
    var panel = e.detail && e.detail.elt;
    return panel && panel.matches && panel.matches('details.trace[hx-get]') ? panel : null;
  }
  document.addEventListener('htmx:beforeRequest', function (e) {
    var panel = lazyPanel(e);
    if (panel && (!panel.open || panel.hasAttribute('data-drawn'))) e.preventDefault();
  });
  document.addEventListener('htmx:afterRequest', function (e) {
    var panel = lazyPanel(e);
    if (!panel) return;
    if (e.detail.successful) {
      panel.setAttribute('data-drawn', '');
    } else {
      panel.querySelector('.trace-lazy').innerHTML =
        '<p class="turn-error">Could not load this. Close it and open it again to retry.</p>';
    }
  });
  /* Edit or delete a message (templates/chat/_message.html): Cancel (Keep) folds the box and
   * puts the text back as it was. */
  document.addEventListener('click', function (e) {
    var cancel = e.target.closest && e.target.closest('[data-edit-cancel]');
    if (!cancel) return;
    var edit = cancel.closest('details');
    cancel.form.reset();
    if (edit) edit.open = false;
  });
  // Without a script the search box submits its form; with one, htmx searches as you type.
  document.addEventListener('submit', function (e) {
    if (e.target.matches('.conv-search-form')) e.preventDefault();
    // The home composer's first message: the conversation page sends it over its socket.
    var live = e.target.querySelector('input[name="live"]');
    if (live) live.value = '1';
  });

  /* The live connection. While it is down a notice says so (the extension reconnects by itself
   * after a drop, and holds what is sent meanwhile); once it is back, the messages and the
   * composer with its Stop button are read again, since the fragments pushed in between never
   * arrived. */
  var RECONNECTING = [1006, 1011, 1012, 1013];  // the close codes htmx's ws extension retries
  // The extension's backoff (full jitter) grows to a minute; after a restart the page should be
  // back within seconds.
  htmx.config.wsReconnectDelay = function (retries) {
    return Math.random() * Math.min(1000 * Math.pow(2, retries), 5000);
  };
  var dropped = false;
  var noticeTimer = null;

  function offlineNotice(text) {
    var notice = document.getElementById('chat-offline');
    if (!notice) return;
    notice.textContent = text || '';
    notice.hidden = !text;
  }

  document.addEventListener('htmx:wsOpen', function (e) {
    window.clearTimeout(noticeTimer);
    e.target.setAttribute('data-live', 'on');
    offlineNotice('');
    var first = document.querySelector('#composer[data-autosend]');
    if (first) {
      first.removeAttribute('data-autosend');
      if (first.elements.content.value.trim()) first.requestSubmit();
    }
    if (!dropped) return;
    dropped = false;
    htmx.ajax('GET', window.location.pathname, {
      target: '#messages', select: '#messages', swap: 'outerHTML', selectOOB: '#composer-box'
    });
  });
  document.addEventListener('htmx:wsClose', function (e) {
    var section = e.target;
    section.setAttribute('data-live', 'off');
    dropped = true;
    var code = e.detail && e.detail.event ? e.detail.event.code : 0;
    window.clearTimeout(noticeTimer);
    if (RECONNECTING.indexOf(code) < 0) {
      offlineNotice('The live connection was closed. Reload the page to go on.');
      return;
    }
    // Leaving the page closes the socket too: only a drop that lasts is worth a notice.
    noticeTimer = window.setTimeout(function () {
      if (section.getAttribute('data-live') === 'off') {
        offlineNotice('Connection lost. Reconnecting\u2026 What you send meanwhile goes out once it is back.');
      }
    }, 1000);
  });

  /* "Jump to latest": shown while an answer streams below what the list shows. */
  function showJump() {
    var list = document.getElementById('messages');
    var jump = document.getElementById('jump-latest');
    if (!list || !jump) return;
    jump.hidden = nearBottom(list) || !list.querySelector('.msg.streaming');
  }
  document.addEventListener('scroll', function (e) {
    if (e.target.id === 'messages') showJump();
  }, true);
  document.addEventListener('click', function (e) {
    if (!e.target.closest || !e.target.closest('#jump-latest')) return;
    scrollToEnd(true);
    showJump();
  });

  /* When each message was written, in the user's time zone (the page's data-time-zone; the
   * server's text stays for a message pushed before the page knew it). */
  function localTimes() {
    var root = app();
    var zone = root && root.getAttribute('data-time-zone');
    if (!zone || !window.Intl) return;
    var short = new Intl.DateTimeFormat('en-GB', {
      timeZone: zone, weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit'
    });
    var full = new Intl.DateTimeFormat('en-GB', { timeZone: zone, dateStyle: 'full', timeStyle: 'long' });
    document.querySelectorAll('time.msg-time:not([data-local])').forEach(function (time) {
      var when = new Date(time.getAttribute('datetime'));
      if (isNaN(when)) return;
      time.textContent = short.format(when);
      time.title = full.format(when);
      time.setAttribute('data-local', '');
    });
  }

  /* Copy on every message: an answer's Markdown as written, a message of the user's as typed. */
  document.addEventListener('click', function (e) {
    var button = e.target.closest && e.target.closest('[data-action="copy"]');
    if (!button) return;
    var message = button.closest('.msg');
    var source = message.querySelector('.md-src');
    var text = source ? source.value : message.querySelector('.msg-body').innerText;
    navigator.clipboard.writeText(text.trim()).then(function () {
      button.textContent = 'Copied';
    }, function () {
      button.textContent = 'Copy failed';
    }).then(function () {
      window.setTimeout(function () { button.textContent = 'Copy'; }, 1500);
    });
  });

  /* Keyboard shortcuts, listed in the "?" popover (templates/chat/_shortcuts.html). */
  function typing(target) {
    return target.matches && target.matches('input, textarea, select, [contenteditable]');
  }
  function composerBox() { return document.querySelector('#composer textarea'); }
  function editLast() {
    var mine = document.querySelectorAll('#messages > .msg-user');
    var last = mine.length ? mine[mine.length - 1] : null;
    var edit = last && last.querySelector('[data-action="edit"]');
    if (!edit) return false;
    var details = edit.closest('details');
    if (details && !details.open) edit.click();
    var box = last.querySelector('details[open] textarea');
    if (box) {
      box.focus();
      box.setSelectionRange(box.value.length, box.value.length);
    }
    last.scrollIntoView({ block: 'nearest' });
    return true;
  }
  document.addEventListener('keydown', function (e) {
    if (e.isComposing || e.defaultPrevented) return;
    var help = document.getElementById('shortcuts-help');
    var helpOpen = help && help.matches(':popover-open');
    var mod = e.ctrlKey || e.metaKey;
    if (mod && e.shiftKey && !e.altKey && (e.key === 'O' || e.key === 'o')) {
      var start = document.querySelector('.new-conversation');
      e.preventDefault();
      if (start) start.requestSubmit();
      else window.location.assign('/');
      return;
    }
    if (e.key === 'Escape' && e.shiftKey && !mod) {
      var box = composerBox();
      if (box && !box.disabled) { e.preventDefault(); box.focus(); }
      return;
    }
    // Esc in an open Edit (or Delete) under a message folds it, its text put back as it was.
    var editing = e.key === 'Escape' && !mod && !e.shiftKey && e.target.closest &&
      e.target.closest('details.msg-edit[open], details.msg-delete[open]');
    if (editing) {
      e.preventDefault();
      var form = editing.querySelector('form');
      if (form) form.reset();
      editing.open = false;
      editing.querySelector('summary').focus();
      return;
    }
    if (e.key === 'Escape' && !helpOpen && !mod) {
      var stop = document.querySelector('form#stop-form');
      if (stop) { e.preventDefault(); stop.requestSubmit(); }
      return;
    }
    if (e.key === 'ArrowUp' && !mod && !e.shiftKey && !e.altKey && e.target === composerBox() &&
        !e.target.value) {
      if (editLast()) e.preventDefault();
      return;
    }
    if (e.key === '?' && !mod && help && !typing(e.target)) {
      e.preventDefault();
      help.togglePopover();
    }
  });

  /* Delete under a message (templates/chat/_message.html) waits a few seconds with an Undo
   * before it is sent: the message and what follows it are hidden meanwhile. Closing the page
   * in between sends nothing, so nothing is lost. */
  var DELETE_SECONDS = 6;
  var pendingDelete = null;

  function deleteNotice() { return document.getElementById('message-undo'); }

  function shownAgain(pending) {
    pending.hidden.forEach(function (el) { el.hidden = false; });
    var details = pending.form.closest('details');
    if (details) details.open = false;
  }

  function settleDelete(send) {
    var pending = pendingDelete;
    if (!pending) return;
    pendingDelete = null;
    window.clearTimeout(pending.timer);
    var notice = deleteNotice();
    if (notice) notice.hidden = true;
    if (!send) {
      shownAgain(pending);
      return;
    }
    pending.form.setAttribute('data-confirmed', '');
    pending.form.requestSubmit();
  }

  // In the capture phase, before htmx's ws-send sees the form's submit.
  document.addEventListener('submit', function (e) {
    var form = e.target;
    if (!form.matches('.delete-form') || form.hasAttribute('data-confirmed')) return;
    var notice = deleteNotice();
    if (!notice) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    settleDelete(true);  // one at a time: an earlier one goes now
    var hidden = [];
    for (var el = form.closest('.msg'); el; el = el.nextElementSibling) {
      if (el.matches('.msg') && !el.hidden) { el.hidden = true; hidden.push(el); }
    }
    pendingDelete = {
      form: form, hidden: hidden,
      timer: window.setTimeout(function () { settleDelete(true); }, DELETE_SECONDS * 1000)
    };
    notice.hidden = false;
    notice.querySelector('[data-delete-undo]').focus();
  }, true);
  document.addEventListener('click', function (e) {
    if (!e.target.closest) return;
    if (e.target.closest('[data-delete-undo]')) settleDelete(false);
    else if (e.target.closest('[data-delete-now]')) settleDelete(true);
  });

  document.addEventListener('DOMContentLoaded', function () {
    markActive();
    checkRoom();
    localTimes();
    scrollToEnd(true);
    var box = document.querySelector('#composer textarea');
    if (box && !box.disabled) box.focus();
  });
})();
