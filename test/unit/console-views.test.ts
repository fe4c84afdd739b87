import t from 'tap';
import { MAX_PAGE } from '../../src/api/pagination.js';
import { pageWindow, PER_PAGE } from '../../src/console/views.js';

/*
 * The console pages a list as the API does (its 30 rows, its bound on the page number) but forgives what a
 * person typed or kept in a bookmark: a page that is no page is the first, never an error.
 */

t.test("a console page's ?page= is the API's window of 30 rows", async (t) => {
  t.equal(PER_PAGE, 30);
  t.same(pageWindow({}), { page: 1, offset: 0, limit: 30 });
  t.same(pageWindow({ page: '3' }), { page: 3, offset: 2 * PER_PAGE, limit: PER_PAGE });
  const deepest = pageWindow({ page: String(MAX_PAGE) });
  t.same(deepest, { page: MAX_PAGE, offset: (MAX_PAGE - 1) * PER_PAGE, limit: PER_PAGE });
  t.ok(Number.isSafeInteger(deepest.offset));
});

t.test("a console page's ?page= is decimal digits or the first page", async (t) => {
  const beyond = String(MAX_PAGE + 1);
  for (const page of [
    '0x10',
    '1e2',
    ' 1',
    '+2',
    '0b11',
    '2.0',
    '',
    '0',
    '-1',
    beyond,
    '99999999999',
    undefined,
    ['2'],
  ])
    t.equal(pageWindow({ page }).page, 1, `${JSON.stringify(page)} is the first page`);
});
