import { z } from 'zod';
/** Options of the gateway (`switchyard-gateway`). */
export declare const gatewayConfigSchema: z.ZodObject<{
    logLevel: z.ZodDefault<z.ZodEnum<{
        error: "error";
        fatal: "fatal";
        warn: "warn";
        info: "info";
        debug: "debug";
        trace: "trace";
        silent: "silent";
    }>>;
    drainDelayMs: z.ZodDefault<z.ZodNumber>;
    host: z.ZodDefault<z.ZodString>;
    port: z.ZodDefault<z.ZodNumber>;
    schedulers: z.ZodArray<z.ZodURL>;
    upstreamMode: z.ZodDefault<z.ZodEnum<{
        proxy: "proxy";
        direct: "direct";
    }>>;
    upstreamToken: z.ZodOptional<z.ZodString>;
    eventStreamsOverHttp2: z.ZodDefault<z.ZodBoolean>;
    eventStreamPingIntervalMs: z.ZodDefault<z.ZodNumber>;
    identity: z.ZodPrefault<z.ZodObject<{
        class: z.ZodDefault<z.ZodString>;
        process: z.ZodDefault<z.ZodString>;
        thread: z.ZodDefault<z.ZodString>;
    }, z.core.$strip>>;
    defaultClass: z.ZodDefault<z.ZodString>;
    routeCache: z.ZodPrefault<z.ZodObject<{
        maxEntries: z.ZodDefault<z.ZodNumber>;
        ttlMs: z.ZodDefault<z.ZodNumber>;
        redisUrl: z.ZodOptional<z.ZodString>;
    }, z.core.$strip>>;
    auth: z.ZodPrefault<z.ZodObject<{
        mode: z.ZodDefault<z.ZodEnum<{
            jwt: "jwt";
            none: "none";
            bearer: "bearer";
        }>>;
        tokens: z.ZodDefault<z.ZodArray<z.ZodString>>;
        tokensFile: z.ZodOptional<z.ZodString>;
        jwksUrl: z.ZodOptional<z.ZodURL>;
        issuer: z.ZodOptional<z.ZodString>;
        audience: z.ZodOptional<z.ZodString>;
    }, z.core.$strip>>;
    allowedOrigins: z.ZodDefault<z.ZodArray<z.ZodString>>;
    bodyBytesMax: z.ZodDefault<z.ZodNumber>;
    headerBytesMax: z.ZodDefault<z.ZodNumber>;
    principalConcurrencyMax: z.ZodDefault<z.ZodNumber>;
    idleTimeoutMs: z.ZodDefault<z.ZodNumber>;
}, z.core.$strip>;
export type GatewayConfig = z.output<typeof gatewayConfigSchema>;
