/* global window, document, navigator, URL */
/*
 * The hosted widget's loader: <script src="https://API/widget/embed.js"></script>, then
 * SvcWidget.open({ token, onSuccess, onExit }). It opens the widget in an iframe overlay on this page and
 * listens for the widget's postMessage; the widget is told this page's origin and posts to it only, and
 * this script accepts messages only from the widget's own origin and frame. See docs/widget.md.
 */
(function () {
  'use strict';

  // The API's origin: where this script was loaded from, else the appliance's configured base URL.
  var script = document.currentScript;
  var defaultOrigin = script && script.src ? new URL(script.src).origin : '__SVC_API_ORIGIN__';
  var current = null;
  // The frame's accessible name in each language (page.title of src/widget/messages.ts, filled in by the API).
  var titles = '__SVC_FRAME_TITLES__';

  function style(element, properties) {
    for (var name in properties) element.style.setProperty(name, properties[name]);
  }

  function open(options) {
    if (!options || typeof options.token !== 'string' || options.token === '')
      throw new TypeError('SvcWidget.open needs { token }: a widget token from POST /v1/widget_tokens.');
    if (window.location.origin === 'null')
      throw new Error('SvcWidget.open needs a page served over http(s), not a file.');
    if (current) current.close('replaced');
    var apiOrigin = options.apiOrigin ? new URL(options.apiOrigin).origin : defaultOrigin;
    var previousFocus = document.activeElement;
    var previousOverflow = document.documentElement.style.overflow;

    var overlay = document.createElement('div');
    overlay.setAttribute('data-svc-widget', '');
    style(overlay, {
      position: 'fixed',
      inset: '0',
      'z-index': '2147483000',
      display: 'flex',
      'align-items': 'center',
      'justify-content': 'center',
      background: 'rgba(15, 23, 42, 0.6)',
    });
    var frame = document.createElement('iframe');
    // The widget's own language comes from its token or the browser; the frame's name follows the browser.
    var language = String(options.locale || navigator.language || 'es').toLowerCase();
    frame.title = options.title || (language.indexOf('en') === 0 ? titles.en : titles.es);
    frame.src =
      apiOrigin +
      '/widget?token=' +
      encodeURIComponent(options.token) +
      '&origin=' +
      encodeURIComponent(window.location.origin);
    frame.setAttribute('referrerpolicy', 'no-referrer');
    function size() {
      var phone = window.matchMedia('(max-width: 480px)').matches;
      style(frame, {
        border: '0',
        background: '#ffffff',
        width: phone ? '100%' : '420px',
        // 760 px fits the business form with its consent and button on a 1280x800 screen.
        height: phone ? '100%' : 'min(760px, calc(100% - 32px))',
        'border-radius': phone ? '0' : '16px',
        'box-shadow': '0 24px 64px rgba(0, 0, 0, 0.35)',
      });
    }
    size();
    overlay.appendChild(frame);
    document.body.appendChild(overlay);
    document.documentElement.style.overflow = 'hidden';
    frame.focus();

    var closed = false;
    function close() {
      if (closed) return;
      closed = true;
      window.removeEventListener('message', onMessage);
      window.removeEventListener('resize', size);
      overlay.remove();
      document.documentElement.style.overflow = previousOverflow;
      if (current === handle) current = null;
      if (previousFocus && typeof previousFocus.focus === 'function') previousFocus.focus();
    }
    function call(callback, args) {
      if (typeof callback === 'function') callback.apply(null, args);
    }
    function onMessage(event) {
      // Only the widget this call opened may speak: its origin and its frame.
      if (event.origin !== apiOrigin || event.source !== frame.contentWindow) return;
      var data = event.data;
      if (!data || typeof data !== 'object' || typeof data.type !== 'string') return;
      if (data.type === 'ready') {
        frame.focus();
      } else if (data.type === 'success') {
        close();
        call(options.onSuccess, [
          data.exchange_token || null,
          { intent: data.intent, refresh_intent_id: data.refresh_intent_id || null },
        ]);
      } else if (data.type === 'exit') {
        close();
        call(options.onExit, [{ reason: data.reason || 'closed', error_code: data.error_code || null }]);
      }
    }
    window.addEventListener('message', onMessage);
    window.addEventListener('resize', size);

    var handle = {
      close: function (reason) {
        if (closed) return;
        close();
        call(options.onExit, [{ reason: reason || 'closed_by_page', error_code: null }]);
      },
    };
    current = handle;
    return handle;
  }

  window.SvcWidget = { open: open, version: 1 };
})();
