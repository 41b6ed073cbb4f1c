// Interleaved comparison of TF.js (wasm+SIMD, cpu) and idem's built-in
// encoder on the 200 texts of texts.json, one thread each: every round runs
// run.mjs wasm, run.mjs cpu and embed's BenchmarkUSETexts200 (every kernel,
// one text per call and 8 per call) one after the other; the table gives
// each runner's median wall and CPU time per text over the rounds and its
// ratios to TF.js wasm in the same round (CPU time is the process's own
// user+system time: on a shared machine, closer to the cost). Usage: node compare.mjs [rounds] (default 5).
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

// runner -> by round: wall and CPU ms per text, and TF.js wasm's over the runner's
const results = {};
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
    round[line.runner] = [line.ms_per_text[0], line.cpu_ms_per_text[0]];
  }
  const out = execFileSync(
    testBin,
    ["-test.run", "^$", "-test.bench", "^BenchmarkUSETexts200$", "-test.cpu", "1", "-test.benchtime", "1x"],
    { cwd: path.join(root, "embed") },
  ).toString();
  for (const line of out.split("\n")) {
    const name = line.match(/^BenchmarkUSETexts200\/(\S+)\s/);
    const wall = line.match(/([\d.]+) ms\/text/);
    const cpu = line.match(/([\d.]+) cpu-ms\/text/);
    if (name && wall && cpu) {
      round[`idem ${name[1]}`] = [Number(wall[1]), Number(cpu[1])];
    }
  }
  for (const [name, [wall, cpu]] of Object.entries(round)) {
    (results[name] ??= { wall: [], cpu: [], ratio: [], cpuRatio: [] });
    results[name].wall.push(wall);
    results[name].cpu.push(cpu);
    results[name].ratio.push(round["tfjs-wasm"][0] / wall);
    results[name].cpuRatio.push(round["tfjs-wasm"][1] / cpu);
  }
  console.error(`round ${r + 1}/${rounds}: ${JSON.stringify(round)}`);
}
console.log(`${rounds} interleaved rounds, 200 texts, ${tokens.toFixed(1)} tokens a text on average, one thread; medians`);
console.log("| runner | ms/text (wall) | CPU ms/text | × TF.js wasm+SIMD, wall (same round) | × TF.js wasm+SIMD, CPU |");
console.log("|---|---|---|---|---|");
for (const [name, r] of Object.entries(results)) {
  const f = (x) => median(x).toFixed(2);
  console.log(`| ${name} | ${f(r.wall)} | ${f(r.cpu)} | ${f(r.ratio)} | ${f(r.cpuRatio)} |`);
}
