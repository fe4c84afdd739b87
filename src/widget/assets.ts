import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config, WidgetConfig } from '../config/defaults.js';

/**
 * The widget's browser files are plain JavaScript and CSS in src/widget/static (no build step, no CDN). The
 * compiled server runs from dist/src/widget, three levels below the package root, so it reads them from
 * the source folder, which package.json's `files` ships; they are read once and served from memory.
 */
const STATIC_DIR = fileURLToPath(new URL('../../../src/widget/static/', import.meta.url));

export interface StaticAsset {
  body: string;
  contentType: string;
  /** A short content hash: the page asks for `?v=<hash>`, so a long cache never serves a stale file. */
  version: string;
}

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

function asset(body: string, contentType: string): StaticAsset {
  return { body, contentType, version: createHash('sha256').update(body).digest('hex').slice(0, 12) };
}

export function loadStaticAssets(): Map<string, StaticAsset> {
  const assets = new Map<string, StaticAsset>();
  for (const name of ['widget.js', 'widget.css', 'embed.js']) {
    assets.set(name, asset(readFileSync(join(STATIC_DIR, name), 'utf8'), TYPES[extname(name)]!));
  }
  return assets;
}

/** The operator's colour as CSS variables, with a text colour that keeps 4.5:1 contrast on it. */
export function themeCss(config: WidgetConfig): StaticAsset {
  const brand = config.primaryColour.toLowerCase();
  const ink = contrast(brand, '#ffffff') >= 4.5 ? '#ffffff' : '#111827';
  return asset(
    `:root {\n  --brand: ${brand};\n  --brand-ink: ${ink};\n  --brand-soft: ${brand}1a;\n}\n`,
    TYPES['.css']!,
  );
}

function luminance(hex: string): number {
  const channel = (offset: number) => {
    const value = Number.parseInt(hex.slice(offset, offset + 2), 16) / 255;
    return value <= 0.03928 ? value / 12.92 : ((value + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

export function contrast(a: string, b: string): number {
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (light + 0.05) / (dark + 0.05);
}

export type Logo =
  | { kind: 'none' }
  | { kind: 'url'; src: string; origin: string | null }
  | { kind: 'file'; path: string; contentType: string };

const IMAGE_TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.svg': 'image/svg+xml',
  '.webp': 'image/webp',
};

/** `logoUrl` is empty, an http(s) or data: URL, or a file in the data directory (never outside it). */
export function resolveLogo(config: WidgetConfig, home: string): Logo {
  const value = config.logoUrl;
  if (value === '') return { kind: 'none' };
  if (value.startsWith('data:')) return { kind: 'url', src: value, origin: null };
  if (/^https?:\/\//.test(value)) return { kind: 'url', src: value, origin: new URL(value).origin };
  const root = resolve(home);
  const path = resolve(root, value);
  if (!path.startsWith(root + sep)) return { kind: 'none' };
  return {
    kind: 'file',
    path,
    contentType: IMAGE_TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream',
  };
}

/** The page's files as the router serves them, read and made once an app. */
export interface WidgetFiles {
  /** widget.js, widget.css and embed.js as read (embed.js is served as `embedJs`). */
  assets: Map<string, StaticAsset>;
  theme: StaticAsset;
  logo: Logo;
  /** The logo as the page's `<img src>`: its URL, our own path to a logo file, or none. */
  logoSrc: string | null;
  /** The page's CSP `img-src`: itself, `data:` URLs, and a logo URL's origin. */
  imgSources: string[];
  /** embed.js with the API's origin and the frame's title in each language written in. */
  embedJs: string;
}

export function widgetFiles(
  config: Pick<Config, 'widget' | 'home' | 'api'>,
  frameTitles: Record<'es' | 'en', string>,
): WidgetFiles {
  const assets = loadStaticAssets();
  const theme = themeCss(config.widget);
  const logo = resolveLogo(config.widget, config.home);
  return {
    assets,
    theme,
    logo,
    logoSrc:
      logo.kind === 'url' ? logo.src : logo.kind === 'file' ? `/widget/assets/logo?v=${theme.version}` : null,
    imgSources: ["'self'", 'data:', ...(logo.kind === 'url' && logo.origin ? [logo.origin] : [])],
    embedJs: assets
      .get('embed.js')!
      .body.replace("'__SVC_API_ORIGIN__'", JSON.stringify(new URL(config.api.baseUrl).origin))
      .replace("'__SVC_FRAME_TITLES__'", JSON.stringify(frameTitles)),
  };
}
