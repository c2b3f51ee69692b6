// Lint: correctness rules from typescript-eslint plus the import boundaries of
// the house style. test/architecture/boundaries.test.ts checks the same
// boundaries with full path resolution; this gives the fast editor signal.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const deepImport = {
  group: ['@switchyard/*/*', '!@switchyard/*/internal', '!@switchyard/*/testing'],
  message: 'Import a lib through its public entry (or its /internal or /testing entry), never its files.',
};
const crossPackage = {
  regex: '^(\\.\\./){2,}',
  message: 'Do not reach into another package with ../../; import it by name.',
};

export default tseslint.config(
  { ignores: ['node_modules/', '.build/', '.tools/', 'test-artifacts/', 'charts/', 'apps/*/static/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-imports': ['error', { patterns: [deepImport, crossPackage] }],
    },
  },
  {
    // Tests read JSON answers loosely; the assertions are the type check there.
    files: ['**/test/**', 'test/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // A promise a test drops is an assertion that never runs (`assert.rejects` without await) or a
    // failure nobody sees; node:test's own it/describe are awaited by the runner. Typed, so tests only.
    files: ['**/test/**/*.ts', 'test/**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['it', 'describe', 'test', 'suite'] },
          ],
        },
      ],
    },
  },
  {
    // test/ is one project: its suites share test/support by relative path.
    files: ['test/**'],
    rules: { 'no-restricted-imports': ['error', { patterns: [deepImport] }] },
  },
  {
    // The protocol and the scheduling core are pure: no Node built-ins, no I/O.
    files: ['libs/protocol/src/**', 'libs/scheduling/src/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [deepImport, crossPackage, { regex: '^node:', message: 'This lib is pure: no node: imports.' }],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'setTimeout', message: 'Pure lib: time is an input.' },
        { name: 'setInterval', message: 'Pure lib: time is an input.' },
        { name: 'process', message: 'Pure lib: no process access.' },
      ],
      'no-restricted-properties': [
        'error',
        { object: 'Math', property: 'random', message: 'Use a seeded PRNG (seedrandom).' },
        { object: 'Date', property: 'now', message: 'Pure lib: time is an input.' },
      ],
    },
  },
);
