#!/usr/bin/env node
// Record the reference trace of one conformance scenario.
//
//   node record.mjs --pi DIR SCENARIO.json [--driver loop|agent] > SCENARIO.expected.jsonl
//   node record.mjs --pi DIR SCENARIO.json --check   # compare with SCENARIO.expected.jsonl
//
// DIR holds node_modules/@earendil-works/pi-agent-core (and its pi-ai), e.g. a folder where
// `npm install @earendil-works/pi-agent-core@1.6.0` was run. The scenario format and the
// normalized output are those of tests/conformance/FORMAT.md#the-scenario-file (the 0.85.1
// format, with the keys of the 1.x hooks: tests/conformance/FORMAT.md#the-16-format); the
// major version of the installed package selects how the harness talks to it (1.x: system
// prompt and tool declarations in the transcript's system messages,
// tests/conformance/FORMAT.md#the-system-message-of-1x).

import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

// --- arguments ------------------------------------------------------------------------------

const argv = process.argv.slice(2);
let piDir = process.env.PI_AGENT_CORE_DIR ?? ".";
let scenarioPath;
let driverOverride;
let check = false;
for (let i = 0; i < argv.length; i++) {
	if (argv[i] === "--pi") piDir = argv[++i];
	else if (argv[i] === "--check") check = true;
	else if (argv[i] === "--driver") driverOverride = argv[++i];
	else scenarioPath = argv[i];
}
if (!scenarioPath) {
	console.error("usage: node record.mjs --pi DIR SCENARIO.json [--driver loop|agent]");
	process.exit(2);
}
const modules = path.resolve(piDir, "node_modules", "@earendil-works");
const corePackage = JSON.parse(readFileSync(path.join(modules, "pi-agent-core", "package.json"), "utf8"));
const core = await import(pathToFileURL(path.join(modules, "pi-agent-core", "dist", "index.js")).href);
const ai = await import(pathToFileURL(path.join(modules, "pi-ai", "dist", "index.js")).href);
const V1 = Number(corePackage.version.split(".")[0]) >= 1;

const scenario = JSON.parse(readFileSync(scenarioPath, "utf8"));
const driver = driverOverride ?? scenario.driver ?? "agent";
const cfg = scenario.config ?? {};

// --- canonical JSON (tests/conformance/FORMAT.md#canonical-json) ---------------------------------

function sortKeys(value) {
	if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : sortKeys(v)));
	if (value !== null && typeof value === "object") {
		const out = {};
		for (const key of Object.keys(value).sort()) {
			if (value[key] !== undefined) out[key] = sortKeys(value[key]);
		}
		return out;
	}
	return value;
}
const canonical = (value) => JSON.stringify(sortKeys(value));
const lines = [];
const out = (value) => lines.push(canonical(value));

// --- normalization (tests/conformance/FORMAT.md#normalization) -----------------------------------

function normBlock(b) {
	switch (b.type) {
		case "text":
			return { type: "text", text: b.text };
		case "thinking":
			return { type: "thinking", thinking: b.thinking, ...(b.redacted ? { redacted: true } : {}) };
		case "toolCall":
			return { type: "toolCall", id: b.id, name: b.name, arguments: b.arguments };
		case "image":
			return { type: "image", mimeType: b.mimeType, data: b.data };
		default:
			return { ...b };
	}
}
const timed = (x) => (V1 && typeof x.durationMs === "number" ? { timed: true } : {});

function normMessage(m) {
	if (m.role === "user") {
		return { role: "user", content: typeof m.content === "string" ? m.content : m.content.map(normBlock) };
	}
	if (m.role === "assistant") {
		const o = { role: "assistant", content: m.content.map(normBlock), stopReason: m.stopReason };
		if (typeof m.errorMessage === "string") o.errorMessage = m.errorMessage;
		return o;
	}
	if (m.role === "toolResult") {
		const o = {
			role: "toolResult",
			toolCallId: m.toolCallId,
			toolName: m.toolName,
			content: m.content.map(normBlock),
			isError: m.isError,
		};
		if (m.details !== undefined) o.details = m.details;
		if (m.usage !== undefined) o.usage = m.usage;
		if (m.addedToolNames !== undefined) o.addedToolNames = m.addedToolNames;
		if (V1 && m.structuredContent !== undefined) o.structuredContent = m.structuredContent;
		return { ...o, ...timed(m) };
	}
	const { timestamp: _t, ...rest } = m;
	return JSON.parse(JSON.stringify(rest));
}

