import t from 'tap';
import { pageWindow, PER_PAGE } from '../../src/console/views.js';

t.test("a console page's ?page= is decimal digits or the first page", async (t) => {
  t.same(pageWindow({ page: '3' }), { page: 3, offset: 2 * PER_PAGE, limit: PER_PAGE });
  for (const page of ['0x10', '1e2', ' 1', '+2', '0b11', '2.0', '', '0', '100001', undefined, ['2']])
    t.equal(pageWindow({ page }).page, 1, `${JSON.stringify(page)} is the first page`);
});
