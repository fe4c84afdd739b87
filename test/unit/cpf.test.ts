import t from 'tap';
import { cnpjCheckDigits, cpfCheckDigits, normaliseCnpj, normaliseCpf } from '../../src/cpf/cpf.js';
import { openApiDocument } from '../../src/open-finance/schemas.js';

/*
 * Brazil's tax ids. The CNPJ becomes alphanumeric from July 2026 (Receita Federal: 12 letters or digits,
 * then 2 numeric check digits over the characters' values ASCII − 48 with the same weights); the consents
 * 3.3.1 file already takes it (`BusinessEntityDocument.identification`: `^[0-9A-Z]{12}[0-9]{2}$`), while
 * accounts 2.4.2 and credit cards 2.3.1 still want 14 digits (`companyCnpj`: `^\d{14}$`).
 */

type Schemas = Record<string, { properties: Record<string, { pattern: string }> }>;
const schemasOf = (file: Parameters<typeof openApiDocument>[0]) =>
  (openApiDocument(file, 'BR') as { components: { schemas: Schemas } }).components.schemas;

t.test('CPF: two modulo-11 check digits', async (t) => {
  t.equal(cpfCheckDigits('529982247'), '25');
  t.equal(normaliseCpf('529.982.247-25'), '52998224725');
  t.equal(normaliseCpf('529.982.247-26'), null, 'a wrong check digit');
  t.equal(normaliseCpf('111.111.111-11'), null, 'eleven equal digits are not issued');
  t.equal(normaliseCpf('52998224A25'), null, 'a CPF has no letters');
});

t.test('numeric CNPJ: as before', async (t) => {
  t.equal(cnpjCheckDigits('123456780001'), '95');
  t.equal(normaliseCnpj('12.345.678/0001-95'), '12345678000195');
  t.equal(normaliseCnpj('12345678000196'), null, 'a wrong check digit');
  t.equal(normaliseCnpj('00.000.000/0000-00'), null, 'fourteen equal digits');
  t.equal(normaliseCnpj('1234567800019'), null, 'thirteen characters');
});

t.test(
  'alphanumeric CNPJ (consents 3.3.1 BusinessEntityDocument.identification): accepted, check digits checked',
  async (t) => {
    // Receita Federal's own example: 12.ABC.345/01DE-35.
    t.equal(cnpjCheckDigits('12ABC34501DE'), '35', 'values ASCII − 48: A is 17, E is 21');
    t.equal(normaliseCnpj('12.ABC.345/01DE-35'), '12ABC34501DE35');
    t.equal(normaliseCnpj('12abc34501de35'), '12ABC34501DE35', 'typed in lower case, kept in upper case');
    t.equal(normaliseCnpj('12ABC34501DE36'), null, 'a wrong check digit');
    t.equal(normaliseCnpj('12ABC34501DE3A'), null, 'check digits are digits');
    t.equal(normaliseCnpj('12ABÇ34501DE35'), null, 'letters A to Z only');
    t.equal(normaliseCnpj('12AB_34501DE35'), null, 'no other characters');
    t.equal(
      normaliseCnpj(`12ABC34501Dſ${cnpjCheckDigits('12ABC34501DS')}`),
      null,
      'not even one that upper-cases to a letter (ſ to S)',
    );

    const consents = schemasOf('consents-3.3.1');
    const pattern = new RegExp(consents.BusinessEntityDocument!.properties.identification!.pattern);
    t.match(normaliseCnpj('12.ABC.345/01DE-35')!, pattern, 'what we send is what the consents file takes');
    const accounts = schemasOf('accounts-2.4.2');
    t.notMatch(
      '12ABC34501DE35',
      new RegExp(accounts.AccountData!.properties.companyCnpj!.pattern),
      'accounts 2.4.2 still wants digits: an answer carrying one fails its schema, as published',
    );
  },
);
