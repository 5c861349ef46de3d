// The A2A JavaScript SDK (@a2a-js/sdk 1.x, A2A 1.0) against an agent, as a test drives it.
//
//   node a2a_js_v1.mjs <base-url> <token> <text> [all|auth]
//
// Prints one JSON object: the card the SDK resolved, a blocking send, a stream, a
// non-blocking send polled with GetTask (scenario "all"), or the errors of a send and of a
// stream ("auth": the token is a wrong one).
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const [base, token, question, scenario = 'all'] = process.argv.slice(2);
const options = { serviceParameters: { Authorization: `Bearer ${token}` } };
const TERMINAL = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

function request(blocking = true) {
  return {
    message: {
      messageId: crypto.randomUUID(),
      role: Role.ROLE_USER,
      parts: [{ content: { $case: 'text', value: question } }],
    },
    configuration: { acceptedOutputModes: ['text/plain'], returnImmediately: !blocking },
  };
}

function partsText(parts) {
  return (parts ?? [])
    .map((p) => (p.content?.$case === 'text' ? p.content.value : p.text ?? ''))
    .join('');
}

function summary(task) {
  return {
    id: task.id,
    state: TaskState[task.status?.state] ?? String(task.status?.state),
    text: (task.artifacts ?? []).map((a) => partsText(a.parts)).join(''),
  };
}

function taskOf(result) {
  const value = result?.payload?.$case === 'task' ? result.payload.value : result;
  if (!value?.id || !value?.status) throw new Error(`not a task: ${JSON.stringify(result)}`);
  return value;
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
    protocolVersion: client.protocolVersion,
    interfaces: card.supportedInterfaces,
    securitySchemes: card.securitySchemes,
    securityRequirements: card.securityRequirements,
  };
  step = 'send';
  report.send = summary(taskOf(await client.sendMessage(request(), options)));
  if (scenario !== 'auth') {
    step = 'stream';
    const stream = { events: [], final: '', text: '' };
    for await (const event of client.sendMessageStream(request(), options)) {
      const { $case, value } = event.payload ?? {};
      stream.events.push($case);
      if ($case === 'task' || $case === 'statusUpdate') {
        stream.final = TaskState[value.status?.state] ?? String(value.status?.state);
      } else if ($case === 'artifactUpdate') {
        stream.text += partsText(value.artifact?.parts);
      }
    }
    report.stream = stream;
    step = 'poll';
    let task = taskOf(await client.sendMessage(request(false), options));
    report.pollFirst = TaskState[task.status.state];
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
    for await (const _event of client.sendMessageStream(request(), options)) {
      report.streamEvents = (report.streamEvents ?? 0) + 1;
    }
  } catch (err) {
    report.streamError = String(err?.message ?? err);
    report.streamErrorName = err?.name ?? typeof err;
  }
}
console.log(JSON.stringify(report));
