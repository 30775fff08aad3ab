/**
 * Fleet config → the descriptors of a profile's MCP tools (K3): the operator's declaration is the
 * only authority, an undeclared remote read needs consent as external egress, a stdio server's
 * read synthesises nothing, and undeclared tools are not offered.
 */
import { describe, expect, it } from 'vitest';
import { permissionRequired } from '@everdict/contracts';
import type { FleetConfig, FleetMcpUse, ToolDescriptor } from '@everdict/contracts';
import type { Tool } from '@everdict/agent-runtime';
import { bridgedToolName } from '@everdict/mcp';
import { validateFleetConfig } from '@everdict/service-kit';
import { declaredMcpTools } from '../src/mcpTools.js';

/** A tool as the bridge hands it out: what the server's self-description made of it. */
function bridged(server: string, name: string, transport: 'stdio' | 'remote', self: Pick<ToolDescriptor, 'access' | 'effects'>): Tool {
  return {
    descriptor: { name: bridgedToolName(server, name), description: `${name} (server's words)`, inputSchema: { type: 'object' }, origin: 'workspace', transport, argumentValidation: 'server', ...self },
    invoke: async () => ({ content: `${name} ran` }),
  };
}

const remote = {
  tools: [
    // Self-claimed read-only, closed world: the bridge's default read, with the structural egress.
    bridged('tickets', 'lookup_ticket', 'remote', { access: 'read', effects: { dataAccess: { egress: 'external' } } }),
    // Self-claimed destructive: the bridge made it a write.
    bridged('tickets', 'archive_ticket', 'remote', { access: 'write' }),
    bridged('tickets', 'get_or_create_ticket', 'remote', { access: 'read', effects: { dataAccess: { egress: 'external' } } }),
    bridged('tickets', 'search', 'remote', { access: 'read', effects: { dataAccess: { egress: 'external' } } }),
    bridged('tickets', 'not_declared', 'remote', { access: 'read' }),
  ],
};
const local = { tools: [bridged('everything', 'echo', 'stdio', { access: 'read' }), bridged('everything', 'get-env', 'stdio', { access: 'read' })] };

const byName = (tools: readonly Tool[]) => Object.fromEntries(tools.map((t) => [t.descriptor.name, t.descriptor]));

describe('declared MCP tools', () => {
  const use: FleetMcpUse = {
    server: 'tickets',
    tools: {
      lookup_ticket: { access: 'read', effects: { dataAccess: { egress: 'internal' } } },
      archive_ticket: { access: 'read', independent: true },
      get_or_create_ticket: { access: 'write' },
      search: { access: 'read' },
      listed_nowhere: { access: 'read' },
    },
  };
  const tools = byName(declaredMcpTools(use, remote));

  it('offers only the declared tools the server lists', () => {
    expect(Object.keys(tools).sort()).toEqual(['tickets__archive_ticket', 'tickets__get_or_create_ticket', 'tickets__lookup_ticket', 'tickets__search']);
  });

  it('the declared access wins over what the server claims, both ways', () => {
    expect(tools.tickets__get_or_create_ticket).toMatchObject({ access: 'write', origin: 'workspace', transport: 'remote' });
    expect(permissionRequired(tools.tickets__get_or_create_ticket!)).toEqual({ required: true, reason: 'write' });
    // The operator declared the server's self-claimed destructive tool a read: the operator speaks for it.
    expect(tools.tickets__archive_ticket).toMatchObject({ access: 'read', independent: true });
  });

  it('an undeclared remote read is external egress (consent); declared effects win', () => {
    expect(tools.tickets__search?.effects).toEqual({ dataAccess: { egress: 'external' } });
    expect(permissionRequired(tools.tickets__search!)).toEqual({ required: true, reason: 'consent_read' });
    expect(tools.tickets__archive_ticket?.effects).toEqual({ dataAccess: { egress: 'external' } });
    expect(tools.tickets__lookup_ticket?.effects).toEqual({ dataAccess: { egress: 'internal' } });
    expect(permissionRequired(tools.tickets__lookup_ticket!)).toEqual({ required: false });
  });

  it('a stdio server read synthesises nothing and is a plain read', () => {
    const got = byName(declaredMcpTools({ server: 'everything', tools: { echo: { access: 'read' } } }, local));
    expect(Object.keys(got)).toEqual(['everything__echo']);
    expect(got.everything__echo).toMatchObject({ access: 'read', transport: 'stdio', argumentValidation: 'server' });
    expect(got.everything__echo?.effects).toBeUndefined();
    expect(got.everything__echo?.independent).toBeUndefined();
    expect(permissionRequired(got.everything__echo!)).toEqual({ required: false });
  });

  it('keeps the schema and description the server lists (what the model sees and the versions hash)', () => {
    expect(tools.tickets__lookup_ticket).toMatchObject({ description: "lookup_ticket (server's words)", inputSchema: { type: 'object' } });
  });
});

describe('mcpServers and profile mcp in the fleet config', () => {
  const config = (over: Partial<FleetConfig> & { mcp?: unknown }): unknown => {
    const { mcp, ...rest } = over;
    return {
      version: 1,
      routes: { main: { adapter: 'scripted', model: 's', scriptPath: 's.json' } },
      profiles: { agent: { version: '1', route: 'main', prompt: 'p', ...(mcp === undefined ? {} : { mcp }) } },
      caseTypes: { ticket: { rootProfile: 'agent', scope: { reads: 'all', writes: [], forbidden: [] } } },
      ...rest,
    };
  };
  const problems = (value: unknown) => {
    try {
      validateFleetConfig(value);
      return [];
    } catch (err) {
      return (err as { problems: { path: string; message: string }[] }).problems.map((p) => p.path);
    }
  };
  const servers = { files: { transport: 'stdio' as const, command: 'node', args: ['files.js'], env: { TOKEN: 'EVERDICT_FILES_TOKEN' } }, tickets: { transport: 'http' as const, url: 'https://tickets.example/mcp', authHeaderEnv: 'TICKETS_AUTH' } };

  it('accepts stdio and http servers and declared tools', () => {
    expect(problems(config({ mcpServers: servers, mcp: [{ server: 'files', tools: { read_file: { access: 'read' } } }, { server: 'tickets', tools: { lookup: { access: 'read', effects: { dataAccess: { egress: 'internal' } } } } }] }))).toEqual([]);
  });

  it('refuses an unknown server, a server named twice, a tool without access, a transport mix-up', () => {
    expect(problems(config({ mcpServers: servers, mcp: [{ server: 'nope', tools: { x: { access: 'read' } } }, { server: 'files', tools: { a: { access: 'read' } } }, { server: 'files', tools: { b: { access: 'read' } } }] }))).toEqual([
      '/profiles/agent/mcp/0/server',
      '/profiles/agent/mcp/2/server',
    ]);
    expect(problems(config({ mcpServers: servers, mcp: [{ server: 'files', tools: { a: {} } }] }))).toEqual([expect.stringMatching(/^\/profiles\/agent\/mcp\/0\/tools/)]);
    expect(problems(config({ mcpServers: { bad: { transport: 'http', command: 'node' } } as never }))).not.toEqual([]);
    expect(problems(config({ mcpServers: { bad: { transport: 'stdio', command: 'node', env: { TOKEN: 'not a variable name' } } } as never }))).not.toEqual([]);
  });
});
