// ESLint (flat config): eslint's and typescript-eslint's recommended rules for the extension's
// sources, tests and build scripts. `npm run lint`; scripts/check runs it.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['out/', 'out-test/', 'node_modules/', 'python/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { console: 'readonly', process: 'readonly', __dirname: 'readonly', require: 'readonly', module: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', Buffer: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly' },
    },
    rules: {
      // `_name` marks a parameter or binding kept for its position
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // CommonJS scripts run by node (the stand-in host of the Host tests)
    files: ['**/*.js'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
