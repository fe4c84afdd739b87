import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.tap/', 'oclif.manifest.json', 'test-output/', '.svc-upgrade/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-require-imports': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', setTimeout: 'readonly' } },
  },
  {
    // Scripts for customers to run with Node 20+, which has these as globals.
    files: ['docs/**/*.mjs'],
    languageOptions: {
      globals: { fetch: 'readonly', URL: 'readonly', URLSearchParams: 'readonly', Buffer: 'readonly' },
    },
  },
  {
    // Issue 41: the simulated banks are the connector's independent counterpart. Sharing its code let one
    // misreading of the standards hide on both sides, so src/consent-bank/ may read the Open Finance files
    // (src/open-finance/) but never the connector (src/banks/) or the widget (src/widget/).
    files: ['src/consent-bank/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)(banks|widget)(/|$)',
              message:
                "src/consent-bank/ must not import the connector (src/banks/) or the widget (src/widget/): state the bank's own reading, or share it through src/open-finance/.",
            },
          ],
        },
      ],
    },
  },
);