function normResult(r) {
	const o = { content: (r.content ?? []).map(normBlock) };
	if (r.details !== undefined) o.details = r.details;
	if (typeof r.terminate === "boolean") o.terminate = r.terminate;
	if (r.usage !== undefined) o.usage = r.usage;
	if (V1 && r.structuredContent !== undefined) o.structuredContent = r.structuredContent;
	if (V1 && r.isError === true) o.isError = true;
	return o;
}

function normStreamEvent(e) {
	const o = { type: e.type };
	for (const key of ["contentIndex", "delta", "content"]) if (e[key] !== undefined) o[key] = e[key];
	if (e.type === "toolcall_end") o.toolCall = normBlock(e.toolCall);
	return o;
}

function normEvent(e) {
	const o = { type: e.type };
	switch (e.type) {
		case "agent_end":
			o.messages = e.messages.map(normMessage);
			break;
		case "turn_end":
			o.message = normMessage(e.message);
			o.toolResults = e.toolResults.map(normMessage);
			break;
		case "message_start":
		case "message_end":
			o.message = normMessage(e.message);
			break;
		case "message_update":
			o.message = normMessage(e.message);
			o.event = normStreamEvent(e.assistantMessageEvent);
			break;
		case "tool_execution_start":
		case "tool_execution_update":
			o.toolCallId = e.toolCallId;
			o.toolName = e.toolName;
			o.args = e.args;
			if (e.type === "tool_execution_update") o.partialResult = normResult(e.partialResult);
			break;
		case "tool_execution_end":
			o.toolCallId = e.toolCallId;
			o.toolName = e.toolName;
			o.isError = e.isError;
			o.result = normResult(e.result);
			Object.assign(o, timed(e));
			break;
	}
	return o;
}

function textOf(content) {
	if (typeof content === "string") return content;
	return content.map((b) => (b.type === "text" ? b.text : "[image]")).join("");
}

function compact(m) {
	if (m.role === "user") return `user:${textOf(m.content)}`;
	if (m.role === "assistant") {
		const blocks = [];
		for (const b of m.content) {
			if (b.type === "text") blocks.push(`text:${b.text}`);
			else if (b.type === "thinking") blocks.push(`thinking:${b.thinking}`);
			else if (b.type === "toolCall") blocks.push(`toolCall:${b.id}:${b.name}`);
		}
		return `assistant(${m.stopReason}):${blocks.join("|")}`;
	}
	if (m.role === "toolResult") {
		return `toolResult(${m.toolCallId},${m.toolName},${m.isError ? "error" : "ok"}):${textOf(m.content)}`;
	}
	return m.role;
}

// The 1.x transcript's leading system message carries what 0.85 kept in `systemPrompt` and
// `tools`; the output reports it that way and leaves it out of message lists.
const conversation = (messages) =>
	V1 && messages.length > 0 && messages[0].role === "system" ? messages.slice(1) : messages;

// --- scenario reading (tests/conformance/FORMAT.md#the-scenario-file) ----------------------------

let clock = 1;
function toMessage(spec) {
	if (typeof spec === "string") return { role: "user", content: [{ type: "text", text: spec }], timestamp: clock++ };
	return { ...structuredClone(spec), timestamp: clock++ };
}
const toMessages = (spec) => (Array.isArray(spec) ? spec.map(toMessage) : [toMessage(spec)]);
const toBlocks = (spec) => (typeof spec === "string" ? [{ type: "text", text: spec }] : structuredClone(spec));

