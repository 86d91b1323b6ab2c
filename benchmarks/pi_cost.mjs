// B11's pi-ai side: one scripted tool session through pi-ai's `completeSimple` (the call an
// agent makes: reasoning off unless asked for), against the billing server. Run by
// benchmarks/cost.py:
//
//     node benchmarks/pi_cost.mjs <dir where pi-ai is installed> < session.json
//
// The session (JSON on stdin): provider, model, url (the server: it replaces the origin
// of the model's baseUrl), apiKey, sessionId, systemPrompt, prompt, tools ([{name,
// description, parameters}]), results ({path: text}: what the tool returns for each
// path it is called with), maxRequests. Options are pi-ai's defaults, with the
// session id and the key. Prints {"requests": n, "stopReason": ..., "text": ...}; exits 1
// with the error on stderr when a reply is an error.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.argv[2];
const dist = join(dir, "node_modules", "@earendil-works", "pi-ai", "dist");
const { builtinModels } = await import(pathToFileURL(join(dist, "providers", "all.js")).href);
const session = JSON.parse(readFileSync(0, "utf8"));

const models = builtinModels();
const found = models.getModel(session.provider, session.model);
if (!found) {
	console.error(`pi-ai has no model ${session.provider}/${session.model}`);
	process.exit(1);
}
const base = new URL(found.baseUrl);
const model = { ...found, baseUrl: session.url + base.pathname.replace(/\/$/, "") };

const context = {
	systemPrompt: session.systemPrompt,
	messages: [{ role: "user", content: session.prompt, timestamp: Date.now() }],
	tools: session.tools,
};
let requests = 0;
let reply;
while (requests < session.maxRequests) {
	reply = await models.completeSimple(model, context, { apiKey: session.apiKey, sessionId: session.sessionId });
	requests += 1;
	context.messages.push(reply);
	if (reply.stopReason === "error" || reply.stopReason === "aborted") {
		console.error(`pi-ai request ${requests}: ${reply.errorMessage}`);
		process.exit(1);
	}
	const calls = reply.content.filter((block) => block.type === "toolCall");
	if (reply.stopReason !== "toolUse" || calls.length === 0) break;
	for (const call of calls) {
		const text = session.results[call.arguments.path];
		context.messages.push({
			role: "toolResult",
			toolCallId: call.id,
			toolName: call.name,
			content: [{ type: "text", text: text ?? `no such file: ${call.arguments.path}` }],
			isError: text === undefined,
			timestamp: Date.now(),
		});
	}
}
const text = reply.content
	.filter((block) => block.type === "text")
	.map((block) => block.text)
	.join("");
console.log(JSON.stringify({ requests, stopReason: reply.stopReason, text }));
