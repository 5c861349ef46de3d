// An A2A agent built with the A2A JavaScript SDK's 0.3 line (@a2a-js/sdk 0.3.x, installed
// as a2a-js-sdk-v03: A2A 0.3 over JSON-RPC, Express), for testing our runner's remote agent
// skill against a second SDK in its 0.3 dialect.
//
//   node a2a_js_v03_server.mjs <port> <token>
//
// The same agent as a2a_js_server.mjs: /a2a needs `Authorization: Bearer <token>` (else
// 401); it answers "js agent heard: <text>"; a message starting with "deploy" first asks
// which environment (input-required) and completes with "deployed to <answer>". Prints
// "listening <port>" when ready and one JSON line per message received or call refused.
import express from 'express';
import { DefaultRequestHandler, InMemoryTaskStore } from 'a2a-js-sdk-v03/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from 'a2a-js-sdk-v03/server/express';

const [port, token] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;

const card = {
  name: 'js-oracle',
  description: 'An A2A agent built with the A2A JavaScript SDK (0.3).',
  url: `${base}/a2a`,
  preferredTransport: 'JSONRPC',
  protocolVersion: '0.3.0',
  version: '1.0.0',
  capabilities: { streaming: true, pushNotifications: false },
  securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
  security: [{ bearer: [] }],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [
    { id: 'oracle', name: 'oracle', description: 'Answers, and asks back before a deploy.', tags: ['test'] },
  ],
};

const textOf = (message) =>
  (message?.parts ?? []).map((p) => (p.kind === 'text' ? p.text : '')).join('');

class Executor {
  cancelTask = async () => {};

  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx;
    const said = textOf(userMessage).trim();
    console.log(JSON.stringify({ received: said, taskId, contextId, metadata: userMessage.metadata ?? null }));
    const status = (state, message, final) => ({
      kind: 'status-update',
      taskId,
      contextId,
      status: { state, timestamp: new Date().toISOString(), ...(message ? { message } : {}) },
      final,
    });
    if (!ctx.task) {
      bus.publish({
        kind: 'task',
        id: taskId,
        contextId,
        status: { state: 'submitted', timestamp: new Date().toISOString() },
        history: [userMessage],
      });
    }
    bus.publish(status('working', undefined, false));
    if (!ctx.task && said.toLowerCase().startsWith('deploy')) {
      const question = {
        kind: 'message',
        role: 'agent',
        messageId: crypto.randomUUID(),
        parts: [{ kind: 'text', text: 'Which environment should I deploy to?' }],
        taskId,
        contextId,
      };
      bus.publish(status('input-required', question, true));
      bus.finished();
      return;
    }
    const answer = ctx.task ? `deployed to ${said}` : `js agent heard: ${said}`;
    bus.publish({
      kind: 'artifact-update',
      taskId,
      contextId,
      artifact: { artifactId: crypto.randomUUID(), name: 'answer', parts: [{ kind: 'text', text: answer }] },
      lastChunk: true,
    });
    bus.publish(status('completed', undefined, true));
    bus.finished();
  }
}

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Executor());
const app = express();
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
app.use('/a2a', (req, res, next) => {
  if (req.headers.authorization !== `Bearer ${token}`) {
    console.log(JSON.stringify({ refused: req.headers.authorization ? 'wrong token' : 'no token' }));
    res.status(401).set('WWW-Authenticate', 'Bearer').json({ title: 'Unauthorized', status: 401 });
    return;
  }
  next();
});
app.use('/a2a', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const server = app.listen(Number(port), '127.0.0.1', () => console.log(`listening ${port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
