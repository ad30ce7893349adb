// Dev-only (bench/grammar): llama.cpp's decode time per token with and without a GBNF grammar, through
// node-llama-cpp 3.21.1's prebuilt libraries (its sampler chain with llama.cpp's grammar sampler), greedy.
// Usage: node grammarbench.mjs MODEL N THREADS GBNF_FILE PROMPT
// Prints one JSON line per engine run: {"grammar": bool, "ms_per_token": ..., "tokens": n, "text": "..."};
// the time runs from the first generated token (decode steps only, as minfer run's decode + sample lines).
import fs from "node:fs";

const {getLlama, LlamaGrammarEvaluationState} = await import("node-llama-cpp");
const [modelPath, nArg, threadsArg, gfile, promptText] = process.argv.slice(2);
const n = +nArg, threads = +threadsArg;
const llama = await getLlama({
    gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true, progressLogs: false,
    maxThreads: threads, logLevel: "error",
});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const grammar = await llama.createGrammar({grammar: fs.readFileSync(gfile, "utf8")});
const prompt = model.tokenize(promptText);

async function run(withGrammar) {
    const ctx = await model.createContext({contextSize: 1024, batchSize: 512, threads: {ideal: threads, min: threads},
        sequences: 1});
    const opts = {temperature: 0};
    if (withGrammar) opts.grammarEvaluationState = new LlamaGrammarEvaluationState({model, grammar});
    const out = [];
    let t0 = 0;
    for await (const t of ctx.getSequence().evaluate(prompt, opts)) {
        if (!out.length) t0 = performance.now();
        out.push(t);
        if (out.length >= n) break;
    }
    const ms = (performance.now() - t0) / Math.max(1, out.length - 1);
    await ctx.dispose();
    return {grammar: withGrammar, ms_per_token: +ms.toFixed(3), tokens: out.length, text: model.detokenize(out)};
}

for (const g of [false, true]) console.log(JSON.stringify(await run(g)));
