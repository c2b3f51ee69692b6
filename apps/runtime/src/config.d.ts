import { z } from 'zod';
/** Options of a runtime (`switchyard-runtime`). */
export declare const runtimeConfigSchema: z.ZodObject<{
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
    runtimeId: z.ZodDefault<z.ZodString>;
    schedulerUrl: z.ZodURL;
    joinToken: z.ZodOptional<z.ZodString>;
    joinTokenFile: z.ZodOptional<z.ZodString>;
    classes: z.ZodPrefault<z.ZodRecord<z.ZodString, z.ZodObject<{
        engine: z.ZodEnum<{
            builtin: "builtin";
            stdio: "stdio";
            http: "http";
        }>;
        command: z.ZodOptional<z.ZodString>;
        args: z.ZodOptional<z.ZodArray<z.ZodString>>;
        env: z.ZodOptional<z.ZodRecord<z.ZodString, z.ZodString>>;
        url: z.ZodOptional<z.ZodURL>;
        headers: z.ZodOptional<z.ZodRecord<z.ZodString, z.ZodString>>;
        expireSeconds: z.ZodDefault<z.ZodNumber>;
        warmPool: z.ZodDefault<z.ZodNumber>;
    }, z.core.$strip>>>;
    sandboxesMax: z.ZodDefault<z.ZodNumber>;
    sessionIdleMs: z.ZodDefault<z.ZodNumber>;
    warmPoolRefillDelayMs: z.ZodDefault<z.ZodNumber>;
    metadata: z.ZodDefault<z.ZodRecord<z.ZodString, z.ZodString>>;
    version: z.ZodDefault<z.ZodString>;
    sidecarPort: z.ZodDefault<z.ZodNumber>;
    directListen: z.ZodPrefault<z.ZodObject<{
        enabled: z.ZodDefault<z.ZodBoolean>;
        host: z.ZodDefault<z.ZodString>;
        port: z.ZodDefault<z.ZodNumber>;
        token: z.ZodOptional<z.ZodString>;
    }, z.core.$strip>>;
    metering: z.ZodPrefault<z.ZodObject<{
        redisUrl: z.ZodOptional<z.ZodString>;
        stream: z.ZodDefault<z.ZodString>;
    }, z.core.$strip>>;
    tunnel: z.ZodPrefault<z.ZodObject<{
        pingIntervalMs: z.ZodDefault<z.ZodNumber>;
        transport: z.ZodDefault<z.ZodEnum<{
            http2: "http2";
            websocket: "websocket";
            auto: "auto";
        }>>;
    }, z.core.$strip>>;
}, z.core.$strip>;
export type RuntimeConfig = z.output<typeof runtimeConfigSchema>;
