// Interleaved comparison of TF.js (wasm+SIMD, cpu) and idem's built-in
// encoder on the 200 texts of texts.json, one thread each: every round runs
// run.mjs wasm, run.mjs cpu and embed's BenchmarkUSETexts200 (every kernel,
// one text per call and 8 per call) one after the other; the table gives
// each runner's median over the rounds and the ratio to TF.js wasm in the
// same round. Usage: node compare.mjs [rounds] (default 5).
import { execFileSync } from "node:child_process";
import path from "node:path";

const here = path.dirname(new URL(import.meta.url).pathname);
const root = path.resolve(here, "..", "..");
const rounds = Number(process.argv[2] ?? 5);
const testBin = path.join(here, "embed-bench.test");

execFileSync("go", ["test", "-c", "-o", testBin, "./embed"], { cwd: root, stdio: "inherit" });

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const results = {}; // runner -> [ms per text, by round]
const ratios = {}; // runner -> [TF.js wasm ms / runner ms, by round]
let tokens = 0;
for (let r = 0; r < rounds; r++) {
  const round = {};
  for (const backend of ["wasm", "cpu"]) {
    const out = execFileSync("node", [path.join(here, "run.mjs"), backend, "1"], { cwd: here, stdio: ["ignore", "pipe", "ignore"] });
    const line = JSON.parse(out.toString().trim().split("\n").pop());
    if (backend === "wasm" && !line.simd) {
      throw new Error("TF.js wasm ran without SIMD");
    }
    tokens = line.tokens_per_text;
    round[line.runner] = line.ms_per_text[0];
  }
  const out = execFileSync(
    testBin,
    ["-test.run", "^$", "-test.bench", "^BenchmarkUSETexts200$", "-test.cpu", "1", "-test.benchtime", "1x"],
    { cwd: path.join(root, "embed") },
  ).toString();
  for (const m of out.matchAll(/^BenchmarkUSETexts200\/(\S+)\s.*?([\d.]+) ms\/text/gm)) {
    round[`idem ${m[1]}`] = Number(m[2]);
  }
  for (const [name, ms] of Object.entries(round)) {
    (results[name] ??= []).push(ms);
    (ratios[name] ??= []).push(round["tfjs-wasm"] / ms);
  }
  console.error(`round ${r + 1}/${rounds}: ${JSON.stringify(round)}`);
}
console.log(`${rounds} interleaved rounds, 200 texts, ${tokens.toFixed(1)} tokens a text on average, one thread; medians`);
console.log("| runner | ms/text | × faster than TF.js wasm+SIMD (same round) |");
console.log("|---|---|---|");
for (const [name, ms] of Object.entries(results)) {
  console.log(`| ${name} | ${median(ms).toFixed(2)} | ${median(ratios[name]).toFixed(2)} |`);
}
