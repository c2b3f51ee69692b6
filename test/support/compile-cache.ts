// Node's compile cache for a test file's own process. `npm run test:unit`
// preloads this module (`--import`) into every test file's process, so the
// file and everything it imports load through the cache: from the second run
// on without the type stripper, about half a second of CPU less per file over
// the suite's two hundred files. Loaded by a plain import (`node --test` on
// one file) it turns the cache on only for what loads after it.
import { enableCompileCache } from 'node:module';

/**
 * The cache folder, or '' where the cache cannot be written or
 * NODE_DISABLE_COMPILE_CACHE turns it off. Asked once, here: a second
 * enableCompileCache() answers with the per-version folder inside the first.
 */
export const compileCacheDirectory: string = enableCompileCache().directory ?? '';
