// An A2A client written with the official JavaScript SDK (@a2a-js/sdk), as another
// team's agent or front end would: it reads a journey's agent card, starts a task with
// one message (message/send), then sends a second message to the same task and streams
// the reply (message/stream), and resubscribes from the stream's second event
// (tasks/resubscribe). It prints what it saw as one JSON object on stdout, for
// the Go test to check against the Session.
//
//   A2A_TOKEN=<bearer token> node a2a-client.mjs <agent URL> <first message> <second message>
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';

const [agentURL, first, second] = process.argv.slice(2);
const token = process.env.A2A_TOKEN;

const authFetch = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${token}` }),
  shouldRetryWithHeaders: async () => undefined,
});
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
  }),
);
// The card is at <agent URL>/.well-known/agent-card.json: the SDK resolves that path
// against the URL it is given, so that URL ends with a slash.
const client = await factory.createFromUrl(`${agentURL}/`);
const card = await client.getAgentCard();

const message = (text, taskId) => ({
  kind: 'message',
  messageId: crypto.randomUUID(),
  role: 'user',
  parts: [{ kind: 'text', text }],
  ...(taskId && { taskId }),
});
const texts = (parts) => parts.filter((p) => p.kind === 'text').map((p) => p.text);

const task = await client.sendMessage({ message: message(first) });
if (task.kind !== 'task') throw new Error(`message/send answered a ${task.kind}, not a task`);

const seen = (ev) => ({
  kind: ev.kind,
  eventId: ev.metadata?.['flow.journey.dev/eventId'],
  ...((ev.kind === 'task' || ev.kind === 'status-update') && { state: ev.status.state }),
  ...(ev.kind === 'status-update' && { final: ev.final }),
  ...(ev.kind === 'artifact-update' && { text: texts(ev.artifact.parts).join('') }),
});

const streamed = [];
for await (const ev of client.sendMessageStream({ message: message(second, task.id) })) {
  streamed.push(seen(ev));
}

// As if the stream had been cut after its second event: tasks/resubscribe with the
// last id seen replays what came after it.
const resumed = [];
const lastEventId = streamed[1]?.eventId;
for await (const ev of client.resubscribeTask({ id: task.id, metadata: { 'flow.journey.dev/lastEventId': lastEventId } })) {
  resumed.push(seen(ev));
}

console.log(JSON.stringify({
  card: {
    name: card.name,
    url: card.url,
    protocolVersion: card.protocolVersion,
    streaming: card.capabilities.streaming === true,
    skills: card.skills.map((s) => s.id),
  },
  sent: {
    id: task.id,
    state: task.status.state,
    replies: (task.artifacts ?? []).map((a) => texts(a.parts).join('')),
  },
  streamed,
  resumed,
}));
