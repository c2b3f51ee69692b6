// Import boundaries of the house style, checked with full path resolution so
// they cannot erode silently: no deep imports across packages, no `../../`
// escapes, the pure libs import nothing from Node, libs never import apps,
// and every package declares the packages its sources load at run time.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { builtinModules } from 'node:module';
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = resolve(import.meta.dirname, '../..');
const PURE_LIBS = new Set(['protocol', 'scheduling']);
const IMPORT_RE = /(?:^|\n)\s*(?:import|export)\b[^'"`;]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

interface Pkg {
  dir: string;
  name: string;
  kind: 'lib' | 'app';
  exports: Set<string>;
  /** Its `dependencies`: what a production install (no devDependencies) gives it. */
  dependencies: Set<string>;
}

function packages(): Pkg[] {
  const out: Pkg[] = [];
  for (const kind of ['lib', 'app'] as const) {
    const base = join(root, `${kind}s`);
    if (!existsSync(base)) continue;
    for (const entry of readdirSync(base)) {
      const manifest = join(base, entry, 'package.json');
      if (!existsSync(manifest)) continue;
      const json = JSON.parse(readFileSync(manifest, 'utf8')) as {
        name: string;
        exports?: Record<string, string>;
        dependencies?: Record<string, string>;
      };
      out.push({
        dir: join(base, entry),
        name: json.name,
        kind,
        exports: new Set(Object.keys(json.exports ?? {})),
        dependencies: new Set(Object.keys(json.dependencies ?? {})),
      });
    }
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const files: string[] = [];
  for (const entry of readdirSync(dir)) {
    const full = join(dir, entry);
    if (entry === 'node_modules') continue;
    if (statSync(full).isDirectory()) files.push(...sourceFiles(full));
    else if (/\.(ts|js|mjs)$/.test(entry)) files.push(full);
  }
  return files;
}

export function importsOf(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(IMPORT_RE)) found.push((match[1] ?? match[2])!);
  return found;
}

const isBuiltin = (spec: string): boolean => spec.startsWith('node:') || builtinModules.includes(spec.split('/')[0]!);

function violations(pkgs: Pkg[]): string[] {
  const byName = new Map(pkgs.map((p) => [p.name, p]));
  const problems: string[] = [];
  for (const pkg of pkgs) {
    const lib = pkg.dir.split(sep).at(-1)!;
    for (const file of sourceFiles(pkg.dir)) {
      const where = relative(root, file);
      const isSource = file.startsWith(join(pkg.dir, 'src') + sep);
      for (const spec of importsOf(readFileSync(file, 'utf8'))) {
        if (spec.startsWith('.')) {
          const target = resolve(dirname(file), spec);
          if (!target.startsWith(pkg.dir + sep)) problems.push(`${where}: '${spec}' leaves its package`);
          continue;
        }
        if (pkg.kind === 'lib' && isSource && PURE_LIBS.has(lib) && isBuiltin(spec)) {
          problems.push(`${where}: pure lib imports Node built-in '${spec}'`);
        }
        const match = /^(@switchyard\/[^/]+)(\/.*)?$/.exec(spec);
        if (!match) continue;
        const target = byName.get(match[1]!);
        if (!target) {
          problems.push(`${where}: unknown package '${match[1]}'`);
          continue;
        }
        if (!target.exports.has(`.${match[2] ?? ''}`)) problems.push(`${where}: '${spec}' is not a public entry`);
        if (pkg.kind === 'lib' && target.kind === 'app') problems.push(`${where}: a lib imports app '${spec}'`);
      }
    }
  }
  return problems;
}

/**
 * Clients only some deployments use, imported on first use: each costs
 * start time and tens of MB (the Kubernetes client alone ~90 MB and half a
 * second per scheduler) that the memory and file leases, an in-process
 * route cache and static tokens never need.
 */
const LAZY_PACKAGES = ['@kubernetes/client-node', 'ioredis', 'jose'];
const STATIC_VALUE_IMPORT_RE = /(?:^|\n)\s*(?:import|export)\s+(?!type\b)[^'"`;]*?from\s*['"]([^'"]+)['"]/g;

export function eagerImportsOf(text: string): string[] {
  return [...text.matchAll(STATIC_VALUE_IMPORT_RE)].map((m) => m[1]!).filter((spec) => LAZY_PACKAGES.includes(spec));
}

/** Imports that load code at run time: not `import type` (erased when types are stripped). */
const VALUE_IMPORT_RE =
  /(?:^|\n)\s*(?:import|export)\s+(?!type\b)[^'"`;]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** The npm packages `text` loads at run time (`@scope/name` or `name`), Node's built-ins left out. */
export function runtimePackagesOf(text: string): string[] {
  const specs = [...text.matchAll(VALUE_IMPORT_RE)].map((m) => (m[1] ?? m[2])!);
  return specs
    .filter((spec) => !spec.startsWith('.') && !isBuiltin(spec))
    .map((spec) =>
      spec
        .split('/')
        .slice(0, spec.startsWith('@') ? 2 : 1)
        .join('/'),
    );
}

describe('import boundaries', () => {
  it('hold across every package', () => {
    const pkgs = packages();
    assert.ok(pkgs.length > 0, 'no packages found');
    assert.deepEqual(violations(pkgs), []);
  });

  it('load optional clients only when used (dynamic import; types are free)', () => {
    const eager: string[] = [];
    for (const pkg of packages()) {
      for (const file of sourceFiles(join(pkg.dir, 'src'))) {
        for (const spec of eagerImportsOf(readFileSync(file, 'utf8'))) eager.push(`${relative(root, file)}: ${spec}`);
      }
    }
    assert.deepEqual(eager, []);
    const sample = [
      "import type { KubeConfig } from '@kubernetes/client-node';",
      "import { KubeConfig } from '@kubernetes/client-node';",
      "import { type Redis } from 'ioredis';",
      "const jose = await import('jose');",
    ].join('\n');
    assert.deepEqual(eagerImportsOf(sample), ['@kubernetes/client-node', 'ioredis']);
  });

  // A production install (the image's `npm ci --omit=dev`) has only these;
  // a package found in the workspace's node_modules through another's
  // declaration, or as a devDependency, would be missing there.
  it('declare in each package.json the packages its sources load at run time', () => {
    const undeclared: string[] = [];
    for (const pkg of packages()) {
      for (const file of sourceFiles(join(pkg.dir, 'src'))) {
        for (const name of runtimePackagesOf(readFileSync(file, 'utf8'))) {
          if (!pkg.dependencies.has(name)) undeclared.push(`${relative(root, file)}: ${name}`);
        }
      }
    }
    assert.deepEqual([...new Set(undeclared)], []);
    const sample = [
      "import type { Server } from '@modelcontextprotocol/server';",
      "import { McpServer } from '@modelcontextprotocol/server';",
      "import { type Redis } from 'ioredis';",
      "import { setTimeout } from 'node:timers/promises';",
      "const { SignJWT } = await import('jose');",
      "import { x } from './local.ts';",
      "import { Agent } from 'undici/lib/dispatcher/agent.js';",
    ].join('\n');
    assert.deepEqual(runtimePackagesOf(sample), ['@modelcontextprotocol/server', 'ioredis', 'jose', 'undici']);
  });

  it('lib entries use explicit named exports', () => {
    for (const pkg of packages().filter((p) => p.kind === 'lib')) {
      const index = join(pkg.dir, 'src/index.ts');
      assert.ok(existsSync(index), `${pkg.name} has no src/index.ts`);
      assert.doesNotMatch(readFileSync(index, 'utf8'), /export \*/, `${pkg.name} uses export *`);
    }
  });

  // The checker itself must be able to fail: feed it known-bad sources.
  it('detects the imports it is meant to forbid', () => {
    const bad = [
      "import { x } from 'node:fs';",
      "import { y } from '@switchyard/protocol/src/identity.ts';",
      "export { z } from '../../other/src/index.ts';",
      "const m = await import('node:http');",
    ].join('\n');
    assert.deepEqual(importsOf(bad), [
      'node:fs',
      '@switchyard/protocol/src/identity.ts',
      '../../other/src/index.ts',
      'node:http',
    ]);
    assert.ok(isBuiltin('node:fs') && isBuiltin('fs') && !isBuiltin('zod'));
  });
});
