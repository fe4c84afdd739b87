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
);
