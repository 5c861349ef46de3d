// The A2A JavaScript SDK's 0.3 line (@a2a-js/sdk 0.3.x, installed as a2a-js-sdk-v03)
// against an agent, as a test drives it.
//
//   node a2a_js_v03.mjs <base-url> <token> <text> [all|auth]
//
// Prints one JSON object: the card the SDK resolved, a blocking message/send, a
// message/stream, a non-blocking send polled with tasks/get (scenario "all"), or the
// errors of a send and of a stream ("auth": the token is a wrong one).
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from 'a2a-js-sdk-v03/client';

const [base, token, question, scenario = 'all'] = process.argv.slice(2);
const options = { serviceParameters: { Authorization: `Bearer ${token}` } };
const TERMINAL = new Set(['completed', 'failed', 'canceled', 'rejected']);

function params(blocking = true) {
  return {
    message: {
      kind: 'message',
      messageId: crypto.randomUUID(),
      role: 'user',
      parts: [{ kind: 'text', text: question }],
    },
    configuration: { acceptedOutputModes: ['text/plain'], blocking },
  };
}

const partsText = (parts) => (parts ?? []).map((p) => (p.kind === 'text' ? p.text : '')).join('');

function summary(task) {
  if (task?.kind !== 'task') throw new Error(`not a task: ${JSON.stringify(task)}`);
  return {
    id: task.id,
    state: task.status.state,
    text: (task.artifacts ?? []).map((a) => partsText(a.parts)).join(''),
  };
}

const report = {};
let step = 'card';
try {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory()],
    })
  );
  const client = await factory.createFromUrl(base);
  const card = await client.getAgentCard();
  report.card = {
    name: card.name,
    url: card.url,
    protocolVersion: card.protocolVersion,
    securitySchemes: card.securitySchemes,
    security: card.security,
  };
  step = 'send';
  report.send = summary(await client.sendMessage(params(), options));
  if (scenario !== 'auth') {
    step = 'stream';
    const stream = { events: [], final: '', text: '' };
    for await (const event of client.sendMessageStream(params(), options)) {
      stream.events.push(event.kind);
      if (event.kind === 'task' || event.kind === 'status-update') {
        stream.final = event.status.state;
      } else if (event.kind === 'artifact-update') {
        stream.text += partsText(event.artifact.parts);
      }
    }
    report.stream = stream;
    step = 'poll';
    let task = await client.sendMessage(params(false), options);
    report.pollFirst = task.status?.state;
    const deadline = Date.now() + 60_000;
    report.polls = 0;
    while (!TERMINAL.has(task.status.state) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      report.polls += 1;
      task = await client.getTask({ id: task.id }, options);
    }
    report.poll = summary(task);
  }
} catch (err) {
  report.errorStep = step;
  report.error = String(err?.message ?? err);
  report.errorName = err?.name ?? typeof err;
}
if (scenario === 'auth' && report.errorStep === 'send') {
  // The same refusal on the streaming path (a separate code path in the SDK).
  try {
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory()],
      })
    );
    const client = await factory.createFromUrl(base);
    for await (const _event of client.sendMessageStream(params(), options)) {
      report.streamEvents = (report.streamEvents ?? 0) + 1;
    }
  } catch (err) {
    report.streamError = String(err?.message ?? err);
    report.streamErrorName = err?.name ?? typeof err;
  }
}
console.log(JSON.stringify(report));
