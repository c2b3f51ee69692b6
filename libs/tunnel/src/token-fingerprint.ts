import { hash, timingSafeEqual } from 'node:crypto';

/**
 * Prefixed to a token's digest before it is hashed again: a fingerprint is no
 * SHA-256 that anything else computes from the token (the endpoint's digest,
 * some other system's hash of the same secret).
 */
const DOMAIN = Buffer.from('switchyard join token fingerprint v1\0');
/** 96 bits: two tokens never share one by chance, and what is published is not the whole digest. */
const FINGERPRINT_BYTES = 12;

/**
 * What replicas publish with each runtime they hold to say which join token
 * its tunnel came with, from the token's SHA-256 (`tokenDigest`): 16
 * base64url characters of a domain-separated SHA-256 of the digest. Never the
 * token; tokens are at least 16 characters, and one drawn at random cannot be
 * found from it. A release that changes the derivation must publish it under
 * another name: replicas compare fingerprints as they come.
 */
export function fingerprintOfDigest(tokenDigest: Buffer): string {
  return hash('sha256', Buffer.concat([DOMAIN, tokenDigest]), 'buffer')
    .subarray(0, FINGERPRINT_BYTES)
    .toString('base64url');
}

/** The fingerprint of `token` (see `fingerprintOfDigest`). */
export function joinTokenFingerprint(token: string): string {
  return fingerprintOfDigest(hash('sha256', token, 'buffer'));
}

/** Whether two fingerprints are the same, in constant time for equal lengths. */
export function sameFingerprint(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
