import type { Locale } from '../html/locale.js';

/*
 * Every word the widget shows or announces, in Spanish (Chile) and English: the server's page and error
 * screens read them here, and the page's script gets the catalogue of its language in the bootstrap JSON,
 * so there is one place to change a word. `{name}` is replaced by `format`. The end users are Chilean bank
 * customers, so Spanish uses their bank's words (RUT, clave, banca en línea) and addresses them as «tú».
 * test/unit/widget-messages.test.ts checks that both catalogues have the same keys and no empty string.
 * The languages, and which one a request gets, are html/locale.ts's (the console's too).
 */

const en = {
  'page.title': 'Connect your bank',
  'page.close': 'Close this window',
  'page.noscript': 'This window needs JavaScript to connect your bank.',
  'page.footer': 'Encrypted. The app never sees your password.',
  consent:
    'By connecting, you allow {operator} to read the accounts, balances and movements of this bank login on behalf of the app that opened this window, until the connection is removed. Your password is encrypted and never shared with that app.',

  'picker.title': 'Select your bank',
  'picker.lead': 'Choose the bank where you have your accounts.',
  'picker.searchLabel': 'Search banks',
  'picker.searchPlaceholder': 'Search for your bank',
  'picker.listLabel': 'Banks',
  'picker.empty': 'No bank matches your search.',
  'picker.countOne': '1 bank',
  'picker.countMany': '{count} banks',
  'picker.down': 'Having problems',
  'picker.degraded': 'May be slow',
  'picker.consent': 'Open Finance: you authorise at your bank, no password here',

  'rut.label': 'RUT',
  'rut.companyLabel': 'Company RUT',
  'rut.hint': 'For example 12.345.678-5',
  'rut.valid': 'Valid RUT',
  'rut.checkDigit': 'The check digit does not match. Check the RUT.',
  'rut.missing': 'Enter the RUT, for example 12.345.678-5.',
  'cpf.label': 'CPF',
  'cpf.hint': 'Your CPF, for example 123.456.789-09',
  'cpf.valid': 'Valid CPF',
  'cpf.invalid': 'This is not a valid CPF: check its 11 digits.',
  'cpf.missing': 'Enter your CPF, for example 123.456.789-09.',

  'credentials.titleConnect': 'Log in to {bank}',
  'credentials.titleReconnect': 'Reconnect {bank}',
  'credentials.leadConnect': 'Log in with the RUT and password you use for {bank} online banking.',
  'credentials.leadReconnect': 'Your connection to {bank} stopped working. Log in again to reconnect it.',
  'credentials.password': 'Password',
  'credentials.show': 'Show',
  'credentials.hide': 'Hide',
  'credentials.showLabel': 'Show password',
  'credentials.passwordMissing': 'Enter your password.',
  'credentials.holderLegend': 'Account type',
  'credentials.individual': 'Personal',
  'credentials.business': 'Business',
  'credentials.connect': 'Connect',
  'credentials.reconnect': 'Reconnect',
  'credentials.connecting': 'Connecting…',
  'credentials.reconnecting': 'Reconnecting…',
  'credentials.otherBank': 'Choose another bank',
  'credentials.startFailed': 'The connection could not start',

  'progress.titleConnect': 'Connecting to {bank}',
  'progress.titleReconnect': 'Reconnecting to {bank}',
  'progress.titleMfa': 'Updating your accounts',
  'progress.queued': 'Contacting {bank}…',
  'progress.syncing': 'Logging in to {bank} and reading your accounts…',
  'progress.verifying': 'Checking the verification code…',
  'progress.hint': 'This can take up to a minute. Keep this window open.',

  'mfa.title': 'Enter your verification code',
  'mfa.lead': '{bank} asked for a second step to confirm it is you.',
  'mfa.label': 'Verification code',
  'mfa.hint': 'The code your bank sent by text message or shows in its app.',
  'mfa.missing': 'Enter the code your bank sent you.',
  'mfa.verify': 'Verify',
  'mfa.verifying': 'Verifying…',
  'mfa.wrongOne': 'That code was not correct. Check it and try again: you have 1 try left.',
  'mfa.wrongMany': 'That code was not correct. Check it and try again: you have {count} tries left.',
  'mfa.sendFailed': 'The code could not be sent',

  'success.titleConnect': 'Connected',
  'success.titleReconnect': 'Reconnected',
  'success.titleMfa': 'Verified',
  'success.accountsOne': '1 account',
  'success.accountsMany': '{count} accounts',
  'success.text': 'We found {accounts} at {bank}.',
  'success.textHolder': 'We found {accounts} at {bank} for {holder}.',
  'success.textMfa': 'Your accounts at {bank} are up to date.',
  'success.continue': 'Continue',
  'success.finish': 'Finish',
  'done.title': 'All done',
  'done.text': 'You can close this window and go back to the app.',
  'done.redirecting': 'Taking you back to the app…',

  'consent.lead': '{bank} will show you this same list and ask you to confirm it.',
  'consent.renewLead':
    'Renew your consent with {bank} to keep this connection: the same accounts, nothing to set up again.',
  'consent.opening': 'Opening {bank}…',
  'consent.awaitingTitle': 'Authorise at {bank}',
  'consent.awaitingLead':
    'We opened {bank} in a new window. Sign in there and confirm what you share; this window goes on by itself.',
  'consent.reopen': 'Open {bank} again',
  'consent.popupBlocked':
    'Your browser blocked the window of {bank}. Press the button again, or allow pop-ups for this page.',
  'consent.returnedTitle': 'Authorised',
  'consent.returnedText': 'Go back to the app window to finish. This window closes by itself.',
  'consent.returnedClose': 'You can close this window.',

  'error.tryAgain': 'Try again',
  'error.close': 'Close',
  'error.backToApp': 'Back to the app',
  'error.network': 'The connection to the server was lost. Check your internet and try again.',
  'bank.default': 'your bank',
  'bank.defaultTitle': 'Your bank',

  'problem.token_consumed.title': 'This link was already used',
  'problem.token_consumed.message':
    'For your security, each connection link opens only once. Go back to the app and start again.',
  'problem.token_expired.title': 'This link has expired',
  'problem.token_expired.message':
    'Connection links are valid for {minutes} minutes. Go back to the app and start again.',
  'problem.token_invalid.title': 'This link is not valid',
  'problem.token_invalid.message':
    'The link is incomplete or no longer waiting to be opened. Go back to the app and start again.',
  'problem.origin_invalid.title': 'This page cannot be opened here',
  'problem.origin_invalid.message':
    'The widget must be opened by an allowed website through embed.js. If you run that website, check the allowed origins in the widget settings.',
  'problem.opener_missing.title': 'Open this from the app',
  'problem.opener_missing.message':
    'This connection link works inside the app that created it. Go back to the app and start the connection there.',
  'problem.opener_missing.developer':
    'For developers: open widget_url with embed.js (SvcWidget.open), or create the widget token with a redirect_uri to use it as a plain link.',
  'problem.rejected_credentials.title': 'Your bank did not accept these details',
  'problem.rejected_credentials.message':
    'Check your RUT and password and try again. Several failed attempts may lock your online banking access.',
  'problem.account_locked.title': '{bank} needs your attention',
  'problem.account_locked.message':
    'Log in to the website or app of {bankLower} and follow its instructions, then come back and try again.',
  'problem.bank_unavailable.title': '{bank} is not responding',
  'problem.bank_unavailable.message': 'The bank could not be reached just now. Try again in a few minutes.',
  'problem.mfa_invalid.title': 'The code was not correct',
  'problem.mfa_invalid.message':
    '{bank} did not accept the verification code and no tries are left, so the update was stopped. Go back to the app and start again.',
  'problem.mfa_expired.title': 'The code arrived too late',
  'problem.mfa_expired.message':
    'Verification codes are only valid for a few minutes, so the update was stopped. Go back to the app and start again.',
  'problem.mfa_required.title': '{bank} asked for a verification code',
  'problem.mfa_required.message': 'The code could not be requested in this step. Try again.',
  'problem.connection_limit_reached.title': 'You cannot connect more banks',
  'problem.connection_limit_reached.messageOne':
    'You already have 1 connected bank, the most this app allows. Remove a connection in the app to add another.',
  'problem.connection_limit_reached.messageMany':
    'You already have {count} connected banks, the most this app allows. Remove a connection in the app to add another.',
  'problem.link_not_expired.title': 'This connection already works',
  'problem.link_not_expired.message':
    'There is nothing to reconnect: the connection to your bank is active. Go back to the app.',
  'problem.refresh_in_progress.title': 'Your bank is being read right now',
  'problem.refresh_in_progress.message':
    'The connection to {bank} is updating. Try again in a minute: nothing was changed.',
  'problem.holder_mismatch.title': 'This is a different bank login',
  'problem.holder_mismatch.message':
    'This connection was made with another bank login. Sign in with the same RUT (and, for a company, the same company RUT) that was used to connect it.',
  'problem.link_missing.title': 'This connection no longer exists',
  'problem.link_missing.message': 'It was removed. Go back to the app and start again.',
  'problem.bank_busy.title': '{bank} is busy',
  'problem.bank_busy.message':
    '{bank} cannot take more requests from this app right now, so nothing was sent to it. Try again {when}.',
  'problem.starts_limited.title': 'Too many connections at once',
  'problem.starts_limited.message':
    'Too many bank connections were started from this app in the last minute, so nothing was sent to the bank. Try again {when}.',
  'problem.session_starts_limited.title': 'Too many tries in a row',
  'problem.session_starts_limited.message':
    'You started several connections from this window in the last minute, so nothing was sent to the bank. Try again {when}.',
  'wait.seconds': 'in {n} seconds',
  'wait.minutes': 'in {n} minutes',
  'wait.soon': 'in a moment',
  'problem.too_many_attempts.title': 'Too many attempts',
  'problem.too_many_attempts.message':
    'For your security this window stopped accepting attempts. Go back to the app and start again.',
  'problem.session_expired.title': 'This window has timed out',
  'problem.session_expired.message': 'Go back to the app and start again.',
  'problem.institution_unavailable.title': '{bank} is not available',
  'problem.institution_unavailable.message':
    'Connections to this bank are not offered right now. Choose another bank.',
  'problem.connection_in_progress.title': 'A connection is under way',
  'problem.connection_in_progress.message':
    'A connection is already being made in this window. Wait for its result.',
  'problem.consent_denied.title': 'You did not authorise {bankLower}',
  'problem.consent_denied.message':
    'Nothing was shared and no connection was made. Try again if you want to connect this bank.',
  'problem.consent_expired.title': 'The authorisation took too long',
  'problem.consent_expired.message':
    'For your security the trip to {bankLower} is valid for 10 minutes. Nothing was shared; try again.',
  'problem.consent_invalid.title': 'The answer of {bankLower} could not be used',
  'problem.consent_invalid.message': 'Nothing was shared and no connection was made. Try again.',
  'problem.consent_revoked.title': '{bank} ended the authorisation',
  'problem.consent_revoked.message':
    'The bank says the authorisation was revoked or has ended, so nothing more is shared. Authorise again to connect.',
  'problem.consent_used.title': 'This authorisation was already used',
  'problem.consent_used.message':
    'Each authorisation at the bank completes one connection only. Go back to the app window: it shows how the connection went.',
  'problem.consent_other_browser.title': 'Finish in the browser where you started',
  'problem.consent_other_browser.message':
    'This authorisation was started in another browser or window, so for your security it can only be completed there. Nothing was shared from here. Go back to that browser, or start again from the app.',
  'problem.consent_unknown.title': 'This authorisation is not ours',
  'problem.consent_unknown.message':
    'The page the bank returned to does not match a connection in progress, so nothing was done. Go back to the app and start again.',
  'problem.default.title': 'Something went wrong',
  'problem.default.message':
    'The connection could not be completed ({code}). Go back to the app and start again.',
} as const;

