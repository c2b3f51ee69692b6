// The `conformance` fixture: an in-process engine exposing exactly the tools,
// resources and prompts the server scenarios of @modelcontextprotocol/conformance
// call, so the official suite exercises the runtime's /mcp endpoint end to end.
// Kept here, not in the lib: it is test surface, plugged in through the
// host's `engines` option.
import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/server';
import { ResourceTemplate, completable, fromJsonSchema, type ServerContext } from '@modelcontextprotocol/server';
import type { Engine, SandboxInstance } from '@switchyard/sandbox';

// 1x1 red PNG and a 44-byte silent WAV header: the smallest valid payloads.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=';

const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Options that send a server-to-client request on the calling request's own
 * POST stream. The SDK's `requestSampling`/`elicitInput` (2.4) attach no
 * related request id by default, so the transport writes the request to the
 * standalone GET stream and drops it when that stream is not open yet; a
 * client opens that stream without awaiting it, beside its first tool call,
 * so the request was lost whenever the tool ran first (through the gateway's
 * extra hops, about one suite run in five). The transport spec asks for
 * messages on a POST stream to relate to its request, and for those on the
 * GET stream to be unrelated to any running request.
 */
const onCallingStream = (ctx: ServerContext) => ({ relatedRequestId: ctx.mcpReq.id });

function registerTools(server: McpServer): void {
  server.registerTool('test_simple_text', { description: 'Returns simple text' }, () =>
    text('This is a simple text response for testing.'),
  );
  server.registerTool('test_image_content', { description: 'Returns an image' }, () => ({
    content: [{ type: 'image' as const, data: PNG, mimeType: 'image/png' }],
  }));
  server.registerTool('test_audio_content', { description: 'Returns audio' }, () => ({
    content: [{ type: 'audio' as const, data: WAV, mimeType: 'audio/wav' }],
  }));
  server.registerTool('test_embedded_resource', { description: 'Returns an embedded resource' }, () => ({
    content: [
      {
        type: 'resource' as const,
        resource: {
          uri: 'test://embedded-resource',
          mimeType: 'text/plain',
          text: 'This is an embedded resource content.',
        },
      },
    ],
  }));
  server.registerTool('test_multiple_content_types', { description: 'Returns mixed content' }, () => ({
    content: [
      { type: 'text' as const, text: 'Multiple content types test:' },
      { type: 'image' as const, data: PNG, mimeType: 'image/png' },
      {
        type: 'resource' as const,
        resource: {
          uri: 'test://mixed-content-resource',
          mimeType: 'application/json',
          text: JSON.stringify({ test: 'data', value: 123 }),
        },
      },
    ],
  }));
  server.registerTool('test_tool_with_logging', { description: 'Logs while running' }, async (ctx) => {
    await ctx.mcpReq.log('info', 'Tool execution started');
    await pause(50);
    await ctx.mcpReq.log('info', 'Tool processing data');
    await pause(50);
    await ctx.mcpReq.log('info', 'Tool execution completed');
    return text('Logging tool completed');
  });
  server.registerTool('test_error_handling', { description: 'Always fails' }, () => {
    throw new Error('This tool intentionally returns an error for testing');
  });
  server.registerTool('test_tool_with_progress', { description: 'Reports progress' }, async (ctx) => {
    const token = ctx.mcpReq._meta?.progressToken;
    for (const progress of [0, 50, 100]) {
      if (token !== undefined) {
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken: token, progress, total: 100 },
        });
      }
      if (progress < 100) await pause(50);
    }
    return text('Progress tool completed');
  });
  server.registerTool(
    'test_sampling',
    { description: 'Asks the client to sample', inputSchema: z.object({ prompt: z.string() }) },
    async ({ prompt }, ctx: ServerContext) => {
      const result = await ctx.mcpReq.requestSampling(
        {
          messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
          maxTokens: 100,
        },
        onCallingStream(ctx),
      );
      const content = Array.isArray(result.content) ? result.content[0] : result.content;
      return text(`LLM response: ${content?.type === 'text' ? content.text : JSON.stringify(content)}`);
    },
  );
  server.registerTool(
    'test_elicitation',
    { description: 'Asks the user', inputSchema: z.object({ message: z.string() }) },
    async ({ message }, ctx: ServerContext) => {
      const result = await ctx.mcpReq.elicitInput(
        {
          message,
          requestedSchema: {
            type: 'object',
            properties: {
              username: { type: 'string', description: "User's response" },
              email: { type: 'string', description: "User's email address" },
            },
            required: ['username', 'email'],
          },
        },
        onCallingStream(ctx),
      );
      return text(`User response: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
    },
  );
  server.registerTool(
    'test_elicitation_sep1034_defaults',
    { description: 'Elicitation with defaults' },
    async (ctx) => {
      const result = await ctx.mcpReq.elicitInput(
        {
          message: 'Please review and update the form fields with defaults',
          requestedSchema: {
            type: 'object',
            properties: {
              name: { type: 'string', description: 'User name', default: 'John Doe' },
              age: { type: 'integer', description: 'User age', default: 30 },
              score: { type: 'number', description: 'User score', default: 95.5 },
              status: {
                type: 'string',
                description: 'User status',
                enum: ['active', 'inactive', 'pending'],
                default: 'active',
              },
              verified: { type: 'boolean', description: 'Verification status', default: true },
            },
            required: [],
          },
        },
        onCallingStream(ctx),
      );
      return text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
    },
  );
  server.registerTool('test_elicitation_sep1330_enums', { description: 'Elicitation with enums' }, async (ctx) => {
    const result = await ctx.mcpReq.elicitInput(
      {
        message: 'Please select options from the enum fields',
        requestedSchema: {
          type: 'object',
          properties: {
            untitledSingle: { type: 'string', description: 'Untitled single', enum: ['option1', 'option2', 'option3'] },
            titledSingle: {
              type: 'string',
              description: 'Titled single',
              oneOf: [
                { const: 'value1', title: 'First Option' },
                { const: 'value2', title: 'Second Option' },
                { const: 'value3', title: 'Third Option' },
              ],
            },
            legacyEnum: {
              type: 'string',
              description: 'Legacy titled',
              enum: ['opt1', 'opt2', 'opt3'],
              enumNames: ['Option One', 'Option Two', 'Option Three'],
            },
            untitledMulti: {
              type: 'array',
              description: 'Untitled multi',
              items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
            },
            titledMulti: {
              type: 'array',
              description: 'Titled multi',
              items: {
                anyOf: [
                  { const: 'value1', title: 'First Choice' },
                  { const: 'value2', title: 'Second Choice' },
                  { const: 'value3', title: 'Third Choice' },
                ],
              },
            },
          },
          required: [],
        },
      } as Parameters<ServerContext['mcpReq']['elicitInput']>[0],
      onCallingStream(ctx),
    );
    return text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
  });
  server.registerTool('test_reconnection', { description: 'Closes its SSE stream mid-call' }, async (ctx) => {
    // Close the POST stream so the client resumes with Last-Event-ID and
    // receives the result from the session's event store.
    await pause(100);
    ctx.http?.closeSSE?.();
    await pause(100);
    return text('Reconnection test completed successfully');
  });
  server.registerTool(
    'json_schema_2020_12_tool',
    {
      description: 'Tool with JSON Schema 2020-12 features',
      inputSchema: fromJsonSchema({
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        $defs: {
          address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } },
        },
        properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
        additionalProperties: false,
      }),
    },
    (args) => text(`received ${JSON.stringify(args)}`),
  );
}

function registerResources(server: McpServer): void {
  server.registerResource(
    'static-text',
    'test://static-text',
    { description: 'A static text resource', mimeType: 'text/plain' },
    (uri) => ({
      contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }],
    }),
  );
  server.registerResource(
    'static-binary',
    'test://static-binary',
    { description: 'A static binary resource', mimeType: 'image/png' },
    (uri) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }] }),
  );
  server.registerResource(
    'watched-resource',
    'test://watched-resource',
    { description: 'A resource clients may subscribe to', mimeType: 'text/plain' },
    (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'watched' }] }),
  );
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'A templated resource', mimeType: 'application/json' },
    (uri, { id }) => ({
      contents: [
        {
          uri: uri.href,
          mimeType: 'application/json',
          text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${String(id)}` }),
        },
      ],
    }),
  );
  // Subscriptions are accepted and tracked; the fixture never changes a resource.
  const subscribed = new Set<string>();
  server.server.setRequestHandler('resources/subscribe', (req) => {
    if (subscribed.size < 1024) subscribed.add(req.params.uri);
    return {};
  });
  server.server.setRequestHandler('resources/unsubscribe', (req) => {
    subscribed.delete(req.params.uri);
    return {};
  });
}