const MODEL = {
	id: "scripted",
	name: "scripted",
	api: "scripted",
	provider: "scripted",
	baseUrl: "",
	reasoning: false,
	input: ["text"],
	cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
	contextWindow: 100000,
	maxTokens: 1000,
};
const modelNamed = (id) => ({ ...MODEL, id, name: id });
const USAGE = {
	input: 0,
	output: 0,
	cacheRead: 0,
	cacheWrite: 0,
	totalTokens: 0,
	cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

function sleep(ms, signal) {
	if (!ms) return Promise.resolve();
	return new Promise((resolve) => {
		if (signal?.aborted) return resolve();
		const timer = setTimeout(done, ms);
		function done() {
			clearTimeout(timer);
			signal?.removeEventListener("abort", done);
			resolve();
		}
		signal?.addEventListener("abort", done, { once: true });
	});
}

// --- the scripted stream function (tests/conformance/FORMAT.md#scripted-replies) -----------------

const llmCalls = [];
let streamCalls = 0;

function streamFn(model, context, options) {
	const k = streamCalls++;
	const call = {};
	if (V1) {
		const system = context.messages[0]?.role === "system" ? context.messages[0] : undefined;
		const current = ai.getCurrentSystemPrompt(context.messages);
		call.messages = conversation(context.messages).map(compact);
		call.tools = ai.getCurrentTools(context.messages).map((t) => t.name);
		if (current) call.systemPrompt = current;
		void system;
	} else {
		call.messages = context.messages.map(compact);
		call.tools = (context.tools ?? []).map((t) => t.name);
		if (context.systemPrompt) call.systemPrompt = context.systemPrompt;
	}
	if (options?.apiKey !== undefined) call.apiKey = options.apiKey;
	if (model.id !== "scripted") call.model = model.id;
	if (options?.reasoning !== undefined) call.reasoning = options.reasoning;
	llmCalls.push(call);

	const spec = scenario.responses?.[k];
	if (spec?.throw !== undefined) throw new Error(spec.throw);
	const signal = options?.signal;
	let final;
	const base = () => ({
		role: "assistant",
		content: [],
		api: model.api,
		provider: model.provider,
		model: model.id,
		usage: structuredClone(USAGE),
		stopReason: "stop",
		timestamp: clock++,
	});
	const snapshot = (content) => ({ ...base(), content: structuredClone(content) });
	async function* events() {
		await sleep(spec?.startDelayMs ?? 0, signal);
		if (signal?.aborted) {
			final = { ...base(), stopReason: "aborted", errorMessage: "Request was aborted" };
			yield { type: "error", reason: "aborted", error: final };
			return;
		}
		if (!spec) {
			final = { ...base(), stopReason: "error", errorMessage: `scripted stream: no response #${k}` };
			yield { type: "error", reason: "error", error: final };
			return;
		}
		const blocks = toBlocks(spec.content ?? []);
		const hasToolCall = blocks.some((b) => b.type === "toolCall");
		const stopReason = spec.stopReason ?? (hasToolCall ? "toolUse" : "stop");
		const terminal = () => {
			final = { ...base(), content: structuredClone(blocks), stopReason };
			if (stopReason === "error" || stopReason === "aborted") {
				final.errorMessage =
					spec.errorMessage ?? (stopReason === "error" ? "scripted error" : "Request was aborted");
				return { type: "error", reason: stopReason, error: final };
			}
			if (spec.errorMessage !== undefined) final.errorMessage = spec.errorMessage;
			return { type: "done", reason: stopReason, message: final };
		};
		if (spec.noStart) {
			yield terminal();
			return;
		}
		const content = [];
		yield { type: "start", partial: snapshot(content) };
		const chunks = (text) => {
			const size = spec.chunkSize ?? 0;
			if (text === "") return [""];
			if (!size) return [text];
			const parts = [];
			for (let i = 0; i < text.length; i += size) parts.push(text.slice(i, i + size));
			return parts;
		};
		const aborted = () => {
			final = { ...base(), content: structuredClone(content), stopReason: "aborted", errorMessage: "Request was aborted" };
			return { type: "error", reason: "aborted", error: final };
		};
		for (let i = 0; i < blocks.length; i++) {
			const b = blocks[i];
			if (b.type === "text" || b.type === "thinking") {
				const key = b.type === "text" ? "text" : "thinking";
				content.push({ type: b.type, [key]: "" });
				yield { type: `${b.type}_start`, contentIndex: i, partial: snapshot(content) };
				for (const chunk of chunks(b[key])) {
					await sleep(spec.chunkDelayMs ?? 0, signal);
					if (signal?.aborted) {
						yield aborted();
						return;
					}
					content[i][key] += chunk;
					yield { type: `${b.type}_delta`, contentIndex: i, delta: chunk, partial: snapshot(content) };
				}
				yield { type: `${b.type}_end`, contentIndex: i, content: b[key], partial: snapshot(content) };
			} else if (b.type === "toolCall") {
				content.push({ type: "toolCall", id: b.id, name: b.name, arguments: {} });
				yield { type: "toolcall_start", contentIndex: i, partial: snapshot(content) };
				for (const chunk of chunks(JSON.stringify(b.arguments ?? {}))) {
					await sleep(spec.chunkDelayMs ?? 0, signal);
					if (signal?.aborted) {
						yield aborted();
						return;
					}
					yield { type: "toolcall_delta", contentIndex: i, delta: chunk, partial: snapshot(content) };
				}
				content[i].arguments = structuredClone(b.arguments ?? {});
				yield { type: "toolcall_end", contentIndex: i, toolCall: structuredClone(content[i]), partial: snapshot(content) };
			} else {
				content.push(structuredClone(b));
			}
		}
		yield terminal();
	}
	const iterator = events();
	return {
		[Symbol.asyncIterator]: () => iterator,
		result: async () => final,
	};
}

// --- scripted tools (tests/conformance/FORMAT.md#scripted-tools) ---------------------------------

const toolExecutions = [];
const hookCalls = [];
let lastAssistant;

function fill(template, toolCallId, name, params) {
	return template
		.replaceAll("{toolCallId}", toolCallId)
		.replaceAll("{toolName}", name)
		.replaceAll("{params}", canonical(params));
}

function normOutcome(o) {
	return {
		toolCallId: o.toolCall.id,
		toolName: o.toolCall.name,
		isError: o.isError,
		result: normResult(o.result),
		...timed(o),
	};
}

function makeTool(spec) {
	const behavior = spec.behavior ?? {};
	const overrides = spec.overrides ?? {};
	const tool = {
		name: spec.name,
		label: spec.name,
		description: spec.description ?? "",
		parameters: spec.parameters ?? { type: "object", properties: {} },
		async execute(toolCallId, params, signal, onUpdate) {
			const b = { ...behavior, ...(overrides[toolCallId] ?? {}) };
			const record = { toolCallId, toolName: spec.name, params: structuredClone(params), outcome: "running" };
			toolExecutions.push(record);
			const honor = b.honorAbort ?? true;
			const abortMessage = b.abortMessage ?? "Tool aborted";
			const check = () => {
				if (honor && signal?.aborted) {
					record.outcome = "aborted";
					throw new Error(abortMessage);
				}
			};
			const wait = (ms) => sleep(ms, honor ? signal : undefined);
			check();
			const delay = b.delayMs ?? 0;
			const updates = b.updates ?? 0;
			const slice = Math.floor(delay / (updates + 1));
			for (let i = 1; i <= updates; i++) {
				await wait(slice);
				check();
				onUpdate?.({ content: [{ type: "text", text: `progress ${i}/${updates}` }], details: { progress: i } });
			}
			await wait(delay - updates * slice);
			check();
			if (b.lateUpdateAfterMs !== undefined) {
				setTimeout(
					() => onUpdate?.({ content: [{ type: "text", text: "late update" }], details: { late: true } }),
					b.lateUpdateAfterMs,
				);
			}
			let details = structuredClone(b.details ?? {});
			if (b.runToolCall !== undefined) {
				const outcomes = [];
				for (const inner of b.runToolCall) {
					const outcome = await core.runToolCall(
						{ type: "toolCall", id: inner.id, name: inner.name, arguments: structuredClone(inner.arguments ?? {}) },
						{
							assistantMessage: lastAssistant,
							context: { messages: [], tools },
							tools,
							signal,
							beforeToolCall: cfg.beforeToolCall ? beforeToolCall : undefined,
							afterToolCall: cfg.afterToolCall ? afterToolCall : undefined,
						},
					);
					outcomes.push(normOutcome(outcome));
				}
				details = { ...details, inner: outcomes };
			}
			if (b.throw !== undefined) {
				record.outcome = "threw";
				throw new Error(fill(b.throw, toolCallId, spec.name, params));
			}
			record.outcome = "returned";
			const result = {
				content: [{ type: "text", text: fill(b.result ?? "ok", toolCallId, spec.name, params) }],
				details,
			};
			if (b.terminate !== undefined) result.terminate = b.terminate;
			if (b.isError !== undefined) result.isError = b.isError;
			if (b.structuredContent !== undefined) result.structuredContent = structuredClone(b.structuredContent);
			return result;
		},
	};
	if (spec.executionMode !== undefined) tool.executionMode = spec.executionMode;
	if (spec.outputSchema !== undefined) tool.outputSchema = spec.outputSchema;
	if (spec.replay !== undefined) tool.replay = spec.replay;
	return tool;
}
const tools = (scenario.tools ?? []).map(makeTool);

// --- hooks (tests/conformance/FORMAT.md#config) --------------------------------------------------

const matches = (match = {}, toolCall) =>
	(match.toolName === undefined || match.toolName === toolCall.name) &&
	(match.toolCallId === undefined || match.toolCallId === toolCall.id);

let runSignal;
const currentSignal = () => (driver === "agent" ? agent?.signal : runSignal);

async function beforeToolCall(ctx, signal) {
	const messages = conversation(ctx.context.messages);
	hookCalls.push({
		hook: "beforeToolCall",
		toolCallId: ctx.toolCall.id,
		args: structuredClone(ctx.args),
		lastContextRole: messages.length ? messages[messages.length - 1].role : null,
	});
	for (const rule of cfg.beforeToolCall) {
		if (!matches(rule.match, ctx.toolCall)) continue;
		await sleep(rule.delayMs ?? 0, signal);
		if (rule.setArgs) Object.assign(ctx.args, rule.setArgs);
		if (rule.throw !== undefined) throw new Error(rule.throw);
		if (rule.block) {
			const r = { block: true };
			if (rule.reason !== undefined) r.reason = rule.reason;
			if (rule.terminate !== undefined) r.terminate = rule.terminate;
			return r;
		}
		return undefined;
	}
	return undefined;
}

async function afterToolCall(ctx, signal) {
	hookCalls.push({
		hook: "afterToolCall",
		toolCallId: ctx.toolCall.id,
		args: structuredClone(ctx.args),
		isError: ctx.isError,
		result: normResult(ctx.result),
	});
	for (const rule of cfg.afterToolCall) {
		if (!matches(rule.match, ctx.toolCall)) continue;
		await sleep(rule.delayMs ?? 0, signal);
		if (rule.throw !== undefined) throw new Error(rule.throw);
		return rule.override === undefined ? undefined : structuredClone(rule.override);
	}
	return undefined;
}

function initialSystem(systemPrompt, toolList) {
	return V1 ? ai.createInitialSystemMessage(systemPrompt, toolList.map(ai.toToolDeclaration)) : undefined;
}

// A context built by a rule (`context: {keepLast?, messages?, systemPrompt?, tools?}`) from `base`.
function ruleContext(spec, base) {
	const toolList = spec.tools ? (base.tools ?? []).filter((t) => spec.tools.includes(t.name)) : base.tools;
	if (!V1) {
		const messages = spec.messages
			? spec.messages.map(toMessage)
			: spec.keepLast
				? base.messages.slice(-spec.keepLast)
				: base.messages.slice();
		return { systemPrompt: spec.systemPrompt ?? base.systemPrompt, messages, tools: toolList };
	}
	let head = base.messages[0]?.role === "system" ? [base.messages[0]] : [];
	const rest = conversation(base.messages);
	const messages = spec.messages ? spec.messages.map(toMessage) : spec.keepLast ? rest.slice(-spec.keepLast) : rest.slice();
	if (spec.systemPrompt !== undefined) {
		head = head.length ? [{ ...head[0], content: spec.systemPrompt }] : [initialSystem(spec.systemPrompt, [])];
	}
	return { messages: [...head, ...messages], tools: toolList };
}

function pick(rules, call) {
	return rules.find((rule) => (rule.call ?? call) === call);
}

let turnEnds = 0;
let prepareCalls = 0;
async function prepareNextTurn(ctx, signal) {
	const call = ++prepareCalls;
	hookCalls.push({
		hook: "prepareNextTurn",
		call,
		message: compact(ctx.message),
		toolResults: ctx.toolResults.map(compact),
		contextMessages: conversation(ctx.context.messages).map(compact),
		newMessages: ctx.newMessages.length,
	});
	await fireHook("prepareNextTurn", call);
	const rule = pick(cfg.prepareNextTurn, call);
	if (!rule) return undefined;
	await sleep(rule.delayMs ?? 0, signal ?? currentSignal());
	if (rule.throw !== undefined) throw new Error(rule.throw);
	const update = {};
	if (rule.model !== undefined) update.model = modelNamed(rule.model);
	if (rule.thinkingLevel !== undefined) update.thinkingLevel = rule.thinkingLevel;
	if (rule.context !== undefined) update.context = ruleContext(rule.context, ctx.context);
	if (rule.messages !== undefined) update.messages = rule.messages.map(toMessage);
	return update;
}

let requestCalls = 0;
async function prepareRequest(request, signal) {
	const call = ++requestCalls;
	hookCalls.push({
		hook: "prepareRequest",
		call,
		contextMessages: conversation(request.context.messages).map(compact),
		model: request.model.id,
		thinkingLevel: request.thinkingLevel,
	});
	await fireHook("prepareRequest", call);
	const rule = pick(cfg.prepareRequest, call);
	if (!rule) return undefined;
	await sleep(rule.delayMs ?? 0, signal);
	if (rule.throw !== undefined) throw new Error(rule.throw);
	const update = {};
	if (rule.model !== undefined) update.model = modelNamed(rule.model);
	if (rule.thinkingLevel !== undefined) update.thinkingLevel = rule.thinkingLevel;
	if (rule.context !== undefined) update.context = ruleContext(rule.context, request.context);
	return update;
}

let finishCalls = 0;
async function finishTurn(turn, signal) {
	if (cfg.finishTurn === undefined) {
		// `stopAfterTurn` on 1.x: finishTurn runs before this turn's turn_end.
		return turnEnds + 1 >= cfg.stopAfterTurn ? { action: "end" } : undefined;
	}
	const call = ++finishCalls;
	hookCalls.push({
		hook: "finishTurn",
		call,
		message: compact(turn.message),
		toolResults: turn.toolResults.map(compact),
		newMessages: turn.newMessages.length,
	});
	await fireHook("finishTurn", call);
	const rule = pick(cfg.finishTurn, call);
	if (!rule) return undefined;
	await sleep(rule.delayMs ?? 0, signal);
	if (rule.throw !== undefined) throw new Error(rule.throw);
	return rule.action === undefined ? undefined : { action: rule.action };
}

async function shouldStopAfterTurn() {
	return turnEnds >= cfg.stopAfterTurn;
}
async function transformContext(messages) {
	const keep = cfg.transformContext.keepLast;
	if (!keep) return messages.slice();
	if (!V1) return messages.slice(-keep);
	const head = messages[0]?.role === "system" ? [messages[0]] : [];
	return [...head, ...conversation(messages).slice(-keep)];
}
async function getApiKey() {
	return cfg.apiKey;
}

// --- queues of the loop driver -----------------------------------------------------------------

const steering = [];
const followUps = [];
const polls = { steering: 0, followUp: 0 };
function drain(queue, mode) {
	if (queue.length === 0) return [];
	if (mode === "all") return queue.splice(0, queue.length);
	return queue.splice(0, 1);
}
const convertToLlm = (messages) =>
	messages.filter((m) => (V1 && m.role === "system") || m.role === "user" || m.role === "assistant" || m.role === "toolResult");

function loopConfig() {
	const config = {
		model: MODEL,
		convertToLlm,
		toolExecution: cfg.toolExecution ?? "parallel",
		getSteeringMessages: async () => {
			polls.steering++;
			return drain(steering, cfg.steeringMode ?? "one-at-a-time");
		},
		getFollowUpMessages: async () => {
			polls.followUp++;
			return drain(followUps, cfg.followUpMode ?? "one-at-a-time");
		},
	};
	Object.assign(config, hookOptions());
	if (config.prepareNextTurn) {
		const hook = config.prepareNextTurn;
		config.prepareNextTurn = (ctx) => hook(ctx, runSignal);
	}
	return config;
}

function hookOptions() {
	const o = {};
	if (cfg.beforeToolCall) o.beforeToolCall = beforeToolCall;
	if (cfg.afterToolCall) o.afterToolCall = afterToolCall;
	if (cfg.transformContext) o.transformContext = transformContext;
	if (cfg.apiKey !== undefined) o.getApiKey = getApiKey;
	if (cfg.prepareNextTurn) o.prepareNextTurn = prepareNextTurn;
	if (V1) {
		if (cfg.prepareRequest) o.prepareRequest = prepareRequest;
		if (cfg.finishTurn || cfg.stopAfterTurn !== undefined) o.finishTurn = finishTurn;
	} else if (cfg.stopAfterTurn !== undefined) {
		o.shouldStopAfterTurn = shouldStopAfterTurn;
	}
	return o;
}

// --- actions (tests/conformance/FORMAT.md#actions) -----------------------------------------------

const actions = (scenario.actions ?? []).map((a) => ({ ...a, fired: false, seen: 0 }));
let runIndex = 0;
let agent;

function eventMatches(on, event) {
	if (on.type !== event.type) return false;
	if (on.toolCallId !== undefined && event.toolCallId !== on.toolCallId) return false;
	if (on.toolName !== undefined && event.toolName !== on.toolName) return false;
	if (on.role !== undefined && event.message?.role !== on.role) return false;
	if (on.eventType !== undefined && event.assistantMessageEvent?.type !== on.eventType) return false;
	return true;
}

async function listener(event) {
	if (event.type === "turn_end") turnEnds++;
	if (event.type === "message_end" && event.message.role === "assistant") lastAssistant = event.message;
	out(normEvent(event));
	for (const action of actions) {
		const on = action.on;
		if (action.fired || !on || on.hook !== undefined || (action.run ?? 0) !== runIndex) continue;
		if (eventMatches(on, event)) {
			action.seen++;
			if (action.seen === (on.nth ?? 1)) await act(action);
		}
	}
}

async function fireHook(hook, call) {
	for (const action of actions) {
		const on = action.on ?? {};
		if (action.fired || on.hook !== hook || (action.run ?? 0) !== runIndex) continue;
		if ((on.nth ?? 1) === call) await act(action);
	}
}

let abortController;
async function act(action) {
	action.fired = true;
	const line = { type: "#action", do: action.do };
	switch (action.do) {
		case "steer":
		case "followUp": {
			const message = toMessage(action.message);
			line.message = normMessage(message);
			out(line);
			if (agent) (action.do === "steer" ? agent.steer(message) : agent.followUp(message));
			else (action.do === "steer" ? steering : followUps).push(message);
			return;
		}
		case "abort":
			out(line);
			if (agent) agent.abort();
			else abortController?.abort();
			return;
		case "clearQueues":
			out(line);
			if (agent) agent.clearAllQueues();
			steering.length = 0;
			followUps.length = 0;
			return;
		case "throw": {
			const text = action.error ?? "listener error";
			line.error = text;
			out(line);
			throw new Error(text);
		}
		case "prompt":
		case "continue":
			try {
				if (action.do === "prompt") await agent.prompt(toPromptArg(action.message));
				else await agent.continue();
				line.error = null;
			} catch (error) {
				line.error = error instanceof Error ? error.message : String(error);
			}
			out(line);
			return;
		default:
			throw new Error(`unknown action ${action.do}`);
	}
}

function toPromptArg(spec) {
	if (typeof spec === "string") return spec;
	return Array.isArray(spec) ? spec.map(toMessage) : toMessage(spec);
}

// --- running -----------------------------------------------------------------------------------

const runs = scenario.runs ?? [{ prompt: scenario.prompt ?? "Hello" }];
const systemPrompt = scenario.systemPrompt ?? "";
const initialMessages = (scenario.initialMessages ?? []).map(toMessage);
const transcript = [];

if (driver === "agent") {
	const options = {
		initialState: { systemPrompt, model: MODEL, tools, messages: initialMessages },
		streamFn,
		toolExecution: cfg.toolExecution ?? "parallel",
		steeringMode: cfg.steeringMode ?? "one-at-a-time",
		followUpMode: cfg.followUpMode ?? "one-at-a-time",
	};
	const hooks = hookOptions();
	if (hooks.prepareNextTurn) {
		delete hooks.prepareNextTurn;
		options.prepareNextTurnWithContext = prepareNextTurn;
	}
	if (hooks.shouldStopAfterTurn) {
		hooks.shouldStopAfterTurn = async () => shouldStopAfterTurn();
	}
	Object.assign(options, hooks);
	agent = new core.Agent(options);
	agent.subscribe(listener);
} else {
	const head = initialSystem(systemPrompt, tools);
	transcript.push(...(head ? [head] : []), ...initialMessages);
}

const timers = [];
for (let index = 0; index < runs.length; index++) {
	runIndex = index;
	const run = runs[index];
	const mode = run.continue ? "continue" : "prompt";
	out({ type: "#run", run: index, mode });
	abortController = new AbortController();
	runSignal = abortController.signal;
	for (const action of actions) {
		if (action.afterMs !== undefined && (action.run ?? 0) === index) {
			timers.push(
				setTimeout(() => {
					if (!action.fired) void act(action);
				}, action.afterMs),
			);
		}
	}
	if (agent) {
		try {
			if (mode === "prompt") await agent.prompt(toPromptArg(run.prompt));
			else await agent.continue();
			out({ type: "#run_end", run: index, error: null });
		} catch (error) {
			out({ type: "#run_end", run: index, error: error instanceof Error ? error.message : String(error) });
		}
	} else {
		const context = V1
			? { messages: transcript.slice(), tools }
			: { systemPrompt, messages: transcript.slice(), tools };
		try {
			const returned =
				mode === "prompt"
					? await core.runAgentLoop(toMessages(run.prompt), context, loopConfig(), listener, runSignal, streamFn)
					: await core.runAgentLoopContinue(context, loopConfig(), listener, runSignal, streamFn);
			transcript.push(...returned);
			out({ type: "#run_end", run: index, error: null, returned: returned.map(normMessage) });
		} catch (error) {
			out({ type: "#run_end", run: index, error: error instanceof Error ? error.message : String(error) });
		}
	}
}
for (const timer of timers) clearTimeout(timer);

const result = { type: "#result", driver, llmCalls, toolExecutions, hookCalls };
if (agent) {
	const state = agent.state;
	result.messages = conversation(state.messages).map(normMessage);
	result.errorMessage = state.errorMessage ?? null;
	result.isStreaming = state.isStreaming;
	result.pendingToolCalls = [...state.pendingToolCalls].sort();
	result.hasQueuedMessages = agent.hasQueuedMessages();
} else {
	result.messages = conversation(transcript).map(normMessage);
	result.polls = { ...polls };
	result.queued = { steering: steering.length, followUp: followUps.length };
}
out(result);
const text = lines.map((line) => `${line}\n`).join("");
if (check) {
	const expected = scenarioPath.replace(/\.json$/, ".expected.jsonl");
	const same = existsSync(expected) && readFileSync(expected, "utf8") === text;
	console.log(`${same ? "same" : "differs"} ${path.basename(scenarioPath)} (pi-agent-core ${corePackage.version})`);
	process.exit(same ? 0 : 1);
}
process.stdout.write(text);
