/* global window, document, fetch, clearTimeout, Node, URL */
/*
 * The hosted widget's page script: plain JavaScript, no framework, no CDN. It starts from the JSON the
 * server put in #widget-bootstrap, talks to /widget/api/* with its session in the X-Widget-Session header,
 * and reports to the page that opened it with postMessage, to that page's origin only.
 */
(function () {
  'use strict';

  const boot = JSON.parse(document.getElementById('widget-bootstrap').textContent);
  const main = document.getElementById('widget-main');
  const closeButton = document.getElementById('widget-close');
  const opener = window.parent !== window ? window.parent : window.opener;
  const embedded = Boolean(opener && boot.opener_origin);
  // The hosted flow: opened as a plain page with a token that has a redirect_uri; the end is a navigation.
  const hosted = Boolean(boot.hosted);
  const messages = boot.messages;
  const banksById = new Map(boot.banks.map((bank) => [bank.id, bank]));

  const state = {
    screen: null,
    bank: boot.bank_id
      ? banksById.get(boot.bank_id) || { id: boot.bank_id, name: boot.bank_id, holder_types: ['individual'] }
      : null,
    holderType: boot.holder_type || 'individual',
    rut: boot.username_prefill || '',
    rutEmpresa: '',
    pollTimer: null,
    busy: false,
    finishing: false,
    lastError: null,
    popup: null,
  };

  // ---- words: the catalogue of the page's language (src/widget/messages.ts) ----

  /** The message `key` with `{name}` replaced; a missing key shows as itself rather than as nothing. */
  function t(key, params) {
    const template = Object.prototype.hasOwnProperty.call(messages, key) ? messages[key] : key;
    return template.replace(/\{(\w+)\}/g, (whole, name) =>
      params && Object.prototype.hasOwnProperty.call(params, name) ? String(params[name]) : whole,
    );
  }

  /** Refusals that pass with time (the API's Retry-After says when): the page offers to try again. */
  const AFTER_A_WAIT = ['bank_busy', 'starts_limited', 'session_starts_limited'];

  /** A failure the page learned from the API, worded from the catalogue by its code, never in English. */
  function problemFor(code, retryAfter) {
    const params = {
      bank: state.bank ? state.bank.name : t('bank.defaultTitle'),
      bankLower: state.bank ? state.bank.name : t('bank.default'),
      code: code || 'error',
      when: waitWords(retryAfter),
    };
    const worded = code === 'widget_session_invalid' ? 'session_expired' : code;
    const title = 'problem.' + worded + '.title';
    if (!Object.prototype.hasOwnProperty.call(messages, title))
      return {
        code,
        title: t('problem.default.title'),
        message: t('problem.default.message', params),
        retry: false,
      };
    return {
      code,
      title: t(title, params),
      message: t('problem.' + worded + '.message', params),
      retry: AFTER_A_WAIT.includes(code),
    };
  }

  /** "in 42 seconds": when a busy bank (the API's Retry-After, in seconds) may be tried again. */
  function waitWords(seconds) {
    if (!(seconds > 1)) return t('wait.soon');
    if (seconds < 90) return t('wait.seconds', { n: Math.ceil(seconds) });
    return t('wait.minutes', { n: Math.ceil(seconds / 60) });
  }

  // ---- RUT: 12.345.678-5, modulo-11 check digit ----

  function cleanRut(value) {
    return value
      .toUpperCase()
      .replace(/[^0-9K]/g, '')
      .replace(/K(?=.)/g, '')
      .slice(0, 9);
  }

  function formatRut(value) {
    const compact = cleanRut(value);
    if (compact.length < 2) return compact;
    return compact.slice(0, -1).replace(/\B(?=(\d{3})+(?!\d))/g, '.') + '-' + compact.slice(-1);
  }

  function checkDigit(body) {
    let sum = 0;
    let factor = 2;
    for (let i = body.length - 1; i >= 0; i--) {
      sum += Number(body[i]) * factor;
      factor = factor === 7 ? 2 : factor + 1;
    }
    const rest = 11 - (sum % 11);
    return rest === 11 ? '0' : rest === 10 ? 'K' : String(rest);
  }

  /** 'short' until there is a body and a check digit, then 'valid' or 'invalid'. */
  function rutStatus(value) {
    const compact = cleanRut(value);
    if (compact.length < 2) return 'short';
    const body = compact.slice(0, -1);
    if (!/^\d+$/.test(body)) return 'invalid';
    return checkDigit(body) === compact.slice(-1) ? 'valid' : 'invalid';
  }

  /** Reformats as the person types, keeping the caret after the same digit. */
  function reformat(input) {
    const before = input.value;
    const caret = input.selectionStart === null ? before.length : input.selectionStart;
    const significant = cleanRut(before.slice(0, caret)).length;
    const after = formatRut(before);
    if (after === before) return;
    input.value = after;
    let position = 0;
    let seen = 0;
    while (position < after.length && seen < significant) {
      if (/[0-9K]/.test(after[position])) seen++;
      position++;
    }
    input.setSelectionRange(position, position);
  }

  // ---- DOM helpers ----

  function h(tag, attributes, ...children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === false || value === null || value === undefined) continue;
      if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
      else if (name === 'className') element.className = value;
      else if (name === 'value') element.value = value;
      else element.setAttribute(name, value === true ? '' : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      element.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return element;
  }

  function heading(text) {
    return h('h1', { tabindex: '-1' }, text);
  }

  function button(text, onclick, secondary) {
    return h(
      'button',
      { type: 'button', className: secondary ? 'button button-secondary' : 'button', onclick },
      text,
    );
  }

  function art(kind) {
    const ok = kind === 'ok';
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('width', '32');
    svg.setAttribute('height', '32');
    svg.setAttribute('viewBox', '0 0 24 24');
    svg.setAttribute('aria-hidden', 'true');
    svg.setAttribute('focusable', 'false');
    const path = document.createElementNS('http://www.w3.org/2000/svg', 'path');
    path.setAttribute('d', ok ? 'M5 12.5l4.5 4.5L19 7.5' : 'M12 7v6m0 4h.01');
    path.setAttribute('stroke', 'currentColor');
    path.setAttribute('stroke-width', '2.5');
    path.setAttribute('stroke-linecap', 'round');
    path.setAttribute('stroke-linejoin', 'round');
    path.setAttribute('fill', 'none');
    svg.append(path);
    return h(
      'div',
      { className: 'status-art' },
      h('span', { className: 'art-circle ' + (ok ? 'art-ok' : 'art-error') }, svg),
    );
  }

  /** Replaces the screen and moves focus to its heading (or a field), so screen readers announce it. */
  function show(name, children, focus) {
    stopPolling();
    state.screen = name;
    state.busy = false;
    main.replaceChildren(...children);
    main.setAttribute('data-screen', name);
    const target = focus || main.querySelector('h1');
    if (target) target.focus();
  }

  function bankName() {
    return state.bank ? state.bank.name : t('bank.default');
  }

  /**
   * A bank's mark: two letters of its distinctive word on a colour of its own, derived from its id (no
   * third-party logo). `Banco de Chile` is Ch, `BancoEstado` BE, `Banco BICE` BI.
   */
  const BADGE_COLOURS = [
    '#1d4ed8',
    '#b91c1c',
    '#047857',
    '#7c3aed',
    '#c2410c',
    '#0e7490',
    '#be185d',
    '#4d7c0f',
    '#a16207',
    '#4338ca',
    '#334155',
    '#9d174d',
  ];

  function monogram(name) {
    const word =
      name
        .replace(/^Banco (de )?/, '')
        .replace(/ Chile$/, '')
        .split(/\s+/)[0] || name;
    const camel = /^([A-Z])[a-z]+([A-Z])/.exec(word);
    if (camel) return camel[1] + camel[2];
    if (word === word.toUpperCase()) return word.slice(0, 2);
    return word[0].toUpperCase() + word.slice(1, 2).toLowerCase();
  }

  /** FNV-1a of the id picks a colour; a colour already taken in the list passes to the next free one. */
  function badgeColours(banks) {
    const taken = new Map();
    const used = new Set();
    for (const bank of banks) {
      let hash = 0x811c9dc5;
      for (let i = 0; i < bank.id.length; i++)
        hash = Math.imul(hash ^ bank.id.charCodeAt(i), 0x01000193) >>> 0;
      let index = hash % BADGE_COLOURS.length;
      for (let tries = 0; used.has(index) && tries < BADGE_COLOURS.length; tries++)
        index = (index + 1) % BADGE_COLOURS.length;
      used.add(index);
      taken.set(bank.id, BADGE_COLOURS[index]);
    }
    return taken;
  }

  function normalise(text) {
    return text
      .normalize('NFD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase();
  }

  // ---- talking to the server and to the opener ----

  // `keepsCookie`: the consent start's answer sets the trip cookie that binds the bank's return to this
  // browser (issue 44); every other call sends and keeps none.
  async function api(method, path, body, keepsCookie) {
    let response;
    try {
      response = await fetch('/widget/api/' + path, {
        method,
        headers: Object.assign(
          { 'X-Widget-Session': boot.session },
          body ? { 'Content-Type': 'application/json' } : {},
        ),
        body: body ? JSON.stringify(body) : undefined,
        credentials: keepsCookie ? 'same-origin' : 'omit',
        cache: 'no-store',
      });
    } catch {
      throw Object.assign(new Error(t('error.network')), { code: 'network_error' });
    }
    const data = await response.json().catch(() => null);
    if (!response.ok) {
      const error = (data && data.error) || {};
      // The API's own words are for developers; the person reads the catalogue's (problemFor).
      const retryAfter = Number(response.headers.get('retry-after')) || undefined;
      throw Object.assign(new Error(problemFor(error.code || 'server_error', retryAfter).message), {
        code: error.code || 'server_error',
        param: error.param,
        status: response.status,
        retryAfter,
      });
    }
    return data;
  }

  function post(message) {
    if (embedded) opener.postMessage(message, boot.opener_origin);
  }

  function exit(reason, errorCode) {
    stopPolling();
    post({ type: 'exit', reason, error_code: errorCode || null });
  }

  function stopPolling() {
    if (state.pollTimer !== null) clearTimeout(state.pollTimer);
    state.pollTimer = null;
  }

  function startPolling(delay) {
    stopPolling();
    state.pollTimer = setTimeout(poll, delay || boot.poll_interval_ms);
  }

  async function poll() {
    state.pollTimer = null;
    let status;
    try {
      status = await api('GET', 'status');
    } catch (error) {
      if (error.code === 'widget_session_invalid') return failure(sessionProblem(error));
      return startPolling(boot.poll_interval_ms * 3);
    }
    handleStatus(status);
  }

  function handleStatus(status) {
    switch (status.state) {
      case 'in_progress':
        if (state.screen === 'progress') setProgress(status.step);
        else progress(status.step);
        return startPolling();
      case 'requires_mfa':
        return mfa(status);
      case 'succeeded':
        return success(status);
      case 'failed':
        return failure(status.error);
      case 'finished':
        return done();
      case 'awaiting_bank':
        if (state.screen !== 'awaiting') awaiting();
        return startPolling();
      default:
        return state.bank ? begin() : picker();
    }
  }

  function sessionProblem() {
    return problemFor('session_expired');
  }

  // ---- screens ----

  function picker() {
    const list = h('ul', { className: 'bank-list', id: 'bank-list', 'aria-label': t('picker.listLabel') });
    const empty = h('p', { className: 'empty', hidden: true }, t('picker.empty'));
    const search = h('input', {
      className: 'search',
      id: 'bank-search',
      type: 'search',
      placeholder: t('picker.searchPlaceholder'),
      autocomplete: 'off',
      spellcheck: 'false',
      'aria-controls': 'bank-list',
      'aria-describedby': 'bank-count',
    });
    const count = h('p', { id: 'bank-count', className: 'visually-hidden', 'aria-live': 'polite' });
    search.addEventListener('input', () => {
      const term = normalise(search.value.trim());
      let shown = 0;
      for (const item of list.children) {
        const match = normalise(item.dataset.name).includes(term);
        item.hidden = !match;
        if (match) shown++;
      }
      empty.hidden = shown > 0;
      count.textContent = shown === 1 ? t('picker.countOne') : t('picker.countMany', { count: shown });
    });
    const colours = badgeColours(boot.banks);
    for (const bank of boot.banks) {
      const note =
        bank.status === 'down' ? t('picker.down') : bank.status === 'degraded' ? t('picker.degraded') : null;
      // A consent bank says so: the person authorises at the bank and gives no password here.
      const consent = bank.connection === 'consent' ? t('picker.consent') : null;
      list.append(
        h(
          'li',
          { 'data-name': consent ? bank.name + ' ' + consent : bank.name },
          h(
            'button',
            {
              type: 'button',
              className: 'bank',
              'data-bank': bank.id,
              onclick: () => {
                state.bank = bank;
                state.holderType = bank.holder_types[0];
                begin();
              },
            },
            h(
              'span',
              {
                className: 'bank-badge',
                'aria-hidden': 'true',
                'data-colour': colours.get(bank.id),
              },
              monogram(bank.name),
            ),
            h(
              'span',
              { className: 'bank-text' },
              h('span', { className: 'bank-name' }, bank.name),
              consent ? h('span', { className: 'bank-consent' }, consent) : null,
            ),
            note ? h('span', { className: 'bank-note' }, note) : null,
          ),
        ),
      );
    }
    // The colour is set from script: the page's CSP allows no inline style attribute.
    for (const badge of list.querySelectorAll('.bank-badge'))
      badge.style.backgroundColor = badge.dataset.colour;
    show('picker', [
      heading(t('picker.title')),
      h('p', { className: 'lead' }, t('picker.lead')),
      h('div', { className: 'field' }, h('label', { for: 'bank-search' }, t('picker.searchLabel')), search),
      count,
      list,
      empty,
    ]);
  }

  function rutField(id, labelText, initial, autocomplete) {
    const message = h('p', { id: id + '-message', className: 'message', 'aria-live': 'polite' });
    const input = h('input', {
      id,
      name: id,
      type: 'text',
      inputmode: 'text',
      autocomplete,
      autocapitalize: 'characters',
      spellcheck: 'false',
      maxlength: '12',
      required: true,
      'aria-describedby': id + '-hint ' + id + '-message',
      value: formatRut(initial),
    });
    let touched = false;
    function say(text, kind) {
      message.textContent = text;
      message.className = 'message' + (kind ? ' message-' + kind : '');
      input.setAttribute('aria-invalid', kind === 'error' ? 'true' : 'false');
    }
    /** As typed: valid at once; a wrong check digit once the RUT is complete or the field was left. */
    function check(final) {
      const status = rutStatus(input.value);
      const complete = cleanRut(input.value).length >= 9;
      if (status === 'valid') say(t('rut.valid'), 'ok');
      else if (status === 'invalid' && (complete || touched || final)) say(t('rut.checkDigit'), 'error');
      else if (final) say(t('rut.missing'), 'error');
      else say('', null);
      return status === 'valid';
    }
    input.addEventListener('input', () => {
      reformat(input);
      check(false);
    });
    input.addEventListener('blur', () => {
      if (input.value !== '') touched = true;
      check(false);
    });
    if (initial) check(false);
    const element = h(
      'div',
      { className: 'field' },
      h('label', { for: id }, labelText),
      input,
      h('p', { id: id + '-hint', className: 'hint' }, t('rut.hint')),
      message,
    );
    return { element, input, check };
  }

  /** A CPF's 11 digits with its two check digits (Receita Federal's modulo 11); punctuation is ignored. */
  function cpfValid(text) {
    const digits = text.replace(/[.\-\s]/g, '');
    if (!/^\d{11}$/.test(digits) || /^(\d)\1{10}$/.test(digits)) return false;
    const digit = (length) => {
      let sum = 0;
      for (let i = 0; i < length; i++) sum += Number(digits[i]) * (length + 1 - i);
      const rest = sum % 11;
      return rest < 2 ? 0 : 11 - rest;
    };
    return digit(9) === Number(digits[9]) && digit(10) === Number(digits[10]);
  }

  /** A Brazilian bank's consent names its customer: the CPF, checked as typed, sent with the start. */
  function cpfField() {
    const message = h('p', { id: 'cpf-message', className: 'message', 'aria-live': 'polite' });
    const input = h('input', {
      id: 'cpf',
      name: 'cpf',
      type: 'text',
      inputmode: 'numeric',
      autocomplete: 'off',
      spellcheck: 'false',
      maxlength: '14',
      required: true,
      'aria-describedby': 'cpf-hint cpf-message',
      value: state.cpf || '',
    });
    const hint = h('p', { id: 'cpf-hint', className: 'hint' }, t('cpf.hint'));
    /** The check's word takes the example's place beside the label: the screen keeps its height. */
    function check(final) {
      const ok = cpfValid(input.value);
      const complete = input.value.replace(/\D/g, '').length >= 11;
      const say = ok
        ? t('cpf.valid')
        : complete || final
          ? t(input.value ? 'cpf.invalid' : 'cpf.missing')
          : '';
      message.textContent = say;
      message.className = 'message' + (ok ? ' message-ok' : say ? ' message-error' : '');
      hint.hidden = say !== '';
      input.setAttribute('aria-invalid', !ok && say ? 'true' : 'false');
      return ok;
    }
    input.addEventListener('input', () => {
      state.cpf = input.value;
      check(false);
    });
    const element = h(
      'div',
      { className: 'field' },
      h('div', { className: 'field-head' }, h('label', { for: 'cpf' }, t('cpf.label')), hint, message),
      input,
    );
    return { element, input, check };
  }

  function credentials(alertText) {
    const bank = state.bank;
    const reconnect = boot.kind === 'reconnect';
    const canChooseHolder = !reconnect && bank.holder_types.length > 1;
    const rut = rutField('rut', t('rut.label'), state.rut, 'username');
    const company = rutField('rut-empresa', t('rut.companyLabel'), state.rutEmpresa, 'off');
    company.element.hidden = state.holderType !== 'business';
    rut.input.addEventListener('input', () => (state.rut = rut.input.value));
    company.input.addEventListener('input', () => (state.rutEmpresa = company.input.value));

    const password = h('input', {
      id: 'password',
      name: 'password',
      type: 'password',
      autocomplete: 'current-password',
      spellcheck: 'false',
      required: true,
      'aria-describedby': 'password-message',
    });
    const passwordMessage = h('p', { id: 'password-message', className: 'message', 'aria-live': 'polite' });
    const toggle = h('button', {
      type: 'button',
      className: 'button button-secondary',
      'aria-controls': 'password',
      'aria-pressed': 'false',
      'aria-label': t('credentials.showLabel'),
    });
    toggle.textContent = t('credentials.show');
    toggle.addEventListener('click', () => {
      const showing = password.type === 'text';
      password.type = showing ? 'password' : 'text';
      toggle.textContent = showing ? t('credentials.show') : t('credentials.hide');
      toggle.setAttribute('aria-pressed', showing ? 'false' : 'true');
    });

    const holderChoice = canChooseHolder
      ? h(
          'fieldset',
          {},
          h('legend', {}, t('credentials.holderLegend')),
          h(
            'div',
            { className: 'choices' },
            ['individual', 'business'].map((value) =>
              h(
                'label',
                { className: 'choice' },
                h('input', {
                  type: 'radio',
                  name: 'holder_type',
                  value,
                  checked: state.holderType === value,
                  onchange: () => {
                    state.holderType = value;
                    company.element.hidden = value !== 'business';
                  },
                }),
                value === 'individual' ? t('credentials.individual') : t('credentials.business'),
              ),
            ),
          ),
        )
      : null;

    const alert = h('p', { className: 'form-alert', role: 'alert', hidden: !alertText }, alertText || '');
    const submitText = reconnect ? t('credentials.reconnect') : t('credentials.connect');
    const submit = h(
      'button',
      { type: 'submit', className: 'button', 'aria-describedby': 'consent' },
      submitText,
    );
    const actions = h('div', { className: 'actions' }, submit);
    if (boot.kind === 'connect' && !boot.bank_id)
      actions.append(button(t('credentials.otherBank'), () => picker(), true));

    const form = h(
      'form',
      { novalidate: true, 'aria-describedby': 'consent' },
      holderChoice,
      rut.element,
      company.element,
      h(
        'div',
        { className: 'field' },
        h('label', { for: 'password' }, t('credentials.password')),
        h('div', { className: 'password-row' }, password, toggle),
        passwordMessage,
      ),
      alert,
      // Above the button it describes (aria-describedby): what the person agrees to is read before they
      // agree, and both stay above the fold at 1280x800 and 390x844, for a business too (widget-locales test).
      h('p', { id: 'consent', className: 'consent' }, boot.consent),
      actions,
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      if (state.busy) return;
      const business = state.holderType === 'business';
      const rutOk = rut.check(true);
      const companyOk = !business || company.check(true);
      const passwordOk = password.value.length > 0;
      passwordMessage.textContent = passwordOk ? '' : t('credentials.passwordMissing');
      passwordMessage.className = passwordOk ? 'message' : 'message message-error';
      password.setAttribute('aria-invalid', passwordOk ? 'false' : 'true');
      if (!rutOk) return rut.input.focus();
      if (!companyOk) return company.input.focus();
      if (!passwordOk) return password.focus();
      state.busy = true;
      submit.setAttribute('aria-disabled', 'true');
      submit.textContent = reconnect ? t('credentials.reconnecting') : t('credentials.connecting');
      try {
        const status = await api('POST', 'credentials', {
          ...(boot.kind === 'connect' ? { bank_id: bank.id, holder_type: state.holderType } : {}),
          rut: rut.input.value,
          password: password.value,
          ...(business ? { rut_empresa: company.input.value } : {}),
        });
        handleStatus(status);
      } catch (error) {
        state.busy = false;
        submit.removeAttribute('aria-disabled');
        submit.textContent = submitText;
        if (error.status === 400 || error.code === 'network_error') {
          alert.textContent = error.message;
          alert.hidden = false;
          return;
        }
        const known = problemFor(error.code);
        failure(
          known.title === t('problem.default.title')
            ? { ...known, title: t('credentials.startFailed') }
            : known,
        );
      }
    });

    const intro = t(reconnect ? 'credentials.leadReconnect' : 'credentials.leadConnect', { bank: bank.name });
    show(
      'credentials',
      [
        heading(
          t(reconnect ? 'credentials.titleReconnect' : 'credentials.titleConnect', { bank: bank.name }),
        ),
        h('p', { className: 'lead' }, intro),
        form,
      ],
      state.rut ? password : rut.input,
    );
  }

  /** The first step with a chosen bank: its consent screen for a consent bank, else the login form. */
  function begin() {
    // A consent link's reconnect renews its consent: the same screen, and the bank again.
    if (state.bank && state.bank.connection === 'consent' && boot.kind !== 'mfa') return consent();
    credentials();
  }

  /**
   * A consent bank: what will be shared and for how long (worded by the server from the request it will
   * push), and a button to the bank's own page: a popup when embedded (opened at the click, so no blocker
   * stops it), this window itself in the hosted flow.
   */
  function consent(alertText) {
    const bank = state.bank;
    const screen = bank.consent;
    const alert = h('p', { className: 'form-alert', role: 'alert', hidden: !alertText }, alertText || '');
    const go = screen.canContinue
      ? h(
          'button',
          { type: 'submit', className: 'button', 'aria-describedby': 'consent-duration' },
          screen.button,
        )
      : null;
    const actions = h('div', { className: 'actions' }, go);
    if (!boot.bank_id) actions.append(button(t('credentials.otherBank'), () => picker(), true));
    const cpf = bank.asks_cpf && go ? cpfField() : null;
    const form = h(
      'form',
      { novalidate: true, className: 'consent-screen' },
      boot.kind === 'reconnect'
        ? h('p', { className: 'lead' }, t('consent.renewLead', { bank: bank.name }))
        : null,
      h(
        'ul',
        { className: 'consent-items' },
        screen.items.map((item) => h('li', { 'data-covers': item.coverage }, item.text)),
      ),
      h('p', { id: 'consent-duration', className: 'consent-duration' }, screen.duration),
      // The notes as one paragraph: with a CPF field and "another bank", the screen fits 1280x800 (it was 57 px over).
      h('p', { className: 'hint consent-notes' }, screen.notes.join(' ')),
      // The CPF field takes the lead's place: the screen still fits at 1280x800 without a scroll.
      cpf ? cpf.element : h('p', { className: 'hint' }, t('consent.lead', { bank: bank.name })),
      alert,
      screen.warning ? h('p', { className: 'form-alert', role: 'alert' }, screen.warning) : null,
      actions,
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      if (state.busy || !go) return;
      if (cpf && !cpf.check(true)) return cpf.input.focus();
      state.busy = true;
      go.setAttribute('aria-disabled', 'true');
      go.textContent = t('consent.opening', { bank: bank.name });
      // Opened now, in the click: a window opened after the request returns would meet the popup blocker.
      const popup = hosted ? null : window.open('', 'svc-consent', 'popup,width=520,height=760');
      if (!hosted && !popup) {
        state.busy = false;
        return consent(t('consent.popupBlocked', { bank: bank.name }));
      }
      let start;
      try {
        start = await api(
          'POST',
          'consent',
          {
            ...(boot.bank_id ? {} : { bank_id: bank.id }),
            holder_type: state.holderType,
            ...(cpf ? { cpf: cpf.input.value } : {}),
          },
          true,
        );
      } catch (error) {
        if (popup) popup.close();
        state.busy = false;
        if (error.status === 400 || error.code === 'network_error') return consent(error.message);
        return failure(problemFor(error.code, error.retryAfter));
      }
      if (hosted) return window.location.assign(start.authorization_url);
      state.popup = popup;
      popup.location.replace(start.authorization_url);
      handleStatus(start.status);
    });
    show('consent', [heading(screen.title), form], (cpf && cpf.input) || go || undefined);
  }

  /** The end user is at the bank's page; the callback moves the session on and polling sees it. */
  function awaiting() {
    const bank = state.bank;
    const again = button(
      t('consent.reopen', { bank: bankName() }),
      () => {
        if (state.popup && !state.popup.closed) return state.popup.focus();
        consent();
      },
      true,
    );
    show('awaiting', [
      heading(t('consent.awaitingTitle', { bank: bankName() })),
      h('div', { className: 'status-art', 'aria-hidden': 'true' }, h('div', { className: 'spinner' })),
      h('p', { className: 'lead centered', role: 'status' }, t('consent.awaitingLead', { bank: bankName() })),
      bank && bank.consent ? h('div', { className: 'actions' }, again) : null,
    ]);
  }

  /** The page in the bank's popup, after the callback: how the trip ended, then the popup closes itself. */
  function returnedFromBank() {
    if (boot.error) {
      show('returned', [
        art('error'),
        h(
          'div',
          { className: 'centered' },
          heading(boot.error.title),
          h('p', { className: 'lead' }, boot.error.message),
          h('p', { className: 'hint' }, t('consent.returnedClose')),
        ),
      ]);
    } else {
      show('returned', [
        art('ok'),
        h(
          'div',
          { className: 'centered' },
          heading(t('consent.returnedTitle')),
          h('p', { className: 'lead' }, t('consent.returnedText')),
        ),
      ]);
    }
    // A moment to read it; a window a script did not open ignores close() and keeps saying the above.
    setTimeout(() => window.close(), boot.error ? 4000 : 1200);
  }

  const STEP_TEXT = {
    queued: () => t('progress.queued', { bank: bankName() }),
    syncing: () => t('progress.syncing', { bank: bankName() }),
    verifying: () => t('progress.verifying'),
  };

  function setProgress(step) {
    const status = main.querySelector('#progress-status');
    const text = (STEP_TEXT[step] || STEP_TEXT.queued)();
    if (status && status.textContent !== text) status.textContent = text;
  }

  function progress(step) {
    const title =
      boot.kind === 'mfa'
        ? t('progress.titleMfa')
        : t(boot.kind === 'reconnect' ? 'progress.titleReconnect' : 'progress.titleConnect', {
            bank: bankName(),
          });
    show('progress', [
      heading(title),
      h('div', { className: 'status-art', 'aria-hidden': 'true' }, h('div', { className: 'spinner' })),
      h(
        'p',
        { id: 'progress-status', className: 'lead centered', role: 'status', 'aria-live': 'polite' },
        (STEP_TEXT[step] || STEP_TEXT.queued)(),
      ),
      h('p', { className: 'hint centered' }, t('progress.hint')),
    ]);
  }

  function mfa(status) {
    const wrong = status && status.wrong_codes > 0;
    const left = status ? status.attempts_left : 0;
    const input = h('input', {
      id: 'mfa-code',
      name: 'code',
      type: 'text',
      inputmode: 'numeric',
      autocomplete: 'one-time-code',
      maxlength: '12',
      spellcheck: 'false',
      required: true,
      'aria-describedby': 'mfa-hint mfa-message',
    });
    const message = h(
      'p',
      { id: 'mfa-message', className: wrong ? 'message message-error' : 'message', 'aria-live': 'polite' },
      wrong ? (left === 1 ? t('mfa.wrongOne') : t('mfa.wrongMany', { count: left })) : '',
    );
    if (wrong) input.setAttribute('aria-invalid', 'true');
    const submit = h('button', { type: 'submit', className: 'button' }, t('mfa.verify'));
    const form = h(
      'form',
      { novalidate: true },
      h(
        'div',
        { className: 'field' },
        h('label', { for: 'mfa-code' }, t('mfa.label')),
        input,
        h('p', { id: 'mfa-hint', className: 'hint' }, t('mfa.hint')),
        message,
      ),
      h('div', { className: 'actions' }, submit),
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      if (state.busy) return;
      const code = input.value.trim();
      if (!/^[0-9A-Za-z]{4,12}$/.test(code)) {
        message.textContent = t('mfa.missing');
        message.className = 'message message-error';
        input.setAttribute('aria-invalid', 'true');
        return input.focus();
      }
      state.busy = true;
      submit.setAttribute('aria-disabled', 'true');
      submit.textContent = t('mfa.verifying');
      try {
        handleStatus(await api('POST', 'mfa', { code }));
      } catch (error) {
        state.busy = false;
        submit.removeAttribute('aria-disabled');
        submit.textContent = t('mfa.verify');
        if (error.status === 400 || error.code === 'network_error') {
          message.textContent = error.message;
          message.className = 'message message-error';
          return;
        }
        const known = problemFor(error.code);
        failure(
          known.title === t('problem.default.title') ? { ...known, title: t('mfa.sendFailed') } : known,
        );
      }
    });
    show(
      'mfa',
      [heading(t('mfa.title')), h('p', { className: 'lead' }, t('mfa.lead', { bank: bankName() })), form],
      input,
    );
  }

  function success(status) {
    const title = t(
      boot.kind === 'mfa'
        ? 'success.titleMfa'
        : boot.kind === 'reconnect'
          ? 'success.titleReconnect'
          : 'success.titleConnect',
    );
    const accounts =
      status.accounts_count === 1
        ? t('success.accountsOne')
        : t('success.accountsMany', { count: status.accounts_count });
    const text =
      boot.kind === 'mfa'
        ? t('success.textMfa', { bank: bankName() })
        : t(status.holder_name ? 'success.textHolder' : 'success.text', {
            accounts,
            bank: bankName(),
            holder: status.holder_name || '',
          });
    const next = button(embedded || hosted ? t('success.continue') : t('success.finish'), finish);
    show('success', [
      art('ok'),
      h('div', { className: 'centered' }, heading(title), h('p', { className: 'lead' }, text)),
      h('div', { className: 'actions' }, next),
    ]);
  }

  async function finish() {
    if (state.finishing) return;
    state.finishing = true;
    try {
      const result = await api('POST', 'finish');
      post(result);
      if (hosted && result.redirect_url) return leave(result.redirect_url);
      done();
    } catch (error) {
      state.finishing = false;
      if (error.code === 'already_finished') return done();
      failure(problemFor(error.code));
    }
  }

  function done() {
    show('done', [
      art('ok'),
      h(
        'div',
        { className: 'centered' },
        heading(t('done.title')),
        h('p', { className: 'lead' }, t('done.text')),
      ),
    ]);
  }

  /** The hosted flow's end: back to the app's redirect_uri, this window's only way to hand over. */
  function leave(url) {
    stopPolling();
    show('redirecting', [
      h('div', { className: 'status-art', 'aria-hidden': 'true' }, h('div', { className: 'spinner' })),
      h(
        'div',
        { className: 'centered' },
        heading(t('done.title')),
        h('p', { className: 'lead', role: 'status' }, t('done.redirecting')),
      ),
    ]);
    window.location.assign(url);
  }

  function exitUrl(code) {
    const url = new URL(boot.exit_url);
    if (code) url.searchParams.set('error_code', code);
    return url.href;
  }

  function failure(problem) {
    state.lastError = problem;
    const canRetry = problem.retry && boot.session && (boot.kind === 'connect' || boot.kind === 'reconnect');
    const actions = h('div', { className: 'actions' });
    if (canRetry) actions.append(button(t('error.tryAgain'), () => begin()));
    if (embedded) actions.append(button(t('error.close'), () => exit('error', problem.code), canRetry));
    else if (hosted && boot.exit_url)
      actions.append(button(t('error.backToApp'), () => leave(exitUrl(problem.code)), canRetry));
    show('error', [
      art('error'),
      h(
        'div',
        { className: 'centered' },
        heading(problem.title),
        h('p', { className: 'lead' }, problem.message),
        problem.code === 'opener_missing'
          ? h('p', { className: 'hint' }, t('problem.opener_missing.developer'))
          : null,
      ),
      actions,
    ]);
  }

  function close() {
    if (state.screen === 'success') return finish();
    if (state.screen === 'error') return exit('error', state.lastError && state.lastError.code);
    exit(state.screen === 'done' ? 'done' : 'closed');
  }

  // ---- start ----

  // A top-level page (the hosted flow, or a link opened by hand) is drawn as a card on a wide screen.
  if (window.parent === window) document.documentElement.classList.add('top-level');

  if (embedded) {
    closeButton.hidden = false;
    closeButton.addEventListener('click', close);
    document.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') close();
    });
  }
  if (boot.returned_from_bank) return returnedFromBank();
  post({ type: 'ready' });
  if (boot.error) failure(boot.error);
  else if (boot.status) handleStatus(boot.status);
  // A token naming its bank starts on that bank's first step: the consent screen for a consent bank.
  else if (state.bank) begin();
  else picker();
})();