function registerPrompts(server: McpServer): void {
  const user = (content: Record<string, unknown>) => ({ role: 'user' as const, content }) as never;
  server.registerPrompt('test_simple_prompt', { description: 'A simple prompt' }, () => ({
    messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })],
  }));
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with arguments',
      argsSchema: z.object({
        arg1: completable(z.string().describe('First test argument'), (value) =>
          ['paris', 'park', 'party', 'test'].filter((v) => v.startsWith(value)),
        ),
        arg2: z.string().describe('Second test argument'),
      }),
    },
    ({ arg1, arg2 }) => ({
      messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` })],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    { description: 'A prompt embedding a resource', argsSchema: z.object({ resourceUri: z.string() }) },
    ({ resourceUri }) => ({
      messages: [
        user({
          type: 'resource',
          resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' },
        }),
        user({ type: 'text', text: 'Please process the embedded resource above.' }),
      ],
    }),
  );
  server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, () => ({
    messages: [
      user({ type: 'image', data: PNG, mimeType: 'image/png' }),
      user({ type: 'text', text: 'Please analyze the image above.' }),
    ],
  }));
}

/** The conformance fixture engine: stateless, so every instance is the same surface. */
export function conformanceEngine(): Engine {
  return {
    async create(): Promise<SandboxInstance> {
      return {
        capabilities: {
          tools: { listChanged: true },
          resources: { subscribe: true, listChanged: true },
          prompts: { listChanged: true },
          logging: {},
          completions: {},
        },
        dead: false,
        onDead() {},
        bind() {},
        register(server) {
          registerTools(server);
          registerResources(server);
          registerPrompts(server);
          return () => undefined;
        },
        async destroy() {},
      };
    },
  };
}
