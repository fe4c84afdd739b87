import type { Context } from 'koa';
import type { Html } from './html.js';

/*
 * How a page leaves the server, for the widget's and the console's alike: as HTML, never cached, sending no
 * referrer, never sniffed, and under its Content-Security-Policy.
 */

/**
 * The headers of every page: `csp` is its policy's directives. A page that no one may frame
 * (`frame-ancestors 'none'`) also says so to browsers that predate the directive (X-Frame-Options).
 */
export function pageHeaders(ctx: Context, csp: readonly string[]): void {
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('X-Content-Type-Options', 'nosniff');
  if (csp.includes("frame-ancestors 'none'")) ctx.set('X-Frame-Options', 'DENY');
  ctx.set('Content-Security-Policy', csp.join('; '));
}

/** A page as the response. */
export function sendHtml(ctx: Context, status: number, page: Html): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = page.toString();
}
