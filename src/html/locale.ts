/*
 * The languages a person is spoken to in, and which one a request gets: the widget and the console both
 * speak Spanish (Chile) and English, choose between them alike, and keep their own words (widget/messages.ts,
 * console/messages.ts). Here beside the HTML kit, so the console reads it without importing the widget.
 */

export const LOCALES = ['es', 'en'] as const;
export type Locale = (typeof LOCALES)[number];

export function isLocale(value: unknown): value is Locale {
  return value === 'es' || value === 'en';
}

/**
 * The first of the browser's languages (`Accept-Language`, by its q-values) that the pages speak, or
 * null. `es-CL`, `es-419` and `es` are Spanish; `en-US`, `en` English; `*` chooses nothing.
 */
export function localeFromAcceptLanguage(header: string | undefined): Locale | null {
  if (!header) return null;
  const ranked = header
    .split(',')
    .slice(0, 32)
    .map((part, index) => {
      const [tag = '', ...params] = part.trim().split(';');
      const q = params.map((p) => /^\s*q=([0-9.]+)\s*$/.exec(p)).find(Boolean);
      return { primary: tag.trim().toLowerCase().split('-')[0]!, q: q ? Number(q[1]) : 1, index };
    })
    .filter((entry) => entry.q > 0 && Number.isFinite(entry.q))
    .sort((a, b) => b.q - a.q || a.index - b.index);
  for (const entry of ranked) if (isLocale(entry.primary)) return entry.primary;
  return null;
}

/**
 * The language asked for by name (a widget token's, the console's `?lang=`), else the browser's, else the
 * operator's (`widget.locale`).
 */
export function chooseLocale(
  askedLocale: string | null | undefined,
  acceptLanguage: string | undefined,
  operatorDefault: Locale,
): Locale {
  if (isLocale(askedLocale)) return askedLocale;
  return localeFromAcceptLanguage(acceptLanguage) ?? operatorDefault;
}
