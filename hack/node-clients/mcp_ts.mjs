// The TypeScript MCP SDK (@modelcontextprotocol/sdk) against an MCP server over streamable
// HTTP, as a test drives it.
//
//   node mcp_ts.mjs <mcp-url> <token> '<calls as JSON: [[tool, arguments], ...]>'
//
// Prints one JSON object: the server's name, the listed tools (name, whether it has an
// outputSchema), and each call's content text, structuredContent and isError. listTools
// comes first, so the SDK checks every call's structuredContent against the tool's
// outputSchema itself (an invalid one is an error of that call). A refused connection
// (a wrong token) is reported as error/errorName/status.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token, callsJson = '[]'] = process.argv.slice(2);
const report = { calls: [] };
let step = 'connect';
const client = new Client({ name: 'swarmkit-ts-sdk-test', version: '1.0.0' });
try {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  report.server = client.getServerVersion();
  report.protocolVersion = transport.protocolVersion ?? null;
  step = 'list';
  const { tools } = await client.listTools();
  report.tools = tools.map((t) => ({ name: t.name, outputSchema: Boolean(t.outputSchema) }));
  for (const [name, args] of JSON.parse(callsJson)) {
    step = `call ${name}`;
    try {
      const result = await client.callTool({ name, arguments: args });
      report.calls.push({
        name,
        text: (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n'),
        structuredContent: result.structuredContent ?? null,
        isError: Boolean(result.isError),
      });
    } catch (err) {
      report.calls.push({ name, error: String(err?.message ?? err), errorName: err?.name });
    }
  }
  await client.close();
} catch (err) {
  report.errorStep = step;
  report.error = String(err?.message ?? err);
  report.errorName = err?.name ?? typeof err;
  report.status = err?.code ?? null;
}
console.log(JSON.stringify(report));
process.exit(0);
