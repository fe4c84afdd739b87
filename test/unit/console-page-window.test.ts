import t from 'tap';
import { MAX_PAGE } from '../../src/api/pagination.js';
import { pageWindow, PER_PAGE } from '../../src/console/views.js';

/*
 * The console pages a list as the API does (30 rows, the same bound on the page number) but forgives what a
 * person typed or kept in a bookmark: a page that is no page is the first, never an error.
 */

t.test('a page is the API’s window of 30 rows', async (t) => {
  t.equal(PER_PAGE, 30);
  t.same(pageWindow({}), { page: 1, offset: 0, limit: 30 });
  t.same(pageWindow({ page: '3' }), { page: 3, offset: 60, limit: 30 });
  t.same(pageWindow({ page: String(MAX_PAGE) }), { page: MAX_PAGE, offset: (MAX_PAGE - 1) * 30, limit: 30 });
  t.ok(Number.isSafeInteger(pageWindow({ page: String(MAX_PAGE) }).offset));
});

t.test('what is no page number is the first page', async (t) => {
  for (const page of [
    '0',
    '-1',
    '0x10',
    '1e2',
    ' 2',
    '2.5',
    'abc',
    String(MAX_PAGE + 1),
    '99999999999',
    ['2', '3'],
  ])
    t.same(pageWindow({ page }), { page: 1, offset: 0, limit: 30 }, JSON.stringify(page));
});
