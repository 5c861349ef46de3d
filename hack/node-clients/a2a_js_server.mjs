// An A2A agent built with the A2A JavaScript SDK's server (@a2a-js/sdk 1.x: A2A 1.0 over
// JSON-RPC, Express), for testing our runner's remote agent skill against a second SDK.
//
//   node a2a_js_server.mjs <port> <token>
//
// Every call to /a2a needs `Authorization: Bearer <token>` (else 401). The agent answers
// "js agent heard: <text>"; a message starting with "deploy" first asks which
// environment (input-required) and completes with "deployed to <answer>" once the same
// task gets the answer. Prints "listening <port>" when ready and one JSON line per
// message received ({"received": text, "taskId", "contextId", "metadata"}).
import express from 'express';
import { AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const [port, token] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;

const card = {
  name: 'js-oracle',
  description: 'An A2A agent built with the A2A JavaScript SDK.',
  supportedInterfaces: [
    { url: `${base}/a2a`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
  ],
  version: '1.0.0',
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {
    bearer: { scheme: { $case: 'httpAuthSecurityScheme', value: { scheme: 'Bearer', description: '', bearerFormat: '' } } },
  },
  securityRequirements: [{ schemes: { bearer: { list: [] } } }],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [
    {
      id: 'oracle',
      name: 'oracle',
      description: 'Answers, and asks back before a deploy.',
      tags: ['test'],
      examples: [],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    },
  ],
  signatures: [],
};

const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const textOf = (message) =>
  (message?.parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

function agentMessage(taskId, contextId, value) {
  return {
    role: Role.ROLE_AGENT,
    messageId: crypto.randomUUID(),
    parts: [text(value)],
    taskId,
    contextId,
    extensions: [],
    metadata: {},
    referenceTaskIds: [],
  };
}

class Executor {
  cancelTask = async () => {};

  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx;
    const said = textOf(userMessage).trim();
    console.log(JSON.stringify({ received: said, taskId, contextId, metadata: userMessage.metadata ?? null }));
    const status = (state, message) =>
      AgentEvent.statusUpdate({
        taskId,
        contextId,
        status: { state, timestamp: new Date().toISOString(), message },
        metadata: undefined,
      });
    if (!ctx.task) {
      bus.publish(
        AgentEvent.task({
          id: taskId,
          contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: new Date().toISOString(), message: undefined },
          artifacts: [],
          history: [userMessage],
          metadata: {},
        })
      );
    }
    bus.publish(status(TaskState.TASK_STATE_WORKING, undefined));
    const asking = !ctx.task && said.toLowerCase().startsWith('deploy');
    if (asking) {
      const question = agentMessage(taskId, contextId, 'Which environment should I deploy to?');
      bus.publish(status(TaskState.TASK_STATE_INPUT_REQUIRED, question));
      return;
    }
    const answer = ctx.task ? `deployed to ${said}` : `js agent heard: ${said}`;
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: { artifactId: crypto.randomUUID(), name: 'answer', description: '', parts: [text(answer)], metadata: undefined, extensions: [] },
        lastChunk: true,
        append: false,
        metadata: undefined,
      })
    );
    bus.publish(status(TaskState.TASK_STATE_COMPLETED, undefined));
  }
}

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Executor());
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
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