export type MessageKey = keyof typeof en;
export type Catalogue = Record<MessageKey, string>;

const es: Catalogue = {
  'page.title': 'Conecta tu banco',
  'page.close': 'Cerrar esta ventana',
  'page.noscript': 'Esta ventana necesita JavaScript para conectar tu banco.',
  'page.footer': 'Conexión cifrada. La app nunca ve tu clave.',
  consent:
    'Al conectar, autorizas a {operator} a leer las cuentas, saldos y movimientos de este acceso bancario en nombre de la app que abrió esta ventana, hasta que se elimine la conexión. Tu clave se guarda cifrada y nunca se comparte con esa app.',

  'picker.title': 'Elige tu banco',
  'picker.lead': 'Elige el banco donde tienes tus cuentas.',
  'picker.searchLabel': 'Buscar banco',
  'picker.searchPlaceholder': 'Busca tu banco',
  'picker.listLabel': 'Bancos',
  'picker.empty': 'Ningún banco coincide con tu búsqueda.',
  'picker.countOne': '1 banco',
  'picker.countMany': '{count} bancos',
  'picker.down': 'Con problemas',
  'picker.degraded': 'Puede estar lento',
  'picker.consent': 'Open Finance: autorizas en tu banco, sin dar tu clave aquí',

  'rut.label': 'RUT',
  'rut.companyLabel': 'RUT de la empresa',
  'rut.hint': 'Por ejemplo 12.345.678-5',
  'rut.valid': 'RUT válido',
  'rut.checkDigit': 'El dígito verificador no coincide. Revisa el RUT.',
  'rut.missing': 'Ingresa el RUT, por ejemplo 12.345.678-5.',
  'cpf.label': 'CPF',
  'cpf.hint': 'Tu CPF, por ejemplo 123.456.789-09',
  'cpf.valid': 'CPF válido',
  'cpf.invalid': 'No es un CPF válido: revisa sus 11 dígitos.',
  'cpf.missing': 'Ingresa tu CPF, por ejemplo 123.456.789-09.',

  'credentials.titleConnect': 'Ingresa a {bank}',
  'credentials.titleReconnect': 'Reconecta {bank}',
  'credentials.leadConnect': 'Ingresa con el RUT y la clave que usas en la banca en línea de {bank}.',
  'credentials.leadReconnect':
    'Tu conexión con {bank} dejó de funcionar. Vuelve a ingresar para reconectarla.',
  'credentials.password': 'Clave',
  'credentials.show': 'Mostrar',
  'credentials.hide': 'Ocultar',
  'credentials.showLabel': 'Mostrar clave',
  'credentials.passwordMissing': 'Ingresa tu clave.',
  'credentials.holderLegend': 'Tipo de cuenta',
  'credentials.individual': 'Persona',
  'credentials.business': 'Empresa',
  'credentials.connect': 'Conectar',
  'credentials.reconnect': 'Reconectar',
  'credentials.connecting': 'Conectando…',
  'credentials.reconnecting': 'Reconectando…',
  'credentials.otherBank': 'Elegir otro banco',
  'credentials.startFailed': 'No se pudo iniciar la conexión',

  'progress.titleConnect': 'Conectando con {bank}',
  'progress.titleReconnect': 'Reconectando con {bank}',
  'progress.titleMfa': 'Actualizando tus cuentas',
  'progress.queued': 'Contactando a {bank}…',
  'progress.syncing': 'Ingresando a {bank} y leyendo tus cuentas…',
  'progress.verifying': 'Revisando el código de verificación…',
  'progress.hint': 'Esto puede tardar hasta un minuto. No cierres esta ventana.',

  'mfa.title': 'Ingresa tu código de verificación',
  'mfa.lead': '{bank} pidió un segundo paso para confirmar que eres tú.',
  'mfa.label': 'Código de verificación',
  'mfa.hint': 'El código que tu banco te envió por SMS o que aparece en su app.',
  'mfa.missing': 'Ingresa el código que te envió tu banco.',
  'mfa.verify': 'Verificar',
  'mfa.verifying': 'Verificando…',
  'mfa.wrongOne': 'El código no es correcto. Revísalo e inténtalo de nuevo: te queda 1 intento.',
  'mfa.wrongMany': 'El código no es correcto. Revísalo e inténtalo de nuevo: te quedan {count} intentos.',
  'mfa.sendFailed': 'No se pudo enviar el código',

  'success.titleConnect': 'Conectado',
  'success.titleReconnect': 'Reconectado',
  'success.titleMfa': 'Verificado',
  'success.accountsOne': '1 cuenta',
  'success.accountsMany': '{count} cuentas',
  'success.text': 'Encontramos {accounts} en {bank}.',
  'success.textHolder': 'Encontramos {accounts} en {bank} a nombre de {holder}.',
  'success.textMfa': 'Tus cuentas en {bank} están al día.',
  'success.continue': 'Continuar',
  'success.finish': 'Finalizar',
  'done.title': 'Listo',
  'done.text': 'Puedes cerrar esta ventana y volver a la app.',
  'done.redirecting': 'Te estamos llevando de vuelta a la app…',

  'consent.lead': '{bank} te mostrará esta misma lista y te pedirá confirmarla.',
  'consent.renewLead':
    'Renueva tu consentimiento con {bank} para mantener esta conexión: las mismas cuentas, sin configurar nada de nuevo.',
  'consent.opening': 'Abriendo {bank}…',
  'consent.awaitingTitle': 'Autoriza en {bank}',
  'consent.awaitingLead':
    'Abrimos {bank} en una ventana nueva. Ingresa ahí y confirma lo que compartes; esta ventana seguirá sola.',
  'consent.reopen': 'Abrir {bank} de nuevo',
  'consent.popupBlocked':
    'Tu navegador bloqueó la ventana de {bank}. Presiona el botón otra vez o permite las ventanas emergentes en esta página.',
  'consent.returnedTitle': 'Autorizado',
  'consent.returnedText': 'Vuelve a la ventana de la app para terminar. Esta ventana se cerrará sola.',
  'consent.returnedClose': 'Puedes cerrar esta ventana.',

  'error.tryAgain': 'Intentar de nuevo',
  'error.close': 'Cerrar',
  'error.backToApp': 'Volver a la app',
  'error.network': 'Se perdió la conexión con el servidor. Revisa tu internet e inténtalo de nuevo.',
  'bank.default': 'tu banco',
  'bank.defaultTitle': 'Tu banco',

  'problem.token_consumed.title': 'Este enlace ya fue usado',
  'problem.token_consumed.message':
    'Por tu seguridad, cada enlace de conexión se abre una sola vez. Vuelve a la app y comienza de nuevo.',
  'problem.token_expired.title': 'Este enlace expiró',
  'problem.token_expired.message':
    'Los enlaces de conexión son válidos por {minutes} minutos. Vuelve a la app y comienza de nuevo.',
  'problem.token_invalid.title': 'Este enlace no es válido',
  'problem.token_invalid.message':
    'El enlace está incompleto o ya no espera ser abierto. Vuelve a la app y comienza de nuevo.',
  'problem.origin_invalid.title': 'Esta página no se puede abrir aquí',
  'problem.origin_invalid.message':
    'El widget debe abrirlo un sitio web autorizado mediante embed.js. Si administras ese sitio, revisa los orígenes permitidos en la configuración del widget.',
  'problem.opener_missing.title': 'Abre esto desde la app',
  'problem.opener_missing.message':
    'Este enlace de conexión funciona dentro de la app que lo creó. Vuelve a la app y comienza la conexión desde ahí.',
  'problem.opener_missing.developer':
    'Para desarrolladores: abre widget_url con embed.js (SvcWidget.open), o crea el token del widget con un redirect_uri para usarlo como enlace directo.',
  'problem.rejected_credentials.title': 'Tu banco no aceptó estos datos',
  'problem.rejected_credentials.message':
    'Revisa tu RUT y tu clave e inténtalo de nuevo. Varios intentos fallidos pueden bloquear tu acceso a la banca en línea.',
  'problem.account_locked.title': '{bank} necesita tu atención',
  'problem.account_locked.message':
    'Ingresa al sitio web o a la app de {bankLower} y sigue sus instrucciones; luego vuelve e inténtalo de nuevo.',
  'problem.bank_unavailable.title': '{bank} no responde',
  'problem.bank_unavailable.message':
    'No pudimos comunicarnos con el banco en este momento. Inténtalo de nuevo en unos minutos.',
  'problem.mfa_invalid.title': 'El código no es correcto',
  'problem.mfa_invalid.message':
    '{bank} no aceptó el código de verificación y no quedan intentos, así que se detuvo la actualización. Vuelve a la app y comienza de nuevo.',
  'problem.mfa_expired.title': 'El código llegó demasiado tarde',
  'problem.mfa_expired.message':
    'Los códigos de verificación valen solo por unos minutos, así que se detuvo la actualización. Vuelve a la app y comienza de nuevo.',
  'problem.mfa_required.title': '{bank} pidió un código de verificación',
  'problem.mfa_required.message': 'No se pudo pedir el código en este paso. Inténtalo de nuevo.',
  'problem.connection_limit_reached.title': 'No puedes conectar más bancos',
  'problem.connection_limit_reached.messageOne':
    'Ya tienes 1 banco conectado, el máximo que permite esta app. Elimina una conexión en la app para agregar otra.',
  'problem.connection_limit_reached.messageMany':
    'Ya tienes {count} bancos conectados, el máximo que permite esta app. Elimina una conexión en la app para agregar otra.',
  'problem.link_not_expired.title': 'Esta conexión ya funciona',
  'problem.link_not_expired.message':
    'No hay nada que reconectar: la conexión con tu banco está activa. Vuelve a la app.',
  'problem.refresh_in_progress.title': 'Estamos leyendo tu banco en este momento',
  'problem.refresh_in_progress.message':
    'La conexión con {bank} se está actualizando. Vuelve a intentarlo en un minuto: no se cambió nada.',
  'problem.holder_mismatch.title': 'Este es otro acceso bancario',
  'problem.holder_mismatch.message':
    'Esta conexión se hizo con otro acceso bancario. Ingresa con el mismo RUT (y, si es una empresa, el mismo RUT de la empresa) con que se conectó.',
  'problem.link_missing.title': 'Esta conexión ya no existe',
  'problem.link_missing.message': 'Fue eliminada. Vuelve a la app y comienza de nuevo.',
  'problem.bank_busy.title': '{bank} está ocupado',
  'problem.bank_busy.message':
    '{bank} no puede recibir más solicitudes de esta app en este momento, así que no se le envió nada. Vuelve a intentarlo {when}.',
  'problem.starts_limited.title': 'Demasiadas conexiones a la vez',
  'problem.starts_limited.message':
    'Se iniciaron demasiadas conexiones bancarias desde esta app en el último minuto, así que no se envió nada al banco. Vuelve a intentarlo {when}.',
  'problem.session_starts_limited.title': 'Demasiados intentos seguidos',
  'problem.session_starts_limited.message':
    'Iniciaste varias conexiones desde esta ventana en el último minuto, así que no se envió nada al banco. Vuelve a intentarlo {when}.',
  'wait.seconds': 'en {n} segundos',
  'wait.minutes': 'en {n} minutos',
  'wait.soon': 'en un momento',
  'problem.too_many_attempts.title': 'Demasiados intentos',
  'problem.too_many_attempts.message':
    'Por tu seguridad, esta ventana dejó de aceptar intentos. Vuelve a la app y comienza de nuevo.',
  'problem.session_expired.title': 'Esta ventana expiró',
  'problem.session_expired.message': 'Vuelve a la app y comienza de nuevo.',
  'problem.institution_unavailable.title': '{bank} no está disponible',
  'problem.institution_unavailable.message':
    'Por ahora no se ofrecen conexiones con este banco. Elige otro banco.',
  'problem.connection_in_progress.title': 'Ya hay una conexión en curso',
  'problem.connection_in_progress.message':
    'Ya se está haciendo una conexión en esta ventana. Espera su resultado.',
  'problem.consent_denied.title': 'No autorizaste a {bankLower}',
  'problem.consent_denied.message':
    'No se compartió nada ni se creó una conexión. Inténtalo de nuevo si quieres conectar este banco.',
  'problem.consent_expired.title': 'La autorización tardó demasiado',
  'problem.consent_expired.message':
    'Por tu seguridad, el paso por {bankLower} vale 10 minutos. No se compartió nada; inténtalo de nuevo.',
  'problem.consent_invalid.title': 'No pudimos usar la respuesta de {bankLower}',
  'problem.consent_invalid.message': 'No se compartió nada ni se creó una conexión. Inténtalo de nuevo.',
  'problem.consent_revoked.title': '{bank} dio por terminada la autorización',
  'problem.consent_revoked.message':
    'El banco dice que la autorización fue revocada o terminó, así que no se comparte nada más. Autoriza de nuevo para conectar.',
  'problem.consent_used.title': 'Esta autorización ya se usó',
  'problem.consent_used.message':
    'Cada autorización en el banco completa una sola conexión. Vuelve a la ventana de la app: ahí verás cómo terminó.',
  'problem.consent_other_browser.title': 'Termina en el navegador donde empezaste',
  'problem.consent_other_browser.message':
    'Esta autorización se inició en otro navegador o ventana, así que por tu seguridad solo puede completarse allí. Desde aquí no se compartió nada. Vuelve a ese navegador o comienza de nuevo desde la app.',
  'problem.consent_unknown.title': 'Esta autorización no es nuestra',
  'problem.consent_unknown.message':
    'La página a la que volvió el banco no corresponde a una conexión en curso, así que no se hizo nada. Vuelve a la app y comienza de nuevo.',
  'problem.default.title': 'Algo salió mal',
  'problem.default.message':
    'No se pudo completar la conexión ({code}). Vuelve a la app y comienza de nuevo.',
};

export const CATALOGUES: Readonly<Record<Locale, Catalogue>> = { es, en };

/** `{name}` replaced by `params.name`; an unknown name is left as it is, so a mistake shows, not vanishes. */
export function format(template: string, params: Record<string, string | number> = {}): string {
  return template.replace(/\{(\w+)\}/g, (whole, name: string) =>
    Object.hasOwn(params, name) ? String(params[name]) : whole,
  );
}

export function message(
  locale: Locale,
  key: MessageKey,
  params: Record<string, string | number> = {},
): string {
  return format(CATALOGUES[locale][key], params);
}
