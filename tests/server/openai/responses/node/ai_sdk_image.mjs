// The Vercel AI SDK against the bridge's POST /v1/responses: generateText and streamText
// with openai.tools.imageGeneration. Usage: node ai_sdk_image.mjs <.cache/ai-sdk> <base url>
// <token> <size>. Prints one JSON line per call: the text, the content part types, and
// each image tool result (its base64 length and whether it decodes to a PNG).
import { createRequire } from "node:module";
import path from "node:path";

const [prefix, baseURL, apiKey, size] = process.argv.slice(2);
const require = createRequire(path.join(prefix, "package.json"));
const { generateText, streamText } = await import(require.resolve("ai"));
const { createOpenAI } = await import(require.resolve("@ai-sdk/openai"));

const openai = createOpenAI({ baseURL, apiKey });
const tools = { image_generation: openai.tools.imageGeneration({ size, outputFormat: "png" }) };

function images(results) {
  return results
    .filter((item) => item.toolName === "image_generation")
    .map((item) => {
      const bytes = Buffer.from(item.output.result, "base64");
      return { length: item.output.result.length, png: bytes.subarray(1, 4).toString() === "PNG" };
    });
}

const generated = await generateText({
  model: openai.responses("gpt-5.5"),
  system: "You draw what you are asked.",
  prompt: "a red fox",
  tools,
});
console.log(JSON.stringify({
  call: "generateText",
  text: generated.text,
  content: generated.content.map((part) => part.type),
  images: images(generated.toolResults),
  finishReason: generated.finishReason,
}));

const streamed = streamText({ model: openai.responses("gpt-5.5"), prompt: "a red fox", tools });
const parts = [];
for await (const part of streamed.fullStream) parts.push(part.type);
console.log(JSON.stringify({
  call: "streamText",
  text: await streamed.text,
  parts: [...new Set(parts)],
  images: images(await streamed.toolResults),
}));
