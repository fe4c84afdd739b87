import type { Locale } from '../widget/messages.js';

/** Every word of the console's pages, in Spanish (the default in Chile) and English, with the same keys. */
const es = {
  'console.title': 'Consola',
  'signin.title': 'Iniciar sesión',
  'signin.email': 'Correo electrónico',
  'signin.password': 'Contraseña',
  'signin.totp': 'Código de verificación (6 dígitos)',
  'signin.submit': 'Entrar',
  'signin.wrong': 'El correo o la contraseña no son correctos.',
  'signin.locked': 'Demasiados intentos fallidos. La cuenta está bloqueada hasta las {time} (UTC).',
  'signin.second_factor': 'Escribe el código de tu aplicación de autenticación.',
  'signin.throttled': 'Demasiados intentos desde esta dirección. Espera un momento y vuelve a intentarlo.',
  'signin.expired': 'Tu sesión terminó. Vuelve a iniciar sesión.',
  'accept.title': 'Elige tu contraseña',
  'accept.intro': 'Cuenta {email}. Usa al menos 12 caracteres.',
  'accept.password': 'Nueva contraseña',
  'accept.confirm': 'Repite la contraseña',
  'accept.submit': 'Guardar y entrar',
  'accept.mismatch': 'Las contraseñas no coinciden.',
  'accept.invalid': 'Este enlace ya no es válido. Pide uno nuevo a quien administra la consola.',
  'nav.overview': 'Resumen',
  'nav.signout': 'Cerrar sesión',
  'overview.signed_in': 'Sesión iniciada como {email} ({role}).',
  'role.operator': 'operador',
  'role.admin': 'administrador',
  'role.support': 'soporte',
  'error.forbidden': 'Tu rol no permite esta acción.',
  'error.not_found': 'No encontramos esta página.',
  'error.csrf':
    'El formulario caducó o no viene de esta consola. Vuelve a cargar la página e inténtalo otra vez.',
  'error.api_key': 'La consola no acepta claves de API: inicia sesión. Las claves funcionan en /v1.',
};

const en: typeof es = {
  'console.title': 'Console',
  'signin.title': 'Sign in',
  'signin.email': 'Email',
  'signin.password': 'Password',
  'signin.totp': 'Verification code (6 digits)',
  'signin.submit': 'Sign in',
  'signin.wrong': 'The email or the password is wrong.',
  'signin.locked': 'Too many failed attempts. The account is locked until {time} (UTC).',
  'signin.second_factor': 'Enter the code from your authenticator app.',
  'signin.throttled': 'Too many attempts from this address. Wait a moment and try again.',
  'signin.expired': 'Your session ended. Sign in again.',
  'accept.title': 'Choose your password',
  'accept.intro': 'Account {email}. Use at least 12 characters.',
  'accept.password': 'New password',
  'accept.confirm': 'Repeat the password',
  'accept.submit': 'Save and sign in',
  'accept.mismatch': 'The passwords do not match.',
  'accept.invalid': 'This link is not valid any more. Ask whoever runs the console for a new one.',
  'nav.overview': 'Overview',
  'nav.signout': 'Sign out',
  'overview.signed_in': 'Signed in as {email} ({role}).',
  'role.operator': 'operator',
  'role.admin': 'admin',
  'role.support': 'support',
  'error.forbidden': 'Your role does not allow this.',
  'error.not_found': 'We could not find this page.',
  'error.csrf': 'The form expired or did not come from this console. Reload the page and try again.',
  'error.api_key': 'The console does not accept API keys: sign in. Keys work on /v1.',
};

export type ConsoleMessageKey = keyof typeof es;
export const CONSOLE_CATALOGUES: Record<Locale, typeof es> = { es, en };

/** A message with its `{placeholders}` filled (not escaped: the page escapes what it prints). */
export function consoleMessage(
  locale: Locale,
  key: ConsoleMessageKey,
  values: Record<string, string> = {},
): string {
  return CONSOLE_CATALOGUES[locale][key].replace(
    /\{(\w+)\}/g,
    (_, name: string) => values[name] ?? `{${name}}`,
  );
}
